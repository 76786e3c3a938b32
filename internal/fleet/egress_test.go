package fleet_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// ownerDoc is root's fleet: a pool whose policy.egressAllow is policy, offered to acme, and a
// public template of root's own on it that allows own.
func ownerDoc(policy, own string) string {
	return `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu-central"}],
		"pools":[{"name":"vps-fra","site":"fra","class":"vps-host","policy":{"egressAllow":` + policy + `},"offers":[{"tenant":"acme"}]}],
		"flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":2,"memoryGiB":4,"diskGiB":40}],
		"sandboxTemplates":[{"name":"own","pool":"vps-fra","flavor":"g1.small","imageId":"busybox","network":"public","egressAllow":` + own + `}]}`
}

// tenantPrincipal holds every verb of every compute kind on tenant.
func tenantPrincipal(tenant string) *iam.Principal {
	p := &iam.Principal{ID: "svc_" + tenant, TenantID: tenant, Kind: "service", Name: tenant}
	for _, k := range compute.Kinds {
		for _, verb := range k.Verbs() {
			p.Grants = append(p.Grants, iam.Grant{Permission: k.Permission(verb), Scope: iam.TenantScope(tenant)})
		}
	}
	return p
}

// TestApplyEgressInsidePoolPolicy: a tenant's fleet plan and apply of a template on a pool
// offered to it are blocked when an egressAllow entry lies outside the pool's
// policy.egressAllow, and it applies inside it; the owner's apply that would shrink the policy under the tenant's template is
// refused naming it, while one that narrows the policy and its own template together is
// judged on where the transaction ends.
func TestApplyEgressInsidePoolPolicy(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		planner := &fleet.Planner{Compute: &compute.Service{Names: fleet.Names{}}}
		a := &fleet.Applier{DB: db, Planner: planner}
		apply := func(p *iam.Principal, doc string) error {
			t.Helper()
			_, err := a.Apply(ctx, p, fleet.ApplyInput{TenantID: p.TenantID, Document: decode(t, doc)})
			return err
		}
		owner, tenant := tenantPrincipal("root"), tenantPrincipal("acme")
		if err := apply(owner, ownerDoc(`["10.20.0.0/16"]`, `["10.20.0.0/16"]`)); err != nil {
			t.Fatal(err)
		}
		// The policy and the template that uses it narrow in one apply, the pool's call first.
		if err := apply(owner, ownerDoc(`["10.30.0.0/16"]`, `["10.30.0.0/16"]`)); err != nil {
			t.Fatalf("narrowing the policy and its template together: %v", err)
		}
		// A document that holds both is refused as it is decoded (fleet validate).
		_, err := document.Decode([]byte(ownerDoc(`["10.40.0.0/16"]`, `["10.30.0.0/16"]`)))
		if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "sandboxTemplates[0].egressAllow[0]: 10.30.0.0/16 is outside what pool vps-fra lets its sandboxes reach") {
			t.Fatalf("a document whose policy leaves its own template outside: %v", err)
		}

		pools, err := planner.Compute.Pools(ctx, db)
		if err != nil || len(pools) != 1 {
			t.Fatalf("pools: %v %v", pools, err)
		}
		tenantDoc := func(allow string) string {
			return `{"version":1,"sandboxTemplates":[{"name":"web","pool":"` + pools[0].ID + `","flavor":"g1.small","imageId":"busybox","network":"public","egressAllow":` + allow + `}]}`
		}
		// The tenant's plan is blocked at the template, naming the entry, the pool and the fix,
		// and so is its apply.
		pl, err := planner.Plan(ctx, db, "acme", decode(t, tenantDoc(`["10.20.0.0/16","10.0.0.0/8"]`)), false)
		if err != nil {
			t.Fatal(err)
		}
		want := "egressAllow[1]: 10.0.0.0/8 is outside what pool " + pools[0].ID + " lets its sandboxes reach: the pool allows only 10.30.0.0/16; " +
			"allow a prefix inside those, or add it to pool " + pools[0].ID + "'s policy.egressAllow, which only the pool's owner can change"
		if !pl.Summary.Blocked || len(pl.Changes) != 1 || !strings.Contains(pl.Changes[0].Note, want) || !strings.Contains(pl.Changes[0].Note, "egressAllow[0]: 10.20.0.0/16") {
			t.Fatalf("a tenant's template opening the operator's private network plans %+v, want it blocked: %s", pl.Changes, want)
		}
		err = apply(tenant, tenantDoc(`["10.0.0.0/8"]`))
		if !cubefleet.IsCode(err, cubefleet.CodePlanBlocked) || !strings.Contains(err.Error(), "10.0.0.0/8 is outside") {
			t.Fatalf("the tenant's apply of it: %v", err)
		}
		if err := apply(tenant, tenantDoc(`["10.30.1.0/24"]`)); err != nil {
			t.Fatalf("a tenant's template inside the policy: %v", err)
		}

		// The owner cannot narrow the policy under the tenant's template, even with its own.
		err = apply(owner, ownerDoc(`["10.30.0.0/24"]`, `["10.30.0.0/24"]`))
		if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "sandboxTemplate web (") ||
			!strings.Contains(err.Error(), "egressAllow[0] 10.30.1.0/24") {
			t.Fatalf("a shrinking policy under the tenant's template: %v", err)
		}
		// Nothing of the refused apply stayed.
		exp, err := planner.Export(ctx, db, "root")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(exp.Config.Pools[0].Policy.EgressAllow, ","); got != "10.30.0.0/16" {
			t.Errorf("the pool's policy.egressAllow after the refusals: %s", got)
		}
	})
}
