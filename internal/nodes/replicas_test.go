package nodes

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestReplicas runs two registries (two server replicas) on one database: a node registered
// on one reports to the other, both see its reports, cordon and deletion, and each health
// change is one event, from the replica holding the health lease.
func TestReplicas(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a := mustEnv(t, db, func(c *Config) { c.Holder = "replica-a" })
		b := start(t, db, a.clock, func() Config { c := a.cfg; c.Holder = "replica-b"; return c }())
		a.reg.announce(ctx) // a learns about b (b announced after a started)
		if !a.reg.others.Load() || !b.reg.others.Load() || !a.reg.leader.Load() || b.reg.leader.Load() {
			t.Fatalf("others %v %v, leader %v %v", a.reg.others.Load(), b.reg.others.Load(), a.reg.leader.Load(), b.reg.leader.Load())
		}
		sync := func() {
			t.Helper()
			for _, e := range []*env{a, b} {
				e.flush()
			}
			for _, e := range []*env{a, b} {
				if err := e.reg.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		state := func(e *env) State {
			t.Helper()
			v, err := e.reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			return v.State
		}
		if err := newCubelet(t, a.url).register(testdata(t, "register.json")); err != nil {
			t.Fatal(err)
		}
		sync()
		// Reports go to b only; a follows them.
		for range 3 {
			a.clock.Add(10 * time.Second)
			if err := newCubelet(t, b.url).status("10.0.0.7", testdata(t, "status.json")); err != nil {
				t.Fatal(err)
			}
			sync()
			a.reg.CheckHealth(ctx)
			b.reg.CheckHealth(ctx)
			if sa, sb := state(a), state(b); sa != StateReady || sb != StateReady {
				t.Fatalf("after a report to b: a sees %s, b sees %s", sa, sb)
			}
		}
		// Silence: both see Suspect, one event.
		a.clock.Add(16 * time.Second)
		a.reg.CheckHealth(ctx)
		b.reg.CheckHealth(ctx)
		if sa, sb := state(a), state(b); sa != StateSuspect || sb != StateSuspect {
			t.Fatalf("silent: a sees %s, b sees %s", sa, sb)
		}
		sync()
		if got := a.eventTypes("10.0.0.7"); !slices.Equal(got, []string{EventJoined, EventSuspect}) {
			t.Errorf("events = %v, want one joined and one suspect", got)
		}
		// A cordon on a reaches b; a deletion on b reaches a.
		if _, err := a.reg.Cordon(ctx, "10.0.0.7", "maintenance", "test"); err != nil {
			t.Fatal(err)
		}
		sync()
		if v, _ := b.reg.Get(ctx, "10.0.0.7"); !v.Cordoned || v.CordonDetail != "maintenance" {
			t.Errorf("b after the cordon on a: %+v", v)
		}
		if _, err := b.reg.Delete(ctx, "10.0.0.7", true, "test"); err != nil {
			t.Fatal(err)
		}
		sync()
		if _, err := a.reg.Get(ctx, "10.0.0.7"); err == nil {
			t.Errorf("a still has the node b deleted")
		}
		if code, _ := a.do(http.MethodPost, AgentPrefixes[0]+"/nodes/10.0.0.7/status", "", testdata(t, "status.json")); code != http.StatusNotFound {
			t.Errorf("status to a after the delete on b: %d, want 404", code)
		}
		if n := a.count(`SELECT count(*) FROM nodes_registrations`); n != 0 {
			t.Errorf("%d registrations after the delete", n)
		}
	})
}
