package nodes_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// TestEventsCarryPool: every node event names the node's pool (poolId): the pool of its join
// token for our agent, the pool its cluster_label names for a stock Cubelet; cordon and
// uncordon as much as drain, the health events, joined and deleted.
func TestEventsCarryPool(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		a := nodetest.From("127.0.0.1")
		join := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1"})
		if code, out := e.Call(a, "POST", nodeapi.PathRegister, join, nodetest.Patch(t, nodetest.WithNode("127.0.0.1"), "cluster_label", "")); code != 200 {
			t.Fatalf("join: %d %s", code, out)
		}
		if code, out := e.Call(a, "POST", nodeapi.PathRegister, "", nodetest.WithNode("10.0.0.7")); code != 200 { // cluster_label default-cluster
			t.Fatalf("stock register: %d %s", code, out)
		}
		for _, id := range []string{"127.0.0.1", "10.0.0.7"} {
			if _, err := e.Reg.Cordon(ctx, id, "kernel update", "ops"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Reg.Uncordon(ctx, id, "ops"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Reg.Drain(ctx, id, "retire", "ops"); err != nil { // drained at once: it never reported
				t.Fatal(err)
			}
		}
		e.Reg.CheckHealth(ctx)
		e.Clock.Add(nodes.DefaultHeartbeatTimeout + time.Second) // past the window of a node whose interval is not observed: the timeout
		e.Reg.CheckHealth(ctx)
		e.Clock.Add(nodes.DefaultHeartbeatTimeout) // and past two: Down
		e.Reg.CheckHealth(ctx)
		for _, id := range []string{"127.0.0.1", "10.0.0.7"} {
			if _, err := e.Reg.Delete(ctx, id, true, "ops"); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"127.0.0.1", "10.0.0.7"} {
			seen := map[string]bool{}
			for _, ev := range eventsOf(e, id) {
				seen[ev.Type] = true
				var d struct {
					Pool string `json:"poolId"`
				}
				json.Unmarshal(ev.Data, &d)
				if d.Pool != nodetest.Pool.ID {
					t.Errorf("%s %s: poolId %q, want %s (%s)", id, ev.Type, d.Pool, nodetest.Pool.ID, ev.Data)
				}
			}
			for _, typ := range []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventUncordoned, nodes.EventDraining, nodes.EventDrained, nodes.EventSuspect, nodes.EventDown, nodes.EventDeleted} {
				if !seen[typ] {
					t.Errorf("%s: no %s event (%v)", id, typ, seen)
				}
			}
		}
	})
}
