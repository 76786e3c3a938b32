package nodestore_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestReplicas runs two registries (two server replicas) on one database: a node registered
// on one reports to the other, both see its reports, cordon and deletion, and each health
// change is one event, from the replica holding the health lease.
func TestReplicas(t *testing.T) {
	storetest.Each(t, nodetest.Modules, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a := nodetest.MustEnv(t, db, func(c *nodetest.Config) { c.Store.Holder = "replica-a" })
		b := nodetest.Start(t, db, a.Clock, func() nodetest.Config { c := a.Cfg; c.Store.Holder = "replica-b"; return c }())
		a.Store.Announce(ctx) // a learns about b (b announced after a started)
		if !nodestore.Others(a.Store) || !nodestore.Others(b.Store) || !a.Store.Leader() || b.Store.Leader() {
			t.Fatalf("others %v %v, leader %v %v", nodestore.Others(a.Store), nodestore.Others(b.Store), a.Store.Leader(), b.Store.Leader())
		}
		sync := func() {
			t.Helper()
			for _, e := range []*nodetest.Env{a, b} {
				e.Flush()
			}
			for _, e := range []*nodetest.Env{a, b} {
				if err := e.Store.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		state := func(e *nodetest.Env) nodes.State {
			t.Helper()
			v, err := e.Reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			return v.State
		}
		if err := nodetest.NewCubelet(a.URL).Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		sync()
		// Reports go to b only; a follows them.
		for range 3 {
			a.Clock.Add(10 * time.Second)
			if err := nodetest.NewCubelet(b.URL).Status("10.0.0.7", nodetest.Status()); err != nil {
				t.Fatal(err)
			}
			sync()
			a.Reg.CheckHealth(ctx)
			b.Reg.CheckHealth(ctx)
			if sa, sb := state(a), state(b); sa != nodes.StateReady || sb != nodes.StateReady {
				t.Fatalf("after a report to b: a sees %s, b sees %s", sa, sb)
			}
		}
		// a knows the templates the node reported to b (its scheduler places them only there).
		va, _ := a.Reg.Get(ctx, "10.0.0.7")
		vb, _ := b.Reg.Get(ctx, "10.0.0.7")
		if len(vb.LocalTemplates) == 0 || !slices.Equal(va.LocalTemplates, vb.LocalTemplates) {
			t.Errorf("local templates: a sees %v, b %v", va.LocalTemplates, vb.LocalTemplates)
		}
		// Both know b's observed interval (10 s), so the window is 20 s; silence past it: both
		// see Suspect, one event.
		for _, e := range []*nodetest.Env{a, b} {
			if v, _ := e.Reg.Get(ctx, "10.0.0.7"); v.ReportIntervalMs != 10000 || v.HeartbeatWindowMs != 20000 {
				t.Errorf("%s: interval %d ms, window %d ms; want 10000 and 20000", e.Cfg.Store.Holder, v.ReportIntervalMs, v.HeartbeatWindowMs)
			}
		}
		a.Clock.Add(21 * time.Second)
		a.Reg.CheckHealth(ctx)
		b.Reg.CheckHealth(ctx)
		if sa, sb := state(a), state(b); sa != nodes.StateSuspect || sb != nodes.StateSuspect {
			t.Fatalf("silent: a sees %s, b sees %s", sa, sb)
		}
		sync()
		if got := a.EventTypes("10.0.0.7"); !slices.Equal(got, []string{nodes.EventJoined, nodes.EventSuspect}) {
			t.Errorf("events = %v, want one joined and one suspect", got)
		}
		// A cordon on a reaches b; a deletion on b reaches a.
		if _, err := a.Reg.Cordon(ctx, "10.0.0.7", "maintenance", "test"); err != nil {
			t.Fatal(err)
		}
		sync()
		if v, _ := b.Reg.Get(ctx, "10.0.0.7"); !v.Cordoned || v.CordonDetail != "maintenance" {
			t.Errorf("b after the cordon on a: %+v", v)
		}
		if _, err := b.Reg.Delete(ctx, "10.0.0.7", true, "test"); err != nil {
			t.Fatal(err)
		}
		sync()
		if _, err := a.Reg.Get(ctx, "10.0.0.7"); err == nil {
			t.Errorf("a still has the node b deleted")
		}
		if code, _ := a.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", nodetest.Status()); code != http.StatusNotFound {
			t.Errorf("status to a after the delete on b: %d, want 404", code)
		}
		if n := a.Count(`SELECT count(*) FROM nodes_registrations`); n != 0 {
			t.Errorf("%d registrations after the delete", n)
		}
	})
}

// TestDeletionWins: a node deleted on a while b still holds it: a report to b that changes its
// registration, flushed before b reads the deletion, writes nothing of it back (SQLite and
// PostgreSQL); after the next reads neither replica has it. It registers again later, through
// b, and is back on both.
func TestDeletionWins(t *testing.T) {
	storetest.Each(t, nodetest.Modules, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a := nodetest.MustEnv(t, db, func(c *nodetest.Config) { c.Store.Holder = "replica-a" })
		b := nodetest.Start(t, db, a.Clock, func() nodetest.Config { c := a.Cfg; c.Store.Holder = "replica-b"; return c }())
		a.Store.Announce(ctx)
		sync := func() {
			t.Helper()
			for _, e := range []*nodetest.Env{a, b} {
				e.Flush()
			}
			for _, e := range []*nodetest.Env{a, b} {
				if err := e.Store.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		const id = "10.0.0.7"
		if err := nodetest.NewCubelet(a.URL).Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		sync()
		if err := nodetest.NewCubelet(b.URL).Status(id, nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		sync()
		a.Clock.Add(time.Second)
		if _, err := a.Reg.Cordon(ctx, id, "retire", "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Reg.Delete(ctx, id, true, "test"); err != nil {
			t.Fatal(err)
		}
		a.Flush()
		a.Clock.Add(time.Second)
		changed := nodetest.Patch(t, nodetest.Status(), "quota.milli_cpu", 12000)
		if err := nodetest.NewCubelet(b.URL).Status(id, changed); err != nil {
			t.Logf("b read the deletion before the report (%v): the write-back was not exercised", err)
		}
		b.Flush()
		for _, table := range []string{"nodes_registrations", "nodes_status"} {
			if n := a.Count(`SELECT count(*) FROM `+table+` WHERE node_id = $1`, id); n != 0 {
				t.Errorf("%d rows in %s of the node deleted on a, after b's flush", n, table)
			}
		}
		sync()
		for _, e := range []*nodetest.Env{a, b} {
			if _, err := e.Reg.Get(ctx, id); err == nil {
				t.Errorf("%s still has the deleted node", e.Cfg.Store.Holder)
			}
			if rec, err := e.Store.LoadNode(ctx, id); err != nil || rec != nil {
				t.Errorf("%s loads the deleted node: found %v, err %v", e.Cfg.Store.Holder, rec != nil, err)
			}
		}

		a.Clock.Add(time.Second)
		if err := nodetest.NewCubelet(b.URL).Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		if err := nodetest.NewCubelet(b.URL).Status(id, nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		sync()
		for _, e := range []*nodetest.Env{a, b} {
			if _, err := e.Reg.Get(ctx, id); err != nil {
				t.Errorf("%s after the node registered again: %v", e.Cfg.Store.Holder, err)
			}
		}
		if n := a.Count(`SELECT count(*) FROM nodes_status WHERE node_id = $1`, id); n != 1 {
			t.Errorf("%d status rows of the node registered again, want 1", n)
		}
	})
}
