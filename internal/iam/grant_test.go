package iam_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// TestGrantsAreCheckedAgainstTheCatalogue checks that a key's grants must name a permission of
// the catalogue it is given, on a scope of that permission's form, held where it may be held.
func TestGrantsAreCheckedAgainstTheCatalogue(t *testing.T) {
	cases := []struct {
		name, tenant string
		grant        iam.Grant
		ok           bool
	}{
		{"catalogued, own tenant", "acme", iam.Grant{Permission: "compute:pools:create", Scope: "tenant/acme"}, true},
		{"wildcard of catalogued verbs", "acme", iam.Grant{Permission: "compute:pools:*", Scope: "tenant/acme"}, true},
		{"not in the catalogue", "acme", iam.Grant{Permission: "compute:sites:create", Scope: "tenant/acme"}, false},
		{"another tenant's scope", "acme", iam.Grant{Permission: "compute:pools:create", Scope: "tenant/root"}, false},
		{"not a tenant scope", "acme", iam.Grant{Permission: "compute:pools:create", Scope: iam.ScopeFleet}, false},
		{"root only, outside root", "acme", iam.Grant{Permission: "iam:tenants:create", Scope: "tenant/root"}, false},
		{"root only, in root", "root", iam.Grant{Permission: "iam:tenants:create", Scope: "tenant/root"}, true},
		{"root only, on another scope", "root", iam.Grant{Permission: "iam:tenants:create", Scope: "tenant/acme"}, false},
		{"every tenant from root", "root", iam.Grant{Permission: "compute:pools:create", Scope: iam.ScopeAnyTenant}, true},
	}
	storetest.Each(t, []store.Module{iam.Module}, func(t *testing.T, db *store.DB) {
		ctx, now := context.Background(), time.Now()
		for _, id := range []string{"root", "acme"} {
			if _, err := iam.CreateTenant(ctx, db, id, now); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cases {
			_, _, err := iam.CreateServiceKey(ctx, db, catalogue, nil, iam.NewServiceKey{TenantID: c.tenant, Name: fmt.Sprintf("k%d", i), Grants: []iam.Grant{c.grant}}, now)
			switch {
			case c.ok && err != nil:
				t.Errorf("%s: %v", c.name, err)
			case !c.ok && !cubefleet.IsCode(err, cubefleet.CodeInvalidInput):
				t.Errorf("%s: %v, want INVALID_INPUT", c.name, err)
			}
		}
	})
	grants := catalogue.AdminGrants()
	if len(grants) != len(catalogue) || grants[0].Scope != iam.ScopeAnyTenant || grants[3].Scope != "tenant/root" {
		t.Errorf("AdminGrants = %v", grants)
	}
	if got := catalogue.Grantable("acme"); len(got) != 3 || slices.ContainsFunc(got, func(p iam.PermissionInfo) bool { return p.RootOnly }) {
		t.Errorf("Grantable(acme) = %v", got)
	}
}

// TestTenantIDs: a tenant id is a name (fieldrules.Name), both where a tenant is created and in
// the tenant/<id> scope of a grant.
func TestTenantIDs(t *testing.T) {
	cases := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"acme-1.eu_2", true},
		{"0day", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"Bad Name", false},
		{"Acme", false},
		{"-acme", false},
		{".acme", false},
		{"acme/eu", false},
		{"acme:eu", false},
	}
	storetest.Each(t, []store.Module{iam.Module}, func(t *testing.T, db *store.DB) {
		ctx, now := context.Background(), time.Now()
		if _, err := iam.CreateTenant(ctx, db, iam.RootTenant, now); err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			_, err := iam.CreateTenant(ctx, db, c.id, now)
			switch {
			case c.ok && err != nil:
				t.Errorf("CreateTenant(%q): %v", c.id, err)
			case !c.ok && !cubefleet.IsCode(err, cubefleet.CodeInvalidInput):
				t.Errorf("CreateTenant(%q): %v, want INVALID_INPUT", c.id, err)
			}
			grant := iam.Grant{Permission: "compute:pools:create", Scope: "tenant/" + c.id}
			_, _, err = iam.CreateServiceKey(ctx, db, catalogue, nil, iam.NewServiceKey{TenantID: iam.RootTenant, Name: "k" + strings.Repeat("x", i), Grants: []iam.Grant{grant}}, now)
			switch {
			case c.ok && err != nil:
				t.Errorf("grant on tenant/%s: %v", c.id, err)
			case !c.ok && !cubefleet.IsCode(err, cubefleet.CodeInvalidInput):
				t.Errorf("grant on tenant/%s: %v, want INVALID_INPUT", c.id, err)
			}
		}
	})
}
