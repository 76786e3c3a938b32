package fleet_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// byName returns tenant root's pool or site whose fleet name is name, archived ones included.
func byName(t *testing.T, db *store.DB, svc *compute.Service, kind, name string) []compute.Object {
	t.Helper()
	objs, err := svc.List(context.Background(), db, kind, compute.ListInput{TenantID: "root", IncludeArchived: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []compute.Object
	for _, o := range objs.Items {
		if o.Name == name {
			out = append(out, o)
		}
	}
	return out
}

// TestRecreateWhatWasRemovedByHand: a pool archived by hand (compute.pools.archive) and a site
// deleted by hand (compute.sites.delete) are planned again under their names, the plan says
// what happened, and the apply recreates them: the archived pool loses the fleet name to the new
// one. The next plan is converged, and export names each once.
func TestRecreateWhatWasRemovedByHand(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		svc := &compute.Service{Names: fleet.Names{}}
		planner := &fleet.Planner{Compute: svc}
		a := &fleet.Applier{DB: db, Planner: planner}
		doc := exampleDoc(t)
		var withSite map[string]any
		raw, _ := json.Marshal(doc)
		json.Unmarshal(raw, &withSite)
		withSite["sites"] = append(withSite["sites"].([]any), map[string]any{"name": "ber", "kind": "shared", "region": "eu-central"})
		raw, _ = json.Marshal(withSite)
		doc = decode(t, string(raw))
		if _, err := a.Apply(ctx, caller(), fleet.ApplyInput{TenantID: "root", Document: doc}); err != nil {
			t.Fatal(err)
		}
		burst := byName(t, db, svc, compute.KindPool, "burst")
		ber := byName(t, db, svc, compute.KindSite, "ber")
		if len(burst) != 1 || len(ber) != 1 {
			t.Fatalf("pools named burst %v, sites named ber %v", burst, ber)
		}
		if _, err := svc.Remove(ctx, db, compute.KindPool, compute.Ref{TenantID: "root", ID: burst[0].ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Remove(ctx, db, compute.KindSite, compute.Ref{TenantID: "root", ID: ber[0].ID}); err != nil {
			t.Fatal(err)
		}

		for _, prune := range []bool{false, true} {
			pl, err := planner.Plan(ctx, db, "root", doc, prune)
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, c := range pl.Changes {
				if c.Name == "burst" && c.Kind == compute.KindPool || c.Name == "ber" && c.Kind == compute.KindSite {
					found++
					if c.Action != fleet.ActionCreate || c.Blocked || !strings.Contains(c.Note, "by hand") || !strings.Contains(c.Note, "recreates") {
						t.Errorf("prune %v: %+v, want an unblocked create saying what happened", prune, c)
					}
				}
			}
			if found != 2 || pl.Summary.Blocked || pl.Summary.Delete != 0 {
				t.Errorf("prune %v: plan %+v", prune, pl.Summary)
			}
		}
		if _, err := a.Apply(ctx, caller(), fleet.ApplyInput{TenantID: "root", Document: doc}); err != nil {
			t.Fatalf("apply after the hand removals: %v", err)
		}
		pools := byName(t, db, svc, compute.KindPool, "burst")
		if len(pools) != 1 || pools[0].ID == burst[0].ID || pools[0].Archived() {
			t.Fatalf("pools named burst after the apply: %+v", pools)
		}
		old, err := svc.Get(ctx, db, compute.KindPool, compute.Ref{TenantID: "root", ID: burst[0].ID})
		if err != nil || old.Name != "" || !old.Archived() {
			t.Errorf("the archived pool = %+v (%v), want it archived without the fleet name", old, err)
		}
		if sites := byName(t, db, svc, compute.KindSite, "ber"); len(sites) != 1 {
			t.Errorf("sites named ber after the apply: %+v", sites)
		}
		pl, err := planner.Plan(ctx, db, "root", doc, true)
		if err != nil || len(pl.Calls) != 0 || pl.Summary.Blocked {
			t.Fatalf("the plan after the apply is not converged: %+v (%v)", pl.Changes, err)
		}
		exp, err := planner.Export(ctx, db, "root")
		if err != nil {
			t.Fatal(err)
		}
		names := 0
		for _, p := range exp.Config.Pools {
			if p.Name == "burst" {
				names++
			}
			if strings.HasPrefix(p.Name, "pool_") {
				t.Errorf("export names a pool by id: %s", p.Name)
			}
		}
		if names != 1 {
			t.Errorf("export names burst %d times", names)
		}
	})
}
