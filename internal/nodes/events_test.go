package nodes

import (
	"context"
	"encoding/json"
	"testing"
)

// TestEventsCarryPool: every node event names the node's pool (poolId): the pool of its join
// token for our agent, the pool its cluster_label names for a stock Cubelet; cordon and
// uncordon as much as drain, the health events, joined and deleted.
func TestEventsCarryPool(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		a := from("127.0.0.1")
		join := e.joinToken(JoinTokenInput{IP: "127.0.0.1"})
		if code, out := e.call(a, "POST", registerPath, join, patch(t, withNode(t, "127.0.0.1"), "cluster_label", "")); code != 200 {
			t.Fatalf("join: %d %s", code, out)
		}
		if code, out := e.call(a, "POST", registerPath, "", withNode(t, "10.0.0.7")); code != 200 { // cluster_label default-cluster
			t.Fatalf("stock register: %d %s", code, out)
		}
		for _, id := range []string{"127.0.0.1", "10.0.0.7"} {
			if _, err := e.reg.Cordon(ctx, id, "kernel update", "ops"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.reg.Uncordon(ctx, id, "ops"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.reg.Drain(ctx, id, "retire", "ops"); err != nil { // drained at once: it never reported
				t.Fatal(err)
			}
		}
		e.reg.CheckHealth(ctx)
		e.clock.Add(2 * DefaultHeartbeatTimeout)
		e.reg.CheckHealth(ctx)
		for _, id := range []string{"127.0.0.1", "10.0.0.7"} {
			if _, err := e.reg.Delete(ctx, id, true, "ops"); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"127.0.0.1", "10.0.0.7"} {
			seen := map[string]bool{}
			for _, ev := range e.eventsOf(id) {
				seen[ev.Type] = true
				var d struct {
					Pool string `json:"poolId"`
				}
				json.Unmarshal(ev.Data, &d)
				if d.Pool != testPool.ID {
					t.Errorf("%s %s: poolId %q, want %s (%s)", id, ev.Type, d.Pool, testPool.ID, ev.Data)
				}
			}
			for _, typ := range []string{EventJoined, EventCordoned, EventUncordoned, EventDraining, EventDrained, EventSuspect, EventDeleted} {
				if !seen[typ] {
					t.Errorf("%s: no %s event (%v)", id, typ, seen)
				}
			}
		}
	})
}
