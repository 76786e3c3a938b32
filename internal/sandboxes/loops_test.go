package sandboxes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestWaitingCreates: a create the pool has no room for waits (pending, waiting_for_room); room
// goes to the waiting creates in priority order (the pool's owner before an offered tenant),
// then age; one that waits past --pending-timeout fails.
func TestWaitingCreates(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}, Config: func(c *sandboxes.Config) { c.PendingTimeout = time.Minute }}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 1)
		a.Behave = forever
		a.Start(50 * time.Millisecond)
		first := e.Create("root", "sleep")
		acme := e.Create("acme", "sleep") // older, offer priority 5
		root := e.Create("root", "sleep") // newer, the owner's priority
		for _, s := range []sandboxes.Sandbox{acme, root} {
			if s.State != sandboxes.StatePending || s.Reason != sandboxes.ReasonWaitingForRoom || s.NodeID != "" {
				t.Fatalf("a create without room: %+v", s)
			}
		}
		if err := e.Svc.PlaceWaiting(ctx); err != nil {
			t.Fatal(err)
		}
		if s := e.Get("acme", acme.ID); s.State != sandboxes.StatePending || !strings.Contains(s.Message, "room") {
			t.Fatalf("still no room: %+v", s)
		}
		end := func(id, tenant string) {
			t.Helper()
			if _, err := e.Svc.Delete(ctx, tenant, id, nil); err != nil {
				t.Fatal(err)
			}
			e.Eventually(5*time.Second, func() string {
				if err := e.Svc.PlaceWaiting(ctx); err != nil {
					return err.Error()
				}
				if r := a.Running(); len(r) != 1 || r[0] == id {
					return fmt.Sprintf("running %v", r)
				}
				return ""
			})
		}
		end(first.ID, "root")
		if s := e.Get("root", root.ID); s.State == sandboxes.StatePending {
			t.Fatalf("the owner's create did not go first: %+v", s)
		}
		if s := e.Get("acme", acme.ID); s.State != sandboxes.StatePending {
			t.Fatalf("acme's create went first: %+v", s)
		}
		e.Clock.Add(2 * time.Minute)
		a.Report()
		if err := e.Svc.PlaceWaiting(ctx); err != nil {
			t.Fatal(err)
		}
		s := e.Get("acme", acme.ID)
		if s.State != sandboxes.StateFailed || s.Reason != sandboxes.ReasonPendingTimeout || !strings.Contains(s.Message, "--pending-timeout") {
			t.Fatalf("past the pending timeout: %+v", s)
		}
	})
}

// TestPendingTimeoutNamesTheConstraint: every waiting create, also those behind others of its
// size that the pass did not ask the scheduler about again, says what keeps it out (the
// scheduler's per-reason counts), and one that fails at --pending-timeout names that
// constraint and when a retry can succeed.
func TestPendingTimeoutNamesTheConstraint(t *testing.T) {
	o := sandboxtest.Options{Config: func(c *sandboxes.Config) { c.PendingTimeout = 25 * time.Second }}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 1)
		a.Behave = forever
		a.Start(50 * time.Millisecond)
		e.Create("root", "sleep")
		var waiting []sandboxes.Sandbox
		for range 3 {
			waiting = append(waiting, e.Create("root", "sleep"))
		}
		if err := e.Svc.PlaceWaiting(ctx); err != nil {
			t.Fatal(err)
		}
		const constraint = "1 node: 1 microVM limit reached"
		for i, w := range waiting {
			s := e.Get("root", w.ID)
			if !strings.Contains(s.Message, constraint) || (i > 0 && !strings.Contains(s.Message, fmt.Sprintf("(%d create", i))) {
				t.Errorf("waiting create %d: %q, want the constraint %q and %d ahead", i, s.Message, constraint, i)
			}
		}
		e.Clock.Add(30 * time.Second)
		a.Report()
		if err := e.Svc.PlaceWaiting(ctx); err != nil {
			t.Fatal(err)
		}
		for i, w := range waiting {
			s := e.Get("root", w.ID)
			if s.State != sandboxes.StateFailed || s.Reason != sandboxes.ReasonPendingTimeout ||
				!strings.HasPrefix(s.Message, "no node of pool ") || !strings.Contains(s.Message, "had room within 25s (--pending-timeout); last: ") ||
				!strings.Contains(s.Message, constraint) || !strings.Contains(s.Message, "retry the create once room frees") {
				t.Errorf("waiting create %d past the timeout: %s %s %q", i, s.State, s.Reason, s.Message)
			}
		}
	})
}

