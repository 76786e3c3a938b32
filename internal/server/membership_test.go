package server

import (
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestStaticMembership: with --origins (Config.Membership) only registered nodes whose id is
// the host of an origin are schedulable: a node outside the list joins and reports like any
// other but gets no sandbox, and creates beyond the members' room wait rather than go there.
func TestStaticMembership(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, func(c *Config) { c.Membership = []string{"http://127.0.0.2:9999", "https://cube-b.example"} })
		_, agents := sandboxFleet(t, e, 0, nil, 2, "127.0.0.2", "127.0.0.3")
		var placed []sandboxes.Sandbox
		for range 3 {
			var s sandboxes.Sandbox
			e.must(e.admin, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "command": []string{"sleep"}, "async": true}, &s)
			placed = append(placed, s)
		}
		deadline := time.Now().Add(10 * time.Second)
		for i, s := range placed {
			for {
				var got sandboxes.Sandbox
				e.must(e.admin, "sandboxes.get", map[string]any{"tenantId": "root", "id": s.ID}, &got)
				if want := i < 2; want == (got.State == sandboxes.StateRunning) && (want || got.State == sandboxes.StatePending) {
					if got.NodeID != "" && got.NodeID != "127.0.0.2" {
						t.Errorf("sandbox %d on %s, outside the membership", i, got.NodeID)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sandbox %d: %s on %q, want the first two running on 127.0.0.2 and the third pending", i, got.State, got.NodeID)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if n := len(agents[1].Running()); n != 0 {
			t.Errorf("the node outside the membership runs %d sandboxes", n)
		}
	})
}
