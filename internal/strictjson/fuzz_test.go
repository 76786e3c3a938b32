package strictjson

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/cubefleet/cubefleet"
)

var fuzzSeeds = []string{
	`{}`, ``, `{"tenantId":"root","limit":3}`, `{"tenantId":"a","tenantId":"b"}`, `{"TENANTID":"root"}`,
	`{"raw":{"x":[{"k":1,"k":2}]}}`, `{"config":{"a.b":"1"}}`, `[1]`, `{"a":1} {}`, "{\"a\":\"\xff\"}",
	`{"list":[{"max":1},{"max":true}]}`, `{"nested":{"MAX":1}}`, `{"a":"\ud800"}`, ` {"a" : [ ] } `,
}

// FuzzRead: Read never panics; it accepts exactly the inputs that are one JSON object (or blank)
// with no name twice in an object, and returns the object without the white space around it.
// Anything else is INVALID_INPUT (PAYLOAD_TOO_LARGE over the limit).
func FuzzRead(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 12
		got, err := Read(bytes.NewReader(data), limit, int64(len(data)))
		trimmed := bytes.Trim(data, " \t\r\n") // JSON's white space
		valid := len(trimmed) == 0 || trimmed[0] == '{' && jsontext.Value(trimmed).IsValid()
		switch {
		case len(data) > limit:
			if valid != (err == nil) && !cubefleet.IsCode(err, cubefleet.CodePayloadTooLarge) {
				t.Fatalf("Read(%q) over the limit = %v", data, err)
			}
		case valid && err != nil:
			t.Fatalf("Read(%q) = %v, want it accepted", data, err)
		case !valid && err == nil:
			t.Fatalf("Read(%q) accepted an input that is not one JSON object", data)
		case err != nil:
			var e *cubefleet.Error
			if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput {
				t.Fatalf("Read(%q) = %v, want INVALID_INPUT", data, err)
			}
		case len(trimmed) == 0 && string(got) != "{}", len(trimmed) > 0 && !bytes.Equal(got, trimmed):
			t.Fatalf("Read(%q) = %q, want %q", data, got, trimmed)
		}
	})
}

// FuzzDecode: Decode never panics, and refuses with INVALID_INPUT whatever it does not accept.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v input
		if err := Decode(data, &v); err != nil {
			var e *cubefleet.Error
			if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput {
				t.Fatalf("Decode(%q) = %v, want INVALID_INPUT", data, err)
			}
		}
		var all input
		errAll := DecodeAll(data, &all)
		if (errAll == nil) != (Decode(data, new(input)) == nil) || errAll != nil && !cubefleet.IsCode(errAll, cubefleet.CodeInvalidInput) {
			t.Fatalf("DecodeAll(%q) = %v, Decode disagrees", data, errAll)
		}
		var p struct {
			TenantID string `json:"tenantId"`
		}
		if err := DecodePart(data, &p); err != nil && !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Fatalf("DecodePart(%q) = %v, want INVALID_INPUT", data, err)
		}
	})
}
