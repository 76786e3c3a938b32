package nodeapi_test

import (
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// TestParseJoinTokenIP: a join token's --ip is an address a node can have.
func TestParseJoinTokenIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.5": "10.0.0.5", "127.0.0.1": "127.0.0.1", "fd00::5": "fd00::5", "::ffff:10.0.0.5": "10.0.0.5",
		"0.0.0.0":         `"0.0.0.0" is the unspecified address, not a node's`,
		"::":              `"::" is the unspecified address, not a node's`,
		"224.0.0.1":       `"224.0.0.1" is a multicast address, not a node's`,
		"239.255.0.9":     "a multicast address",
		"ff02::1":         "a multicast address",
		"255.255.255.255": "the broadcast address",
		"fe80::1%eth0":    "an address with a zone",
		"not-an-ip":       `"not-an-ip" is not an IP address`,
		"10.0.0.0/24":     "is not an IP address",
		"":                "is not an IP address",
	} {
		a, err := nodeapi.ParseJoinTokenIP(in)
		got := a.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) || err == nil && got != want {
			t.Errorf("ParseJoinTokenIP(%q) = %q, want %q", in, got, want)
		}
	}
}