// TestLost: a running sandbox its node's reports stop listing is lost (not_listed) once the
// grace passed; the running sandboxes of a node that goes Down are unknown, then lost
// (node_down) past the disconnect grace, and nothing more is placed there; one a deleted node never started is placed again, keeping its id.
// Reservations are released by id.
func TestLost(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = forever
		s := e.Create("root", "sleep")
		asgs, _ := a.Poll(ctx, 0)
		a.Handle(ctx, asgs)
		a.Report()
		if err := e.Svc.CheckNodes(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.Get("root", s.ID); got.State != sandboxes.StateRunning {
			t.Fatalf("running: %+v", got)
		}
		a.Forget(s.ID)
		e.Clock.Add(2 * time.Second)
		a.Report()
		e.Svc.CheckNodes(ctx)
		if got := e.Get("root", s.ID); got.State != sandboxes.StateRunning {
			t.Fatalf("lost within the grace: %+v", got)
		}
		e.Clock.Add(4 * time.Second)
		a.Report()
		e.Svc.CheckNodes(ctx)
		got := e.Get("root", s.ID)
		if got.State != sandboxes.StateLost || got.Reason != sandboxes.ReasonNotListed || !strings.Contains(got.Message, "no longer lists it") {
			t.Fatalf("after the grace: %+v", got)
		}
		if len(e.Reserved()) != 0 {
			t.Errorf("reservations left: %v", e.Reserved())
		}

		// The node goes silent: Down after two heartbeat timeouts (15 s each).
		d := e.Create("root", "sleep")
		asgs, _ = a.Poll(ctx, 0)
		a.Handle(ctx, asgs)
		a.Report()
		e.Clock.Add(31 * time.Second)
		e.Reg.CheckHealth(ctx)
		if err := e.Svc.CheckNodes(ctx); err != nil {
			t.Fatal(err)
		}
		if got = e.Get("root", d.ID); got.State != sandboxes.StateUnknown {
			t.Fatalf("on a Down node within the disconnect grace: %+v", got)
		}
		e.Clock.Add(45 * time.Second) // past the grace: 75 s after the last report
		e.Reg.CheckHealth(ctx)
		if err := e.Svc.CheckNodes(ctx); err != nil {
			t.Fatal(err)
		}
		got = e.Get("root", d.ID)
		if got.State != sandboxes.StateLost || got.Reason != sandboxes.ReasonNodeDown || !strings.Contains(got.Message, "Down") {
			t.Fatalf("on a Down node: %+v", got)
		}
		w := e.Create("root", "sleep")
		if w.State != sandboxes.StatePending || w.NodeID != "" {
			t.Fatalf("placed on a Down node: %+v", w)
		}

		// The node comes back and is deleted before its agent took w: w, never started, waits
		// to be placed again, keeping its id.
		a.Report()
		if err := e.Svc.PlaceWaiting(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.Get("root", w.ID); got.NodeID != a.ID {
			t.Fatalf("not placed once the node is back: %+v", got)
		}
		if _, err := e.Reg.Cordon(ctx, a.ID, "", "ops"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reg.Delete(ctx, a.ID, true, "ops"); err != nil {
			t.Fatal(err)
		}
		e.Svc.CheckNodes(ctx)
		if got := e.Get("root", w.ID); got.State != sandboxes.StatePending || got.ID != w.ID ||
			got.Message != "node 127.0.0.2 was deleted before it started the sandbox: placed again (placement 2 of at most 3)" {
			t.Fatalf("on a deleted node before it started: %+v", got)
		}
		if len(e.Reserved()) != 0 {
			t.Errorf("reservations left: %v", e.Reserved())
		}
	})
}

// TestDelete: deleting a running sandbox stops it on its node and hides it at once; it is
// removed once the node confirms; deleting a waiting one ends it at once; an ended one is
// removed with its result. Either way its quota share comes back.
func TestDelete(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 1)
		a.Behave = forever
		a.Start(50 * time.Millisecond)
		s := e.Create("root", "sleep")
		if _, done, _ := e.Svc.Wait(ctx, "root", s.ID, true, 5*time.Second); !done {
			t.Fatal("not running")
		}
		waiting := e.Create("root", "sleep")
		if _, err := e.Svc.Delete(ctx, "root", waiting.ID, nil); err != nil {
			t.Fatal(err)
		}
		del, err := e.Svc.Delete(ctx, "root", s.ID, nil)
		if err != nil || del.StopRequestedAt == 0 {
			t.Fatalf("delete: %+v %v", del, err)
		}
		for _, id := range []string{s.ID, waiting.ID} {
			if _, err := e.Svc.Get(ctx, "root", id); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
				t.Errorf("get %s after its delete: %v", id, err)
			}
		}
		e.Eventually(5*time.Second, func() string {
			if r := a.Running(); len(r) != 0 {
				return fmt.Sprintf("still running %v", r)
			}
			return ""
		})
		e.Eventually(5*time.Second, func() string {
			if err := e.Svc.Sweep(ctx); err != nil {
				return err.Error()
			}
			if n := e.Count(`SELECT count(*) FROM sandboxes`); n != 0 {
				return fmt.Sprintf("%d rows left", n)
			}
			return ""
		})
		if u, _ := e.Svc.TenantUsage(ctx, "root"); len(u) != 0 {
			t.Errorf("usage left: %+v", u)
		}
	})
}

