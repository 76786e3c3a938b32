package strictjson

import (
	"testing"

	"github.com/cubefleet/cubefleet"
)

func TestDecode(t *testing.T) {
	type in struct {
		TenantID string `json:"tenantId"`
		Limit    int    `json:"limit"`
		Nested   struct {
			Max int64 `json:"max"`
		} `json:"nested"`
	}
	for _, tc := range []struct {
		data, path string
		ok         bool
	}{
		{`{"tenantId":"root","limit":3}`, "", true},
		{`{"tenantId":"root","extra":1}`, "extra", false},
		{`{"tenantId":5}`, "tenantId", false},
		{`{"limit":1.5}`, "limit", false},
		{`{"nested":{"max":"x"}}`, "nested.max", false},
		{`{"tenantId":"root"} {}`, "", false},
		{`[1]`, "", false},
		{`{`, "", false},
		{``, "", false},
	} {
		var v in
		err := Decode([]byte(tc.data), &v)
		if (err == nil) != tc.ok {
			t.Errorf("Decode(%s) = %v, want ok=%v", tc.data, err, tc.ok)
			continue
		}
		if err == nil {
			continue
		}
		e, isE := err.(*cubefleet.Error)
		if !isE || e.Code != cubefleet.CodeInvalidInput || e.Details["path"] != tc.path {
			t.Errorf("Decode(%s) = %#v, want INVALID_INPUT at %q", tc.data, err, tc.path)
		}
	}
}
