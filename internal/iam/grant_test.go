package iam_test

import (
	"context"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// catalogue is a small catalogue of this test's own: iam checks grants against whatever
// catalogue it is given (the API's method table builds the real one).
var catalogue = iam.Catalogue{
	{Permission: "compute:pools:archive", Scope: iam.ScopeFormTenant, Methods: []string{"compute.pools.archive"}},
	{Permission: "compute:pools:create", Scope: iam.ScopeFormTenant, Methods: []string{"compute.pools.create"}},
	{Permission: "iam:keys:create", Scope: iam.ScopeFormTenant, Methods: []string{"iam.keys.create"}},
	{Permission: "iam:tenants:create", Scope: iam.TenantScope(iam.RootTenant), RootOnly: true, Methods: []string{"iam.tenants.create"}},
}

// TestWildcardGrants checks that a principal holding every verb of a kind may grant the kind's
// wildcard, and that one holding only some verbs may not.
func TestWildcardGrants(t *testing.T) {
	storetest.Each(t, []store.Module{iam.Module}, func(t *testing.T, db *store.DB) {
		ctx, now := context.Background(), time.Now()
		if _, err := iam.CreateTenant(ctx, db, "acme", now); err != nil {
			t.Fatal(err)
		}
		_, token, err := iam.Bootstrap(ctx, db, catalogue, now)
		if err != nil {
			t.Fatal(err)
		}
		admin, err := iam.Authenticate(ctx, db, token, now)
		if err != nil {
			t.Fatal(err)
		}
		wild := []iam.Grant{{Permission: "compute:pools:*", Scope: "tenant/acme"}}
		_, token, err = iam.CreateServiceKey(ctx, db, catalogue, admin, iam.NewServiceKey{TenantID: "acme", Name: "ops", Grants: wild}, now)
		if err != nil {
			t.Fatalf("admin grants compute:pools:*: %v", err)
		}
		ops, err := iam.Authenticate(ctx, db, token, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := iam.Decide(ops, "compute:pools:archive", "tenant/acme"); err != nil {
			t.Errorf("wildcard holder: %v", err)
		}
		some := []iam.Grant{{Permission: "compute:pools:create", Scope: "tenant/acme"}, {Permission: "iam:keys:create", Scope: "tenant/acme"}}
		_, token, err = iam.CreateServiceKey(ctx, db, catalogue, admin, iam.NewServiceKey{TenantID: "acme", Name: "half", Grants: some}, now)
		if err != nil {
			t.Fatal(err)
		}
		half, _ := iam.Authenticate(ctx, db, token, now)
		_, _, err = iam.CreateServiceKey(ctx, db, catalogue, half, iam.NewServiceKey{TenantID: "acme", Name: "x", Grants: wild}, now)
		if !cubefleet.IsCode(err, cubefleet.CodeForbidden) {
			t.Errorf("granting compute:pools:* while holding only create: %v, want FORBIDDEN", err)
		}
	})
}