// TestRetention: a sandbox that ended more than --result-retention ago is removed with its
// result by the sweep; a newer one is kept, also after its node is deleted.
func TestRetention(t *testing.T) {
	o := sandboxtest.Options{Config: func(c *sandboxes.Config) { c.ResultRetention = time.Hour }}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Start(50 * time.Millisecond)
		old := e.Create("root", "echo", "old")
		if got, done, _ := e.Svc.Wait(ctx, "root", old.ID, false, 5*time.Second); !done {
			t.Fatalf("not ended: %+v, agent runs %v", got, a.Running())
		}
		e.Clock.Add(50 * time.Minute)
		a.Report()
		young := e.Create("root", "echo", "young")
		if _, done, _ := e.Svc.Wait(ctx, "root", young.ID, false, 5*time.Second); !done {
			t.Fatal("not ended")
		}
		a.Stop()
		if _, err := e.Reg.Cordon(ctx, a.ID, "", "ops"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reg.Delete(ctx, a.ID, true, "ops"); err != nil {
			t.Fatal(err)
		}
		e.Clock.Add(20 * time.Minute)
		if err := e.Svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Svc.Get(ctx, "root", old.ID); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("the old result is kept: %v", err)
		}
		_, out, err := e.Svc.Logs(ctx, "root", young.ID)
		if err != nil || !strings.Contains(string(out.Stdout), "young") {
			t.Errorf("the young result after its node was deleted: %q %v", out.Stdout, err)
		}
	})
}

// TestSecretsOnlyReachTheSandbox: a secret:// value of the env is resolved when the sandbox is
// handed to its node and goes nowhere else: not the database, not the record, not the log. A
// secret deleted before the hand-off fails the sandbox without its value.
func TestSecretsOnlyReachTheSandbox(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		const value = "s3cr3t-VALUE-only-for-the-sandbox"
		if _, err := e.Box.Create(ctx, e.DB, "root", "api-token", value, "svc_test", e.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = forever
		s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"env"},
			Env: map[string]string{"API_TOKEN": "secret://api-token"}})
		if err != nil {
			t.Fatal(err)
		}
		asgs, _ := a.Poll(ctx, 0)
		a.Handle(ctx, asgs)
		sp, _ := a.Spec(s.ID)
		if !strings.Contains(strings.Join(sp.Env, "\n"), "API_TOKEN="+value) {
			t.Fatalf("the sandbox's env: %v", sp.Env)
		}
		if got := e.Get("root", s.ID); got.Env["API_TOKEN"] != "secret://api-token" {
			t.Errorf("the record shows %q", got.Env["API_TOKEN"])
		}
		for _, table := range []string{"sandboxes", "sandboxes_assignments", "sandboxes_output", "audit_log", "events_log"} {
			rows, err := e.DB.QueryContext(ctx, `SELECT * FROM `+table)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				rows.Scan(ptrs...)
				if strings.Contains(fmt.Sprint(vals...), value) {
					t.Errorf("table %s holds the secret's value", table)
				}
			}
			rows.Close()
		}
		// A secret deleted before the hand-off.
		if _, err := e.Box.Create(ctx, e.DB, "root", "gone", "x-"+value, "svc_test", e.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		g, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"env"}, Env: map[string]string{"OTHER_SECRET": "secret://gone"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, `DELETE FROM secrets WHERE name = 'gone'`); err != nil {
			t.Fatal(err)
		}
		asgs, _ = a.Poll(ctx, 0)
		if len(asgs) != 0 {
			t.Errorf("handed over without its secret: %+v", asgs)
		}
		got := e.Get("root", g.ID)
		if got.State != sandboxes.StateFailed || got.Reason != sandboxes.ReasonSecret || strings.Contains(got.Message, value) || !strings.Contains(got.Message, "gone") {
			t.Errorf("without its secret: %+v", got)
		}
	})
}

