package fleet_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

var driftModules = append([]store.Module{store.LeaseModule}, append(modules, events.Module)...)

// clock is an injected clock that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type driftEnv struct {
	t     testing.TB
	db    *store.DB
	clock *clock
	svc   *compute.Service
	admin *iam.Principal
}

func newDriftEnv(t testing.TB, db *store.DB) *driftEnv {
	seed(t, db)
	clk := &clock{t: time.UnixMilli(1790251200000)}
	svc := &compute.Service{Names: fleet.Names{}, Now: clk.Now}
	admin := &iam.Principal{ID: "usr_ops", TenantID: "root", Kind: "user", Name: "ops"}
	for _, k := range compute.Kinds {
		admin.Grants = append(admin.Grants, iam.Grant{Permission: k.Permission("*"), Scope: iam.ScopeAnyTenant})
	}
	return &driftEnv{t: t, db: db, clock: clk, svc: svc, admin: admin}
}

func (e *driftEnv) planner(ignore ...string) *fleet.Planner {
	rules, err := fleet.ParseIgnoreRules(ignore)
	if err != nil {
		e.t.Fatal(err)
	}
	return &fleet.Planner{Compute: e.svc, DriftIgnore: rules}
}

func (e *driftEnv) reconciler(ignore ...string) *fleet.Reconciler {
	return &fleet.Reconciler{DB: e.db, Planner: e.planner(ignore...), Every: 15 * time.Minute, Holder: "a", Now: e.clock.Now}
}

func (e *driftEnv) apply(tenant string, doc string) {
	e.t.Helper()
	a := &fleet.Applier{DB: e.db, Planner: e.planner(), Now: e.clock.Now}
	if _, err := a.Apply(context.Background(), e.admin, fleet.ApplyInput{TenantID: tenant, Document: decode(e.t, doc)}); err != nil {
		e.t.Fatalf("apply: %v", err)
	}
}

// edit changes pool vps-fra of root by hand (outside fleet as code).
func (e *driftEnv) edit(fields map[string]any) {
	e.t.Helper()
	var id string
	pools, err := e.svc.List(context.Background(), e.db, compute.KindPool, compute.ListInput{TenantID: "root"})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range pools.Items {
		if p.Name == "vps-fra" {
			id = p.ID
		}
	}
	in := map[string]any{"tenantId": "root", "id": id}
	for k, v := range fields {
		in[k] = v
	}
	raw, _ := json.Marshal(in)
	if _, err := e.svc.Update(context.Background(), e.db, compute.KindPool, "usr_hand", raw); err != nil {
		e.t.Fatalf("hand edit: %v", err)
	}
}

// pass advances the clock by a period and runs the reconciler's pass; it returns the fleet
// events published by it.
func (e *driftEnv) pass(r *fleet.Reconciler, tenant string) []events.Event {
	e.t.Helper()
	before := e.events(tenant)
	e.clock.Add(r.Every)
	if _, _, err := r.Pass(context.Background()); err != nil {
		e.t.Fatalf("pass: %v", err)
	}
	return e.events(tenant)[len(before):]
}

