package sandboxes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
	"github.com/cubefleet/cubefleet/internal/store"
)

// oneName names every pool by its fleet name.
type oneName string

func (n oneName) FleetNames(_ context.Context, _ store.Querier, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for _, id := range ids {
		out[id] = string(n)
	}
	return out, nil
}

// idleWarm returns acme's idle warm sandboxes that run (warm_ready), after a KeepWarm pass.
func idleWarm(t *testing.T, e *sandboxtest.Env) []sandboxes.Sandbox {
	t.Helper()
	ctx := context.Background()
	items, _, err := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", Warm: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []sandboxes.Sandbox
	for _, s := range items {
		if s.State == sandboxes.StateRunning && s.Reason == sandboxes.ReasonWarmReady {
			out = append(out, s)
		}
	}
	return out
}

// TestWaitingCreatesGoBeforeWarm: the trial's pool, full but one slot, with two idle warm
// sandboxes: two creates claim them, the top-up takes the free slot and becomes idle while the
// other two creates wait. The first waiting create claims that warm sandbox (which takes its id
// from then on), the second waits on, and a new create joins the queue behind them rather than claim
// the warm sandbox before them.
func TestWaitingCreatesGoBeforeWarm(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 20}, Warm: &compute.Warm{Min: 2, Max: 4},
		Config: func(c *sandboxes.Config) { c.Names = oneName("vps-fra") }}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 3)
		a.Behave = forever
		a.Start(20 * time.Millisecond)
		e.Eventually(10*time.Second, func() string {
			if err := e.Svc.KeepWarm(ctx); err != nil {
				return err.Error()
			}
			if n := len(idleWarm(t, e)); n != 2 {
				return fmt.Sprintf("%d idle warm sandboxes ready", n)
			}
			return ""
		})
		for range 2 {
			if s := e.Create("acme", "sleep"); s.ClaimedAt == 0 {
				t.Fatalf("the create did not claim a warm sandbox: %+v", s)
			}
		}
		// The top-up takes the free slot (no create waits yet) while the node is slow to start
		// it; two more creates wait meanwhile; then it becomes idle.
		a.Stop()
		if err := e.Svc.KeepWarm(ctx); err != nil {
			t.Fatal(err)
		}
		third, fourth := e.Create("acme", "sleep"), e.Create("acme", "sleep")
		for _, s := range []sandboxes.Sandbox{third, fourth} {
			if s.State != sandboxes.StatePending || s.Reason != sandboxes.ReasonWaitingForRoom {
				t.Fatalf("no room: %+v", s)
			}
		}
		a.Start(20 * time.Millisecond)
		e.Eventually(10*time.Second, func() string {
			if n := len(idleWarm(t, e)); n != 1 {
				return fmt.Sprintf("%d idle warm sandboxes ready", n)
			}
			return ""
		})
		late := e.Create("acme", "sleep")
		if late.State != sandboxes.StatePending || late.ClaimedAt != 0 {
			t.Fatalf("a new create went before the waiting ones: %+v", late)
		}
		if s := e.Get("acme", third.ID); !strings.HasPrefix(s.Message, "waiting for room in pool vps-fra: ") {
			t.Errorf("the scheduler's refusal, the pool by its fleet name: %q", s.Message)
		}
		if late.Message != "waiting for room in pool vps-fra (2 creates ahead)" {
			t.Errorf("its message: %q", late.Message)
		}
		e.Eventually(10*time.Second, func() string {
			if err := e.Svc.PlaceWaiting(ctx); err != nil {
				return err.Error()
			}
			if s := e.Get("acme", third.ID); s.State != sandboxes.StateRunning {
				return fmt.Sprintf("the first waiting create: %s %s", s.State, s.Message)
			}
			return ""
		})
		got := e.Get("acme", third.ID)
		if !got.Warm || got.ID != third.ID || got.RunsAs == "" || got.RunsAs == third.ID || got.States[1].Reason != sandboxes.ReasonClaimed || got.CreatedAt != third.CreatedAt {
			t.Errorf("the first waiting create did not claim the warm sandbox that became ready: %+v", got)
		}
		if spec, ok := a.Spec(got.RunsAs); !ok || len(spec.Argv) == 0 || spec.Argv[0] != "sleep" {
			t.Errorf("the claim's command on the node: %+v", spec)
		}
		if items, _, _ := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", State: sandboxes.StatePending}); len(items) != 2 {
			t.Errorf("pending: %d, want the fourth and the late create", len(items))
		}
		for _, id := range []string{fourth.ID, late.ID} {
			if s := e.Get("acme", id); s.State != sandboxes.StatePending {
				t.Errorf("%s went before its turn: %+v", id, s)
			}
		}
		if n := len(idleWarm(t, e)); n != 0 {
			t.Errorf("%d idle warm sandboxes hold room while creates wait", n)
		}
		// A top-up while creates wait takes no room.
		if err := e.Svc.KeepWarm(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Svc.PlaceWaiting(ctx); err != nil {
			t.Fatal(err)
		}
		items, _, _ := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", Warm: true})
		for _, s := range items {
			if s.NodeID != "" {
				t.Errorf("a top-up took room while creates wait: %+v", s)
			}
		}
	})
}

