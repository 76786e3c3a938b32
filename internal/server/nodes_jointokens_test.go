package server

import (
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestJoinTokenCreateRules: nodes.joinTokens.create takes uses 1 to 10,000 (absent means 1; an
// explicit 0 is refused, not turned into 1), a ttlSeconds of at most 7 days, and an ip a node
// can have; every refusal is INVALID_INPUT naming the field.
func TestJoinTokenCreateRules(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, allowLoopback)
		e.makePool("fra-cubes")
		for _, c := range []struct {
			in   map[string]any
			path string
			msg  string
		}{
			{map[string]any{"uses": 0}, "uses", "uses must be 1 to 10000 (got 0)"},
			{map[string]any{"uses": -1}, "uses", "uses must be 1 to 10000"},
			{map[string]any{"uses": 10001}, "uses", "uses must be 1 to 10000"},
			{map[string]any{"ttlSeconds": 604801}, "ttlSeconds", "ttlSeconds is 1 to 604800"},
			{map[string]any{"ip": "0.0.0.0"}, "ip", "the unspecified address"},
			{map[string]any{"ip": "224.0.0.1"}, "ip", "a multicast address"},
			{map[string]any{"ip": "255.255.255.255"}, "ip", "the broadcast address"},
		} {
			c.in["pool"] = "fra-cubes"
			ce := e.mustFail(e.admin, "nodes.joinTokens.create", c.in, cubefleet.CodeInvalidInput)
			if ce.Details["path"] != c.path || !strings.Contains(ce.Message, c.msg) {
				t.Errorf("%v: %s at %v, want %q at %s", c.in, ce.Message, ce.Details["path"], c.msg, c.path)
			}
		}
		var jt JoinTokenCreated
		e.must(e.admin, "nodes.joinTokens.create", map[string]any{"pool": "fra-cubes"}, &jt)
		if jt.JoinToken.Uses != 1 {
			t.Errorf("uses absent: %d, want 1", jt.JoinToken.Uses)
		}
	})
}
