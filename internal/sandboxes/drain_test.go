package sandboxes_test

import (
	"context"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestDrainWaitsForPlacedSandbox: a node whose only sandbox was placed a moment before (its
// report does not list it yet) is not drained when the drain starts, nor by a report that still
// does not list it: node.drained is written only once no sandbox placed there is
// unacknowledged (here: its agent's next work request moves the queued start off the draining
// node, to another node, where it runs to its end) and the node reports none.
func TestDrainWaitsForPlacedSandbox(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		s := e.Create("root", "true")
		if s.State != sandboxes.StateStarting || s.NodeID != a.ID {
			t.Fatalf("created: %+v", s)
		}
		drained := func() int {
			t.Helper()
			e.Flush()
			evs, _, err := events.List(ctx, e.DB, events.Filter{TenantID: "root", Subject: a.ID, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, ev := range evs {
				if ev.Type == nodes.EventDrained {
					n++
				}
			}
			return n
		}
		v, err := e.Reg.Drain(ctx, a.ID, "scale down", "ops")
		if err != nil {
			t.Fatal(err)
		}
		if v.Drain == nil || v.Drain.State != nodes.DrainDraining || v.Drain.SandboxesLeft != 1 {
			t.Fatalf("drain of a node with a sandbox placed a moment before: %+v, want Draining with 1 left", v.Drain)
		}
		a.Report() // the agent has not taken the sandbox yet: its report lists none
		if v, _ := e.Reg.Get(ctx, a.ID); v.Drain == nil || v.Drain.State != nodes.DrainDraining {
			t.Fatalf("after a report that does not list the placed sandbox: %+v, want Draining", v.Drain)
		}
		if n := drained(); n != 0 {
			t.Fatalf("%d node.drained events while a sandbox placed there has not started", n)
		}

		b := e.NewAgent("127.0.0.3", 4)
		b.Behave = func(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{For: 10 * time.Millisecond} }
		b.Start(20 * time.Millisecond)
		a.Start(20 * time.Millisecond)
		e.Eventually(5*time.Second, func() string { // the agent's work request moves the start off the draining node
			if got := e.Get("root", s.ID); got.State != sandboxes.StatePending {
				return "the sandbox is " + string(got.State) + " on " + got.NodeID + ", want pending (placed again)"
			}
			return ""
		})
		if err := e.Svc.PlaceWaiting(ctx); err != nil {
			t.Fatal(err)
		}
		if _, done, err := e.Svc.Wait(ctx, "root", s.ID, false, 10*time.Second); err != nil || !done {
			t.Fatalf("wait: %v %v: %+v", done, err, e.Get("root", s.ID))
		}
		e.Eventually(5*time.Second, func() string {
			if v, _ := e.Reg.Get(ctx, a.ID); v.Drain == nil || v.Drain.State != nodes.DrainDrained {
				return "the node is not drained after its sandbox ended"
			}
			return ""
		})
		if got := e.Get("root", s.ID); got.State != sandboxes.StateExited || got.NodeID != b.ID {
			t.Errorf("the sandbox ended %s on %s, want exited on %s", got.State, got.NodeID, b.ID)
		}
		if n := drained(); n != 1 {
			t.Errorf("%d node.drained events, want 1", n)
		}
	})
}