// TestWaitingClaimKeepsItsID: a create that waited for room and then claimed a warm sandbox
// keeps the id its create answered in every answer (get, list, wait, logs) and every event of
// its tenant's log, through its end; the node runs it as the warm sandbox's own id (runsAs), and
// its end reported under that id reaches the create's record.
func TestWaitingClaimKeepsItsID(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}, Warm: &compute.Warm{Min: 1, Max: 1}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 1)
		a.Behave = func(sp nodeapi.SandboxSpec) sandboxtest.Run {
			return sandboxtest.Run{Exit: 4, Stdout: []byte("claimed-output"), For: 50 * time.Millisecond}
		}
		if err := e.Svc.KeepWarm(ctx); err != nil { // the warm sandbox takes the only slot, not yet started
			t.Fatal(err)
		}
		created := e.Create("acme", "work")
		if created.State != sandboxes.StatePending || created.Reason != sandboxes.ReasonWaitingForRoom {
			t.Fatalf("the node is full: %+v", created)
		}
		a.Start(20 * time.Millisecond)
		e.Eventually(10*time.Second, func() string {
			if err := e.Svc.PlaceWaiting(ctx); err != nil {
				return err.Error()
			}
			if s := e.Get("acme", created.ID); s.ClaimedAt == 0 {
				return fmt.Sprintf("not claimed yet: %s %s", s.State, s.Message)
			}
			return ""
		})
		got, done, err := e.Svc.Wait(ctx, "acme", created.ID, false, 10*time.Second)
		if err != nil || !done {
			t.Fatalf("wait: %+v %v", got, err)
		}
		if got.ID != created.ID || got.State != sandboxes.StateExited || !got.Warm || got.RunsAs == "" || got.RunsAs == created.ID ||
			got.CreatedAt != created.CreatedAt || got.Result == nil || got.Result.ExitCode == nil || *got.Result.ExitCode != 4 {
			t.Fatalf("the claim's end under the create's id: %+v", got)
		}
		if sp, ok := a.Spec(got.RunsAs); !ok || len(sp.Argv) != 1 || sp.Argv[0] != "work" {
			t.Errorf("the node's spec of %s: %+v", got.RunsAs, sp)
		}
		if s := e.Get("acme", created.ID); s.ID != created.ID || s.RunsAs != got.RunsAs {
			t.Errorf("get: %+v", s)
		}
		if _, err := e.Svc.Get(ctx, "acme", got.RunsAs); err == nil {
			t.Errorf("the warm sandbox's own id answers as a second sandbox")
		}
		_, out, err := e.Svc.Logs(ctx, "acme", created.ID)
		if err != nil || string(out.Stdout) != "claimed-output" {
			t.Errorf("logs: %q %v", out.Stdout, err)
		}
		items, _, err := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range items {
			ids = append(ids, s.ID)
		}
		if len(ids) != 1 || ids[0] != created.ID {
			t.Errorf("list: %v, want [%s]", ids, created.ID)
		}
		evs, _, err := events.List(ctx, e.DB, events.Filter{TenantID: "acme", Type: "sandbox.", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, ev := range evs {
			var d sandboxes.SandboxEventData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if ev.Subject != created.ID || d.SandboxID != created.ID {
				t.Errorf("%s names %s / %s, want %s", ev.Type, ev.Subject, d.SandboxID, created.ID)
			}
			seen = append(seen, ev.Type)
		}
		if strings.Join(seen, ",") != "sandbox.started,sandbox.exited" {
			t.Errorf("events: %v", seen)
		}
	})
}

// TestWarmGivesRoom: idle warm sandboxes fill the only node; a create of another template,
// which fits nowhere else, gets the room of one of them instead of waiting until its pending
// timeout.
func TestWarmGivesRoom(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 20}, Warm: &compute.Warm{Min: 2, Max: 2}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 2)
		a.Behave = forever
		a.Start(20 * time.Millisecond)
		e.Eventually(10*time.Second, func() string {
			if err := e.Svc.KeepWarm(ctx); err != nil {
				return err.Error()
			}
			if n := len(idleWarm(t, e)); n != 2 {
				return fmt.Sprintf("%d idle warm sandboxes ready", n)
			}
			return ""
		})
		s := e.Create("root", "sleep")
		if s.State != sandboxes.StatePending {
			t.Fatalf("the node is full: %+v", s)
		}
		e.Eventually(10*time.Second, func() string {
			if err := e.Svc.PlaceWaiting(ctx); err != nil {
				return err.Error()
			}
			if err := e.Svc.KeepWarm(ctx); err != nil {
				return err.Error()
			}
			if got := e.Get("root", s.ID); got.State != sandboxes.StateRunning {
				return fmt.Sprintf("the create: %s %s", got.State, got.Message)
			}
			return ""
		})
		if n := len(idleWarm(t, e)); n != 1 {
			t.Errorf("%d idle warm sandboxes left; want 1 (one gave its room)", n)
		}

		// A create with a node selector claims the idle warm sandbox on a node that carries its
		// labels, and waits (to claim) where none does.
		if _, err := e.Reg.Label(ctx, a.ID, map[string]string{"zone": "a"}, nil); err != nil {
			t.Fatal(err)
		}
		in := sandboxes.CreateInput{TenantID: "acme", Template: "py", Command: []string{"sleep"}, NodeSelector: map[string]string{"zone": "b"}}
		if got, err := e.Svc.Create(ctx, in); err != nil || got.Warm || got.State != sandboxes.StatePending {
			t.Errorf("a create whose selector the node does not carry: %+v %v", got, err)
		} else if _, err := e.Svc.Delete(ctx, "acme", got.ID, nil); err != nil {
			t.Fatal(err)
		}
		in.NodeSelector = map[string]string{"zone": "a"}
		if got, err := e.Svc.Create(ctx, in); err != nil || got.ClaimedAt == 0 || got.NodeID != a.ID {
			t.Errorf("a create whose selector the node carries: %+v %v", got, err)
		}
	})
}