func (e *driftEnv) events(tenant string) []events.Event {
	e.t.Helper()
	evs, _, err := events.List(context.Background(), e.db, events.Filter{TenantID: tenant, Type: "fleet.", Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func types(evs []events.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return strings.Join(out, ",")
}

const poolDoc = `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],
	"pools":[{"name":"vps-fra","site":"fra","class":"vps-host","gpuModel":"L40S","policy":{"disruptionBudget":0.1}},
	         {"name":"other","site":"fra","class":"vps-host"}]}`

func TestDriftEvents(t *testing.T) {
	storetest.Each(t, driftModules, func(t *testing.T, db *store.DB) {
		e := newDriftEnv(t, db)
		r := e.reconciler()
		e.apply("root", poolDoc)

		if evs := e.pass(r, "root"); len(evs) != 0 {
			t.Fatalf("no drift published %s", types(evs))
		}
		e.edit(map[string]any{"policy": map[string]any{"disruptionBudget": 0.5}})
		evs := e.pass(r, "root")
		if types(evs) != fleet.EventDrifted {
			t.Fatalf("a hand edit published %q, want one fleet.drifted", types(evs))
		}
		var d fleet.DriftedEvent
		if err := json.Unmarshal(evs[0].Data, &d); err != nil {
			t.Fatal(err)
		}
		st, err := fleet.LoadStatus(context.Background(), db, "root")
		if err != nil {
			t.Fatal(err)
		}
		if evs[0].Subject != "fleet/root" || evs[0].TenantID != "root" || evs[0].At != e.clock.Now().UnixMilli() ||
			d.TenantID != "root" || d.AppliedPlanHash != st.Applied.PlanHash || d.PlanHash != st.Drift.PlanHash || d.Blocked ||
			d.Summary.Update != 1 || len(d.Changes) != 1 || d.Changes[0].Name != "vps-fra" || d.Changes[0].Fields[0] != "policy" {
			t.Fatalf("fleet.drifted = %+v %s", evs[0], evs[0].Data)
		}
		first := d.PlanHash

		for range 3 {
			if evs := e.pass(r, "root"); len(evs) != 0 {
				t.Fatalf("the same drift seen again published %s", types(evs))
			}
		}
		// A restart keeps what was published: a new reconciler sees the same drift and says nothing.
		if evs := e.pass(e.reconciler(), "root"); len(evs) != 0 {
			t.Fatalf("the same drift after a restart published %s", types(evs))
		}

		e.edit(map[string]any{"gpuModel": "A100"})
		evs = e.pass(r, "root")
		if types(evs) != fleet.EventDrifted {
			t.Fatalf("a second hand edit published %q, want fleet.drifted", types(evs))
		}
		json.Unmarshal(evs[0].Data, &d)
		if d.PlanHash == first || len(d.Changes[0].Fields) != 2 {
			t.Fatalf("second drift = %s", evs[0].Data)
		}

		e.edit(map[string]any{"gpuModel": "L40S", "policy": map[string]any{"disruptionBudget": 0.1}})
		evs = e.pass(r, "root")
		if types(evs) != fleet.EventConverged {
			t.Fatalf("reverting published %q, want fleet.converged", types(evs))
		}
		var c fleet.ConvergedEvent
		json.Unmarshal(evs[0].Data, &c)
		if c.PreviousPlanHash != d.PlanHash || c.TenantID != "root" {
			t.Fatalf("fleet.converged = %s", evs[0].Data)
		}
		if evs := e.pass(r, "root"); len(evs) != 0 {
			t.Fatalf("still converged published %s", types(evs))
		}

		// Re-applying clears the drift and says so (fleet.applied, with the drift it cleared),
		// and the next check starts from no drift.
		e.edit(map[string]any{"gpuModel": "A100"})
		drifted := e.pass(r, "root")
		if types(drifted) != fleet.EventDrifted {
			t.Fatal("no fleet.drifted before the re-apply")
		}
		json.Unmarshal(drifted[0].Data, &d)
		before := e.events("root")
		e.apply("root", strings.Replace(poolDoc, "L40S", "A100", 1))
		if st, _ := fleet.LoadStatus(context.Background(), db, "root"); st.Drift != nil {
			t.Fatalf("drift after the re-apply: %+v", st.Drift)
		}
		applied := e.events("root")[len(before):]
		var a fleet.AppliedEvent
		if types(applied) != fleet.EventApplied || json.Unmarshal(applied[0].Data, &a) != nil ||
			a.TenantID != "root" || a.PreviousPlanHash != d.PlanHash || a.AppliedPlanHash == "" || a.AppliedBy == "" || applied[0].Subject != "fleet/root" {
			t.Fatalf("the re-apply that cleared drift published %q (%+v), want fleet.applied naming the drift", types(applied), applied)
		}
		// An apply with no drift recorded publishes nothing.
		before = e.events("root")
		e.apply("root", poolDoc)
		if evs := e.events("root")[len(before):]; len(evs) != 0 {
			t.Fatalf("an apply without drift published %s", types(evs))
		}
		e.apply("root", strings.Replace(poolDoc, "L40S", "A100", 1))
		if evs := e.pass(r, "root"); len(evs) != 0 {
			t.Fatalf("the check after a re-apply published %s", types(evs))
		}
	})
}

func TestDriftIgnoreRules(t *testing.T) {
	storetest.Each(t, driftModules, func(t *testing.T, db *store.DB) {
		e := newDriftEnv(t, db)
		r := e.reconciler("pool.gpuModel")
		e.apply("root", poolDoc)
		e.edit(map[string]any{"gpuModel": "A100"})
		if evs := e.pass(r, "root"); len(evs) != 0 {
			t.Fatalf("an ignored field's edit published %s", types(evs))
		}
		st, err := r.Planner.Status(context.Background(), db, "root")
		if err != nil || st.Drift != nil || strings.Join(st.DriftIgnore, ",") != "pool.gpuModel" {
			t.Fatalf("status = %+v (%v)", st, err)
		}
		// Plan still shows the field: the rules are for drift only.
		pl, err := r.Planner.Plan(context.Background(), db, "root", decode(t, poolDoc), false)
		if err != nil || pl.Summary.Update != 1 {
			t.Fatalf("plan with an ignored field edited: %+v (%v)", pl.Summary, err)
		}
		// Another field of the same object is still drift, shown without the ignored one.
		e.edit(map[string]any{"policy": map[string]any{"disruptionBudget": 0.5}})
		evs := e.pass(r, "root")
		var d fleet.DriftedEvent
		if types(evs) != fleet.EventDrifted || json.Unmarshal(evs[0].Data, &d) != nil || strings.Join(d.Changes[0].Fields, ",") != "policy" || len(d.Changes[0].Diffs) != 1 {
			t.Fatalf("drift beside an ignored field: %s", types(evs))
		}
	})
}

func TestParseIgnoreRules(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string // the rules, or the error's text
	}{
		{[]string{"pool.gpuModel", "offer.quota", "pool.gpuModel"}, "pool.gpuModel offer.quota"},
		{[]string{"sandboxTemplate.env", "site.region", "flavor.gpu"}, "sandboxTemplate.env site.region flavor.gpu"},
		{[]string{"pool"}, "write KIND.FIELD"},
		{[]string{"pools.gpuModel"}, "unknown kind pools"},
		{[]string{"pool.name"}, "its fields are gpuModel, policy, site, class, providerAccount"},
		{[]string{".x"}, "write KIND.FIELD"},
		{[]string{"offer.name"}, "an offer has no field name"},
		{[]string{"ownerQuota.name"}, "an ownerQuota has no field name"},
	} {
		rules, err := fleet.ParseIgnoreRules(c.in)
		var got []string
		for _, r := range rules {
			got = append(got, r.String())
		}
		s := strings.Join(got, " ")
		if err != nil {
			s = err.Error()
		}
		if !strings.Contains(s, c.want) {
			t.Errorf("ParseIgnoreRules(%q) = %q, want %q", c.in, s, c.want)
		}
	}
}

// TestDriftCorruptTenantBlocksNoOther: a tenant whose applied document no longer decodes fails
// its own check (logged, counted, returned) and every other tenant is still checked.
func TestDriftCorruptTenantBlocksNoOther(t *testing.T) {
	storetest.Each(t, driftModules, func(t *testing.T, db *store.DB) {
		e := newDriftEnv(t, db)
		r := e.reconciler()
		e.apply("acme", `{"version":1,"sites":[{"name":"a","kind":"shared","region":"eu"}]}`)
		e.apply("root", poolDoc)
		if _, err := db.Exec(`UPDATE fleet_applied SET document = '{"version":' WHERE tenant_id = 'acme'`); err != nil {
			t.Fatal(err)
		}
		e.edit(map[string]any{"gpuModel": "A100"})
		before := len(e.events("root"))
		e.clock.Add(r.Every)
		_, drifted, err := r.Pass(context.Background())
		if err == nil || !strings.Contains(err.Error(), "acme") {
			t.Fatalf("pass error = %v, want acme's failure", err)
		}
		if drifted != 1 || len(e.events("root")) != before+1 {
			t.Fatalf("root was not checked beside the corrupt tenant: %d drifted", drifted)
		}
	})
}

// TestDriftTwoReplicas: two reconcilers on one database (two servers) check each tenant once
// per period; when the lease holder stops, the other takes over within the lease's life and
// still checks each tenant once per period.
func TestDriftTwoReplicas(t *testing.T) {
	run := func(t *testing.T, dsn string) {
		ctx := context.Background()
		open := func() *store.DB {
			db, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		db := open()
		if err := db.Migrate(ctx, driftModules...); err != nil {
			t.Fatal(err)
		}
		e := newDriftEnv(t, db)
		e.apply("root", poolDoc)
		e.apply("acme", `{"version":1,"sites":[{"name":"a","kind":"shared","region":"eu"}]}`)
		e.apply("globex", `{"version":1,"sites":[{"name":"g","kind":"shared","region":"eu"}]}`)
		var mu sync.Mutex
		checks := map[string]int{}
		replica := func(holder string) *fleet.Reconciler {
			r := &fleet.Reconciler{DB: open(), Planner: e.planner(), Every: 15 * time.Minute, Holder: holder, Now: e.clock.Now,
				OnCheck: func(_ context.Context, st *fleet.Status, skipped bool) {
					if !skipped {
						mu.Lock()
						checks[st.TenantID]++
						mu.Unlock()
					}
				}}
			return r
		}
		a, b := replica("a"), replica("b")
		period := func(replicas ...*fleet.Reconciler) {
			t.Helper()
			clear(checks)
			e.clock.Add(15 * time.Minute)
			var wg sync.WaitGroup
			for _, r := range replicas {
				wg.Go(func() {
					if _, _, err := r.Pass(ctx); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for _, tenant := range []string{"root", "acme", "globex"} {
				if checks[tenant] != 1 {
					t.Fatalf("tenant %s checked %d times in one period, want once (%v)", tenant, checks[tenant], checks)
				}
			}
		}
		for range 4 {
			period(a, b)
		}
		// The holder stops; its lease lapses within 1.5 periods and the other takes over.
		e.clock.Add(8 * time.Minute)
		for range 3 {
			period(b)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, filepath.Join(t.TempDir(), "cubefleet.db")) })
	t.Run("postgres", func(t *testing.T) { run(t, storetest.PostgresURL(t)) })
}

// TestDriftCheckOfADocumentWithoutHash: a document applied before fleet kept its hash (NULL
// document_hash) is read and checked on every pass, and the one applied next is checked by its
// hash: a check sees each edit, never a stale document.
func TestDriftCheckOfADocumentWithoutHash(t *testing.T) {
	storetest.Each(t, driftModules, func(t *testing.T, db *store.DB) {
		e := newDriftEnv(t, db)
		r := e.reconciler()
		e.apply("root", poolDoc)
		if _, err := db.Exec(`UPDATE fleet_applied SET document_hash = NULL`); err != nil {
			t.Fatal(err)
		}
		if evs := e.pass(r, "root"); len(evs) != 0 {
			t.Fatalf("no drift published %s", types(evs))
		}
		e.edit(map[string]any{"gpuModel": "A100"})
		if types(e.pass(r, "root")) != fleet.EventDrifted {
			t.Fatal("a hand edit under a document without hash published no fleet.drifted")
		}
		// The document that takes the edit in, applied and checked by the same reconciler.
		e.apply("root", strings.Replace(poolDoc, "L40S", "A100", 1))
		for range 2 {
			if evs := e.pass(r, "root"); len(evs) != 0 {
				t.Fatalf("the re-applied document shows drift: %s", types(evs))
			}
		}
		e.edit(map[string]any{"gpuModel": "L40S"})
		if types(e.pass(r, "root")) != fleet.EventDrifted {
			t.Fatal("an edit after the re-apply published no fleet.drifted")
		}
	})
}

// TestDriftIgnoredFieldKeepsTheDrift: an edit of an ignored field changes the object's revision
// but not the drift: gpuModel drifts (one fleet.drifted), then an edit of only the ignored
// policy publishes nothing and keeps the drift's hash; so does an edit and its revert.
func TestDriftIgnoredFieldKeepsTheDrift(t *testing.T) {
	storetest.Each(t, driftModules, func(t *testing.T, db *store.DB) {
		e := newDriftEnv(t, db)
		r := e.reconciler("pool.policy")
		e.apply("root", poolDoc)
		e.edit(map[string]any{"gpuModel": "A100"})
		evs := e.pass(r, "root")
		if types(evs) != fleet.EventDrifted {
			t.Fatalf("a hand edit published %q, want fleet.drifted", types(evs))
		}
		st, _ := fleet.LoadStatus(context.Background(), db, "root")
		first := st.Drift.PlanHash
		e.edit(map[string]any{"policy": map[string]any{"disruptionBudget": 0.5}})
		if evs := e.pass(r, "root"); len(evs) != 0 {
			t.Fatalf("an ignored field's edit beside a drift published %s: %s", types(evs), evs[0].Data)
		}
		if st, _ := fleet.LoadStatus(context.Background(), db, "root"); st.Drift == nil || st.Drift.PlanHash != first {
			t.Fatalf("the drift's identity moved with an ignored field: %+v", st.Drift)
		}
		// An edit of the drifted field to another value is another drift.
		e.edit(map[string]any{"gpuModel": "H100"})
		if types(e.pass(r, "root")) != fleet.EventDrifted {
			t.Fatal("a second edit of the drifted field published no fleet.drifted")
		}
	})
}

// TestDriftEditAndRevertIsTheSameDrift: without ignore rules, an edit of another field and its
// revert bump the object's revision but leave the drift as it was: nothing is published.
func TestDriftEditAndRevertIsTheSameDrift(t *testing.T) {
	storetest.Each(t, driftModules, func(t *testing.T, db *store.DB) {
		e := newDriftEnv(t, db)
		r := e.reconciler()
		e.apply("root", poolDoc)
		e.edit(map[string]any{"gpuModel": "A100"})
		if types(e.pass(r, "root")) != fleet.EventDrifted {
			t.Fatal("no fleet.drifted")
		}
		e.edit(map[string]any{"policy": map[string]any{"disruptionBudget": 0.5}})
		e.edit(map[string]any{"policy": map[string]any{"disruptionBudget": 0.1}})
		if evs := e.pass(r, "root"); len(evs) != 0 {
			t.Fatalf("an edit and its revert published %s", types(evs))
		}
	})
}
