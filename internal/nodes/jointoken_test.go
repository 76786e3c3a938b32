package nodes_test

import (
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodes"
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
		a, err := nodes.ParseJoinTokenIP(in)
		got := a.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) || err == nil && got != want {
			t.Errorf("ParseJoinTokenIP(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestJoinTokenStatus is the state rule: revoked wins, then expired, then used.
func TestJoinTokenStatus(t *testing.T) {
	for _, c := range []struct {
		now, expires, revoked int64
		left                  int
		want                  nodes.JoinTokenState
	}{
		{10, 20, 0, 1, nodes.JoinTokenUsable},
		{10, 20, 0, 0, nodes.JoinTokenUsed},
		{20, 20, 0, 1, nodes.JoinTokenExpired},
		{30, 20, 0, 0, nodes.JoinTokenExpired},
		{10, 20, 5, 1, nodes.JoinTokenRevoked},
		{30, 20, 5, 0, nodes.JoinTokenRevoked},
	} {
		if got := nodes.JoinTokenStatus(c.now, c.expires, c.revoked, c.left); got != c.want {
			t.Errorf("JoinTokenStatus(%d, %d, %d, %d) = %s, want %s", c.now, c.expires, c.revoked, c.left, got, c.want)
		}
	}
}