// TestWarmPool: a template with warm {min 2, max 3} keeps 2 idle sandboxes; a create claims one
// (kind claim: the same sandbox, its command), the pool tops up again, and refills on another
// node when its node is lost. Idle warm sandboxes are listed only with Warm.
func TestWarmPool(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}, Warm: &compute.Warm{Min: 2, Max: 3}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Start(50 * time.Millisecond)
		idle := func() []sandboxes.Sandbox {
			t.Helper()
			items, _, err := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme", Warm: true})
			if err != nil {
				t.Fatal(err)
			}
			return items
		}
		ready := func(n int) {
			t.Helper()
			e.Eventually(5*time.Second, func() string {
				if err := e.Svc.KeepWarm(ctx); err != nil {
					return err.Error()
				}
				running := 0
				for _, s := range idle() {
					if s.State == sandboxes.StateRunning && s.Reason == sandboxes.ReasonWarmReady {
						running++
					}
				}
				if running != n || len(idle()) != n {
					var states []string
					for _, s := range idle() {
						states = append(states, fmt.Sprintf("%s/%s/%s", s.State, s.Reason, s.NodeID))
					}
					return fmt.Sprintf("%d idle warm sandboxes ready of %d: %v", running, len(idle()), states)
				}
				return ""
			})
		}
		ready(2)
		if items, _, _ := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "acme"}); len(items) != 0 {
			t.Errorf("idle warm sandboxes in the plain list: %+v", items)
		}
		s := e.Create("acme", "echo", "claimed")
		if !s.Warm || s.ClaimedAt == 0 || s.Reason != sandboxes.ReasonClaimed || s.NodeID != a.ID {
			t.Fatalf("the create did not claim a warm sandbox: %+v", s)
		}
		got, done, _ := e.Svc.Wait(ctx, "acme", s.ID, false, 5*time.Second)
		if !done || got.State != sandboxes.StateExited {
			t.Fatalf("the claimed sandbox: %+v", got)
		}
		if _, out, _ := e.Svc.Logs(ctx, "acme", s.ID); !strings.Contains(string(out.Stdout), "claimed") {
			t.Errorf("its output: %q", out.Stdout)
		}
		ready(2)

		// The node dies: its warm sandboxes are lost and the pool refills on another.
		b := e.NewAgent("127.0.0.3", 4)
		b.Start(50 * time.Millisecond)
		a.Stop()
		// a's window follows its observed report interval: the clock moves until a is Down,
		// b reporting all the while.
		for i := 0; ; i++ {
			e.Clock.Add(5 * time.Second)
			b.Report()
			e.Reg.CheckHealth(ctx)
			if n, ok, _ := e.Reg.WorkNode(ctx, a.ID); ok && n.State == nodes.StateDown {
				break
			}
			if i == 60 {
				t.Fatalf("node %s is not Down 5 minutes after its last report", a.ID)
			}
		}
		if err := e.Svc.CheckNodes(ctx); err != nil {
			t.Fatal(err)
		}
		ready(2)
		for _, s := range idle() {
			if s.NodeID != b.ID {
				t.Errorf("warm sandbox %s on %s", s.ID, s.NodeID)
			}
		}
		_ = nodeapi.KindWarm
	})
}

// TestPrepare: a node that joins is asked to prepare the templates of its pool (every tenant's
// on it), and is not asked again once it reports them.
func TestPrepare(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{Offer: map[string]int64{}}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewBareAgent("127.0.0.2", 4)
		if err := e.Svc.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		asgs, err := a.Poll(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, as := range asgs {
			if as.Kind != nodeapi.KindPrepare || as.Template == nil || as.Template.Image != "python-3.12" {
				t.Fatalf("assignment %+v", as)
			}
			got[as.Template.ID] = true
		}
		if len(got) != 2 || !got[e.Templates["root"]] || !got[e.Templates["acme"]] {
			t.Fatalf("prepared %v, want root's and acme's templates", got)
		}
		a.Handle(ctx, asgs)
		a.Report()
		e.Clock.Add(2 * time.Minute)
		e.Svc.Prepare(ctx)
		if asgs, _ := a.Poll(ctx, 0); len(asgs) != 0 {
			t.Errorf("asked again: %+v", asgs)
		}
	})
}

