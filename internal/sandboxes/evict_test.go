package sandboxes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestDrainDeadline: a drain without a deadline evicts nothing, however long it lasts; with
// one, the sandboxes still running when it passes are stopped on their node and end killed with
// reason node_drained, their results kept, and the node is then drained. A sandbox that ended
// by itself before the deadline keeps its own end.
func TestDrainDeadline(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = func(sp nodeapi.SandboxSpec) sandboxtest.Run {
			if sp.Argv[0] == "short" {
				return sandboxtest.Run{Stdout: []byte("done\n"), For: 10 * time.Millisecond}
			}
			return sandboxtest.Run{Stdout: []byte("never printed\n")} // runs until it is stopped
		}
		a.Start(20 * time.Millisecond)
		long, short := e.Create("root", "long"), e.Create("root", "short")
		for _, s := range []sandboxes.Sandbox{long, short} {
			if _, _, err := e.Svc.Wait(ctx, "root", s.ID, true, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}

		if _, done, err := e.Svc.Wait(ctx, "root", short.ID, false, 10*time.Second); err != nil || !done {
			t.Fatalf("wait for the short sandbox's end: %v %v", done, err)
		}

		// Without a deadline nothing is evicted.
		if _, err := e.Reg.Drain(ctx, a.ID, "kernel update", "ops"); err != nil {
			t.Fatal(err)
		}
		e.Clock.Add(24 * time.Hour)
		a.Report() // the node stays Ready across the clock's jumps
		if err := e.Svc.EvictDrained(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.Get("root", long.ID); got.State != sandboxes.StateRunning || got.StopRequestedAt != 0 {
			t.Fatalf("a drain without a deadline stopped a sandbox: %+v", got)
		}

		// A deadline a minute away: nothing before it, the running sandbox stopped after it.
		v, err := e.Reg.DrainWithin(ctx, a.ID, "", "ops", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := e.Clock.Now().Add(time.Minute).UnixMilli(); v.Drain == nil || v.Drain.Deadline != want || v.Drain.Reason != "kernel update" {
			t.Fatalf("drain with a deadline: %+v, want deadline %d and the first reason", v.Drain, want)
		}
		if v, _ := e.Reg.DrainWithin(ctx, a.ID, "", "ops", time.Hour); v.Drain.Deadline != e.Clock.Now().Add(time.Minute).UnixMilli() {
			t.Errorf("a later deadline pushed the first one back: %d", v.Drain.Deadline)
		}
		e.Clock.Add(59 * time.Second)
		a.Report()
		e.Svc.Reconcile(ctx)
		if got := e.Get("root", long.ID); got.State != sandboxes.StateRunning || got.StopRequestedAt != 0 {
			t.Fatalf("stopped before the deadline: %+v", got)
		}
		e.Clock.Add(time.Second)
		a.Report()
		e.Svc.Reconcile(ctx)
		got, done, err := e.Svc.Wait(ctx, "root", long.ID, false, 10*time.Second)
		if err != nil || !done {
			t.Fatalf("wait for the evicted sandbox: %v %v", done, err)
		}
		if got.State != sandboxes.StateKilled || got.Reason != sandboxes.ReasonNodeDrained || !strings.Contains(got.Message, "drain deadline passed") {
			t.Errorf("evicted: state %s, reason %q, message %q; want killed, node_drained, naming the deadline", got.State, got.Reason, got.Message)
		}
		if got.Result == nil || got.Result.Signal != "SIGTERM" {
			t.Errorf("evicted: result %+v, want the node's (SIGTERM)", got.Result)
		}
		if s := e.Get("root", short.ID); s.State != sandboxes.StateExited || s.Reason != "exited" {
			t.Errorf("the sandbox that ended by itself: %s %s, want exited", s.State, s.Reason)
		}
		if _, out, err := e.Svc.Logs(ctx, "root", short.ID); err != nil || string(out.Stdout) != "done\n" {
			t.Errorf("the result of the sandbox that ended by itself: %q %v", out.Stdout, err)
		}
		e.Eventually(5*time.Second, func() string {
			if v, _ := e.Reg.Get(ctx, a.ID); v.Drain == nil || v.Drain.State != nodes.DrainDrained {
				return "the node is not drained after the deadline's evictions"
			}
			return ""
		})
	})
}
