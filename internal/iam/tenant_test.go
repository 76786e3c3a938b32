package iam_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

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
