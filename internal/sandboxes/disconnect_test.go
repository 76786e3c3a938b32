package sandboxes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestDisconnectGrace: a running sandbox of a node that stops reporting (its agent frozen) is
// unknown (and counted so on its node), not lost, for the disconnect grace after the node's last report; a node back within
// it keeps the sandbox running (reconnected), and it ends normally, exited. Past the grace (a
// template's disconnectGraceSeconds here) it is lost and its node, back, is told to stop it,
// and it stays lost. Out-of-range template values are refused naming the field.
func TestDisconnectGrace(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = forever
		a.Start(20 * time.Millisecond)
		running := func(s sandboxes.Sandbox) {
			t.Helper()
			if got, done, err := e.Svc.Wait(ctx, "root", s.ID, true, 10*time.Second); err != nil || !done || got.State != sandboxes.StateRunning {
				t.Fatalf("not running: %+v %v", got, err)
			}
		}
		away := func(d time.Duration) {
			t.Helper()
			e.Clock.Add(d)
			e.Reg.CheckHealth(ctx)
			if err := e.Svc.CheckNodes(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// Back within the default grace (75 s after the last report): it runs on to its end.
		s := e.Create("root", "sleep")
		running(s)
		a.Stop()
		away(31 * time.Second) // Down: two heartbeat windows of 15 s
		if got := e.Get("root", s.ID); got.State != sandboxes.StateUnknown || got.Reason != sandboxes.ReasonDisconnected {
			t.Fatalf("on a Down node within the grace: %+v", got)
		}
		// nodes.get counts it, as unknown: it may run on.
		if on, err := e.Svc.OnNode(ctx, "127.0.0.2"); err != nil || on.Unknown != 1 || !slices.Equal(on.UnknownIDs, []string{s.ID}) || on.Running != 0 || on.Pending != 0 {
			t.Fatalf("OnNode of the Down node = %+v, %v; want the sandbox unknown", on, err)
		}
		away(40 * time.Second) // 71 s since the last report
		if got := e.Get("root", s.ID); got.State != sandboxes.StateUnknown {
			t.Fatalf("71 s after the last report, grace 75 s: %+v", got)
		}
		a.Start(20 * time.Millisecond)
		e.Eventually(10*time.Second, func() string {
			if err := e.Svc.CheckNodes(ctx); err != nil {
				return err.Error()
			}
			if got := e.Get("root", s.ID); got.State != sandboxes.StateRunning || got.Reason != sandboxes.ReasonReconnected {
				return fmt.Sprintf("the node is back: %s %s", got.State, got.Reason)
			}
			return ""
		})
		if !slices.Contains(a.Running(), s.ID) {
			t.Fatalf("the node no longer runs %s: %v", s.ID, a.Running())
		}
		a.Exit(s.ID, 0)
		got, done, err := e.Svc.Wait(ctx, "root", s.ID, false, 10*time.Second)
		if err != nil || !done || got.State != sandboxes.StateExited || got.Result.ExitCode == nil || *got.Result.ExitCode != 0 {
			t.Fatalf("its end: %+v %v", got, err)
		}
		var states []string
		for _, tr := range got.States {
			states = append(states, string(tr.State)+"/"+tr.Reason)
		}
		if want := "pending/created,starting/placed,running/started,unknown/node_disconnected,running/reconnected,exited/exited"; strings.Join(states, ",") != want {
			t.Errorf("states %v, want %s", states, want)
		}

		// A template's disconnectGraceSeconds; past it the sandbox is lost and stopped on return.
		for _, bad := range []int64{-1, 86401} {
			upd, _ := json.Marshal(map[string]any{"tenantId": "root", "id": e.Templates["root"], "disconnectGraceSeconds": bad})
			_, err := e.Compute.Update(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", upd)
			if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "disconnectGraceSeconds") {
				t.Errorf("disconnectGraceSeconds %d: %v", bad, err)
			}
		}
		upd, _ := json.Marshal(map[string]any{"tenantId": "root", "id": e.Templates["root"], "disconnectGraceSeconds": 40})
		if _, err := e.Compute.Update(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", upd); err != nil {
			t.Fatal(err)
		}
		d := e.Create("root", "sleep")
		running(d)
		a.Stop()
		away(31 * time.Second)
		if got := e.Get("root", d.ID); got.State != sandboxes.StateUnknown {
			t.Fatalf("within the template's grace: %+v", got)
		}
		away(10 * time.Second) // 41 s since the last report, grace 40 s
		got = e.Get("root", d.ID)
		if got.State != sandboxes.StateLost || got.Reason != sandboxes.ReasonNodeDown || !strings.Contains(got.Message, "past its disconnect grace of 40s") {
			t.Fatalf("past the template's grace: %+v", got)
		}
		a.Start(20 * time.Millisecond)
		e.Eventually(10*time.Second, func() string {
			if slices.Contains(a.Running(), d.ID) {
				return "the node, back, still runs the lost sandbox"
			}
			return ""
		})
		if got := e.Get("root", d.ID); got.State != sandboxes.StateLost {
			t.Errorf("after its node stopped it: %+v", got)
		}
	})
}
