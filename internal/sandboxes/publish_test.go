package sandboxes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestSandboxEventsInTheTenantsLog: a sandbox's start and end are events in its tenant's log
// (sandbox.started, then sandbox.exited, sandbox.failed or sandbox.killed) with its id, template,
// node, state, reason and exit code, and never its environment or output; webhooks of the
// tenant subscribed to them (or to sandbox.*) get them queued.
func TestSandboxEventsInTheTenantsLog(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		if _, err := e.DB.ExecContext(ctx, `INSERT INTO webhook_subscriptions (id, tenant_id, url, description, created_by, created_at) VALUES ('whk_1', 'acme', 'http://hooks.test/', '', 'u', 0)`); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, `INSERT INTO webhook_subscription_types (tenant_id, type, subscription_id) VALUES ('acme', 'sandbox.*', 'whk_1')`); err != nil {
			t.Fatal(err)
		}
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = func(sp nodeapi.SandboxSpec) sandboxtest.Run {
			switch sp.Argv[0] {
			case "ok":
				return sandboxtest.Run{Stdout: []byte("private-output"), For: time.Millisecond}
			case "bad":
				return sandboxtest.Run{Exit: 3, Stderr: []byte("private-error"), For: time.Millisecond}
			case "nope":
				return sandboxtest.Run{FailStart: "no such program: nope"}
			}
			return sandboxtest.Run{}
		}
		a.Start(20 * time.Millisecond)
		wait := func(s sandboxes.Sandbox, untilRunning bool) sandboxes.Sandbox {
			t.Helper()
			got, done, err := e.Svc.Wait(ctx, "acme", s.ID, untilRunning, 10*time.Second)
			if err != nil || !done {
				t.Fatalf("wait %s: %+v %v", s.ID, got, err)
			}
			return got
		}
		ok, bad, nope := e.Create("acme", "ok"), e.Create("acme", "bad"), e.Create("acme", "nope")
		sleep := e.Create("acme", "sleep")
		for _, s := range []sandboxes.Sandbox{ok, bad, nope} {
			wait(s, false)
		}
		wait(sleep, true)
		if _, err := e.Svc.Delete(ctx, "acme", sleep.ID, nil); err != nil {
			t.Fatal(err)
		}
		e.Eventually(10*time.Second, func() string {
			if evs, _, _ := events.List(ctx, e.DB, events.Filter{TenantID: "acme", Type: sandboxes.EventKilled, Limit: 10}); len(evs) != 1 {
				return "no sandbox.killed yet"
			}
			return ""
		})

		evs, _, err := events.List(ctx, e.DB, events.Filter{TenantID: "acme", Type: "sandbox.", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, ev := range evs {
			var d sandboxes.SandboxEventData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.SandboxID != ev.Subject || d.TemplateID != e.Templates["acme"] || d.Template != "py" || d.PoolID != e.Pool || d.NodeID != a.ID || d.State == "" || d.Reason == "" {
				t.Errorf("%s of %s: %s", ev.Type, ev.Subject, ev.Data)
			}
			for _, private := range []string{"GREETING", "hello", "private-output", "private-error", "sleep"} {
				if strings.Contains(string(ev.Data), private) {
					t.Errorf("%s carries %q: %s", ev.Type, private, ev.Data)
				}
			}
			desc := ev.Type
			if d.ExitCode != nil {
				desc += "/" + string(rune('0'+*d.ExitCode))
			}
			got[ev.Subject] = append(got[ev.Subject], desc)
		}
		for id, want := range map[string]string{
			ok.ID:    "sandbox.started,sandbox.exited/0",
			bad.ID:   "sandbox.started,sandbox.exited/3",
			nope.ID:  "sandbox.failed",
			sleep.ID: "sandbox.started,sandbox.killed",
		} {
			if strings.Join(got[id], ",") != want {
				t.Errorf("events of %s: %v, want %s", id, got[id], want)
			}
		}
		if root, _, _ := events.List(ctx, e.DB, events.Filter{TenantID: "root", Type: "sandbox.", Limit: 100}); len(root) != 0 {
			t.Errorf("acme's sandbox events in the root tenant's log: %d", len(root))
		}
		ds, _, err := events.ListDeliveries(ctx, e.DB, events.DeliveryFilter{TenantID: "acme", SubscriptionID: "whk_1", Limit: 100})
		if err != nil || len(ds) != len(evs) {
			t.Errorf("%d deliveries to the sandbox.* subscription for %d events (%v)", len(ds), len(evs), err)
		}
	})
}