// TestPrepareRejoined: a node that prepared its templates, was deleted and registered again
// without them (a Cube replaced at the same address) is asked to prepare them at once, not a
// minute later.
func TestPrepareRejoined(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{Offer: map[string]int64{}}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewBareAgent("127.0.0.2", 4)
		e.Svc.Prepare(ctx)
		asgs, _ := a.Poll(ctx, 0)
		if len(asgs) != 2 {
			t.Fatalf("first registration: %d assignments, want 2", len(asgs))
		}
		a.Handle(ctx, asgs)
		a.Report()
		if _, err := e.Reg.Cordon(ctx, a.ID, "replaced", nodes.Actor("ops")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reg.Delete(ctx, a.ID, true, nodes.Actor("ops")); err != nil {
			t.Fatal(err)
		}
		e.Clock.Add(time.Second)
		b := e.NewBareAgent("127.0.0.2", 4)
		e.Svc.Prepare(ctx)
		first := map[string]bool{}
		for _, as := range asgs {
			first[as.ID] = true
		}
		again, _ := b.Poll(ctx, 0)
		fresh := 0
		for _, as := range again {
			if !first[as.ID] && as.Kind == nodeapi.KindPrepare {
				fresh++
			}
		}
		if fresh != 2 {
			t.Errorf("registered again: %d new prepare assignments, want the 2 templates at once", fresh)
		}
	})
}

// TestLostThenEnded: a sandbox found lost while its node was Down, whose agent comes back and
// reports how it really ended, takes that end and its result (its message says it had been
// lost); the quota share given back when it was lost is not given back again.
func TestLostThenEnded(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}, Config: func(c *sandboxes.Config) { c.DisconnectGrace = time.Second }}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = forever
		s := e.Create("acme", "sleep")
		asgs, _ := a.Poll(ctx, 0)
		a.Handle(ctx, asgs)
		a.Report()
		for i := 0; ; i++ { // the node's window follows its observed report interval
			e.Clock.Add(5 * time.Second)
			e.Reg.CheckHealth(ctx)
			if n, ok, _ := e.Reg.WorkNode(ctx, a.ID); ok && n.State == nodes.StateDown {
				break
			}
			if i == 60 {
				t.Fatalf("node %s is not Down 5 minutes after its last report", a.ID)
			}
		}
		if err := e.Svc.CheckNodes(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.Get("acme", s.ID); got.State != sandboxes.StateLost {
			t.Fatalf("on a Down node: %+v", got)
		}
		used := func() int64 {
			t.Helper()
			us, err := e.Svc.TenantUsage(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, u := range us {
				n += u.Sandboxes
			}
			return n
		}
		a.Report()
		e.Create("acme", "sleep") // the node is back: a share in use
		before := used()
		code := 0
		for range 2 { // an end reported twice changes nothing the second time
			if c, err := a.Event(ctx, s.ID, nodeapi.SandboxEvent{State: nodeapi.StateExited, Reason: "exited", ExitCode: &code, Stdout: []byte("done\n")}); err != nil || c != 200 {
				t.Fatalf("the end of a lost sandbox: %d %v", c, err)
			}
		}
		got := e.Get("acme", s.ID)
		if got.State != sandboxes.StateExited || got.Result == nil || got.Result.ExitCode == nil || *got.Result.ExitCode != 0 ||
			!strings.Contains(got.Message, "had been lost (node_down") {
			t.Fatalf("the reported end: %+v", got)
		}
		if _, out, err := e.Svc.Logs(ctx, "acme", s.ID); err != nil || string(out.Stdout) != "done\n" {
			t.Errorf("its output: %q %v", out.Stdout, err)
		}
		if after := used(); after != before {
			t.Errorf("sandboxes in use %d after the reported end; %d before", after, before)
		}
	})
}

// TestPlacedAgainAtMost: a sandbox placed PlacementAttempts times already is lost when its node
// goes away before it started it, not placed a fourth time.
func TestPlacedAgainAtMost(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 1)
		a.Report()
		s := e.Create("root", "sleep")
		if s.State != sandboxes.StateStarting || s.NodeID != a.ID {
			t.Fatalf("not placed: %+v", s)
		}
		// Two earlier placements on a node that is gone.
		for i := range 2 {
			if _, err := e.DB.ExecContext(ctx, `INSERT INTO sandboxes_assignments (id, node_id, kind, sandbox_id, template_id, created_at, done_at)
				VALUES ($1, '127.0.0.9', 'start', $2, '', 1, 1)`, fmt.Sprintf("asg_earlier%d", i), s.ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Reg.Cordon(ctx, a.ID, "", "ops"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reg.Delete(ctx, a.ID, true, "ops"); err != nil {
			t.Fatal(err)
		}
		if err := e.Svc.CheckNodes(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.Get("root", s.ID); got.State != sandboxes.StateLost || got.Reason != sandboxes.ReasonNodeDeleted {
			t.Fatalf("after its third placement's node was deleted: %+v", got)
		}
	})
}
