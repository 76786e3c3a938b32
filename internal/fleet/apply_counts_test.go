package fleet_test

import (
	"context"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestApplyRefusesToPassTheCountsOfADocument: without prune, a document plans its creates next
// to the objects it leaves out; an apply that would take the tenant past what one document holds
// (here a 1001st site) fails CONFLICT as a whole and writes nothing, as a create through the
// API would.
func TestApplyRefusesToPassTheCountsOfADocument(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		svc := &compute.Service{Names: fleet.Names{}}
		for range 1000 {
			if _, err := svc.Create(ctx, db, compute.KindSite, "usr_test", []byte(`{"tenantId":"root","kind":"shared","region":"eu"}`)); err != nil {
				t.Fatal(err)
			}
		}
		a := &fleet.Applier{DB: db, Planner: &fleet.Planner{Compute: svc}}
		_, err := a.Apply(ctx, caller(), fleet.ApplyInput{TenantID: "root", Document: decode(t, `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}]}`)})
		if !cubefleet.IsCode(err, cubefleet.CodeConflict) {
			t.Fatalf("apply = %v, want CONFLICT", err)
		}
		list, err := svc.List(ctx, db, compute.KindSite, compute.ListInput{TenantID: "root", Limit: 1000})
		if err != nil || len(list.Items) != 1000 || list.NextCursor != "" {
			t.Errorf("after the refused apply: %d sites, next %q, %v; want the 1000 it had", len(list.Items), list.NextCursor, err)
		}
	})
}
