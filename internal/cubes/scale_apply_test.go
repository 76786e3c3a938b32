package cubes

import (
	"testing"

	"github.com/cubefleet/cubefleet/internal/ionos"
)

// TestOriginOf: a replacement's URL becomes the load balancer target scale apply hands the
// control plane's target group to; anything else is refused naming --replacement.
func TestOriginOf(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want ionos.Target
		bad  bool
	}{
		{url: "http://10.7.0.4:3010", want: ionos.Target{IP: "10.7.0.4", Port: 3010, Weight: 1, HealthCheckEnabled: true}},
		{url: "https://10.7.0.4", want: ionos.Target{IP: "10.7.0.4", Port: 443, Weight: 1, HealthCheckEnabled: true}},
		{url: "http://10.7.0.4/", want: ionos.Target{IP: "10.7.0.4", Port: 80, Weight: 1, HealthCheckEnabled: true}},
		{url: "http://cp.example:3010", bad: true},
		{url: "ftp://10.7.0.4", bad: true},
		{url: "10.7.0.4:3010", bad: true},
		{url: "", bad: true},
	} {
		got, err := originOf(tc.url)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("%q: %+v %v", tc.url, got, err)
		}
	}
}
