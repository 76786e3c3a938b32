package nodes_test

import (
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodes"
)

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
