package server

import (
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
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

// TestStaticMembershipSlots: with a static membership each Cube runs at most MemberSlots (3)
// sandboxes at once, though its agent offers 6: of 7 creates on two Cubes, 3 run on each and
// the seventh waits; when one ends, the seventh is placed in its room.
func TestStaticMembershipSlots(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, func(c *Config) {
			c.Membership, c.MemberSlots = []string{"http://127.0.0.2:8080", "http://127.0.0.3:8080"}, 3
		})
		sandboxFleet(t, e, 0, nil, 6, "127.0.0.2", "127.0.0.3")
		var ids []string
		for range 7 {
			var s sandboxes.Sandbox
			e.must(e.admin, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "command": []string{"sleep"}, "async": true}, &s)
			ids = append(ids, s.ID)
		}
		states := func() (map[string][]string, []string) {
			on, pending := map[string][]string{}, []string(nil)
			for _, id := range ids {
				var got sandboxes.Sandbox
				e.must(e.admin, "sandboxes.get", map[string]any{"tenantId": "root", "id": id}, &got)
				switch got.State {
				case sandboxes.StateRunning:
					on[got.NodeID] = append(on[got.NodeID], id)
				case sandboxes.StatePending:
					pending = append(pending, id)
				}
			}
			return on, pending
		}
		var on map[string][]string
		var pending []string
		testkit.WaitFor(t, 15*time.Second, "3 sandboxes running on each Cube, the seventh pending", func() bool {
			on, pending = states()
			return len(on["127.0.0.2"]) == 3 && len(on["127.0.0.3"]) == 3 && len(pending) == 1
		})
		time.Sleep(500 * time.Millisecond) // a few placement rounds: the seventh still waits
		if on, pending = states(); len(on["127.0.0.2"]) != 3 || len(on["127.0.0.3"]) != 3 || len(pending) != 1 {
			t.Fatalf("a fourth sandbox was placed on a Cube: running %v, pending %v", on, pending)
		}
		last := pending[0]
		e.must(e.admin, "sandboxes.delete", map[string]any{"tenantId": "root", "id": on["127.0.0.2"][0]}, nil)
		testkit.WaitFor(t, 15*time.Second, "the seventh placed once a slot is free", func() bool {
			var got sandboxes.Sandbox
			e.must(e.admin, "sandboxes.get", map[string]any{"tenantId": "root", "id": last}, &got)
			return got.State == sandboxes.StateRunning && got.NodeID == "127.0.0.2"
		})
	})
}
