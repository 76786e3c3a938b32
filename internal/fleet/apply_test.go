package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// caller returns a root-tenant principal holding every verb of every compute kind on
// tenant/root, except the permissions in without.
func caller(without ...string) *iam.Principal {
	p := &iam.Principal{ID: "svc_ci", TenantID: "root", Kind: "service", Name: "ci"}
	skip := map[string]bool{}
	for _, w := range without {
		skip[w] = true
	}
	for _, k := range compute.Kinds {
		for _, verb := range k.Verbs() {
			if !skip[k.Permission(verb)] {
				p.Grants = append(p.Grants, iam.Grant{Permission: k.Permission(verb), Scope: iam.TenantScope("root")})
			}
		}
	}
	return p
}

func auditRows(t *testing.T, db *store.DB) []audit.Entry {
	t.Helper()
	rows, _, err := audit.List(context.Background(), db, audit.Filter{TenantID: "root", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestApplyRunsEveryCallAsTheCallerWithItsAuditRow applies the example document: every call of
// the plan runs against compute in one transaction, each with an audit row naming the call's
// method, its compute:<kind>:<verb> permission on the tenant, the caller, the request id and
// the object it made, and the apply writes its own row (the one the API gave it) last.
func TestApplyRunsEveryCallAsTheCallerWithItsAuditRow(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		now := time.UnixMilli(1790251200000)
		a := &fleet.Applier{DB: db, Planner: &fleet.Planner{Compute: &compute.Service{Names: fleet.Names{}}}, Now: func() time.Time { return now }}
		p := caller()
		res, err := a.Apply(ctx, p, fleet.ApplyInput{TenantID: "root", Document: exampleDoc(t), RequestID: "req-1",
			Audit: audit.Entry{TenantID: "root", PrincipalID: p.ID, Method: "fleet.apply", Permission: iam.PermFleetAdmin, Scope: iam.ScopeFleet, Outcome: audit.OutcomeOK, RequestID: "req-1"}})
		if err != nil {
			t.Fatal(err)
		}
		rows := auditRows(t, db)
		if len(rows) != res.Applied+1 || res.Applied != len(res.Plan.Calls) || res.Applied == 0 {
			t.Fatalf("%d audit rows for %d calls applied", len(rows), res.Applied)
		}
		for i, c := range res.Plan.Calls {
			info, verb, ok := compute.ParseMethod(c.Method)
			r := rows[i]
			if !ok || r.Method != c.Method || r.Permission != info.Permission(verb) || r.Scope != "tenant/root" || r.TenantID != "root" ||
				r.PrincipalID != p.ID || r.Outcome != audit.OutcomeOK || r.RequestID != "req-1" || r.At != now.UnixMilli() {
				t.Errorf("call %d (%s): audit row %+v", i, c.Method, r)
			}
			if _, err := compute.Load(ctx, db, r.Target); err != nil {
				t.Errorf("call %d (%s): the row's target %q: %v", i, c.Method, r.Target, err)
			}
		}
		last := rows[len(rows)-1]
		want := fmt.Sprintf("applied %d calls, plan %s", res.Applied, res.Plan.PlanHash)
		if last.Method != "fleet.apply" || last.Target != "root" || last.Message != want || last.Permission != iam.PermFleetAdmin || last.Scope != iam.ScopeFleet {
			t.Errorf("the apply's own row = %+v", last)
		}
		// The sites and pools it made carry their fleet names.
		pools, err := (&compute.Service{Names: fleet.Names{}}).Pools(ctx, db)
		if err != nil || len(pools) != 2 || pools[0].Name == "" || pools[1].Name == "" {
			t.Fatalf("pools after apply = %+v, %v", pools, err)
		}
	})
}

// TestApplyRefusesACallTheCallerMayNotMake checks that a caller without the permission of one
// call gets FORBIDDEN before anything is written, with one forbidden audit row for that call.
func TestApplyRefusesACallTheCallerMayNotMake(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		a := &fleet.Applier{DB: db, Planner: &fleet.Planner{Compute: &compute.Service{Names: fleet.Names{}}}}
		p := caller("compute:pools:create")
		_, err := a.Apply(ctx, p, fleet.ApplyInput{TenantID: "root", Document: exampleDoc(t), RequestID: "req-2",
			Audit: audit.Entry{TenantID: "root", PrincipalID: p.ID, Method: "fleet.apply", Permission: iam.PermFleetAdmin, Scope: iam.ScopeFleet, Outcome: audit.OutcomeOK}})
		if !cubefleet.IsCode(err, cubefleet.CodeForbidden) {
			t.Fatalf("apply without compute:pools:create = %v, want FORBIDDEN", err)
		}
		rows := auditRows(t, db)
		if len(rows) != 1 || rows[0].Method != "compute.pools.create" || rows[0].Outcome != audit.OutcomeForbidden ||
			rows[0].Permission != "compute:pools:create" || rows[0].Scope != "tenant/root" || rows[0].RequestID != "req-2" {
			t.Fatalf("audit rows = %+v, want one forbidden compute.pools.create", rows)
		}
		var objects int
		if err := db.QueryRow(`SELECT count(*) FROM compute_objects`).Scan(&objects); err != nil || objects != 0 {
			t.Fatalf("a refused apply left %d objects (%v)", objects, err)
		}
	})
}
