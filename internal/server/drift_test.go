package server

import (
	"context"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

type statusOut struct {
	TenantID string `json:"tenantId"`
	Applied  *struct {
		PlanHash  string `json:"planHash"`
		AppliedBy string `json:"appliedBy"`
		AppliedAt int64  `json:"appliedAt"`
		Prune     bool   `json:"prune"`
		CheckedAt *int64 `json:"checkedAt"`
	} `json:"applied"`
	Drift *struct {
		Changes []struct{ Kind, Name, Action string } `json:"changes"`
		Blocked bool                                  `json:"blocked"`
	} `json:"drift"`
}

func TestDriftIsRecordedAndClears(t *testing.T) {
	storetest.Each(t, Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		ctx := context.Background()
		var st statusOut
		st = e.status()
		if st.Applied != nil || st.Drift != nil {
			t.Fatalf("status before any apply = %+v", st)
		}
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}
		if n := e.checkDrift(ctx); n != 0 {
			t.Fatalf("drift right after apply: %d tenants", n)
		}
		poolID := e.poolID("vps-fra")
		e.mustCall(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": poolID, "gpuModel": "A100"}, nil)
		if n := e.checkDrift(ctx); n != 1 {
			t.Fatalf("drifted tenants after a hand edit = %d, want 1", n)
		}
		st = e.status()
		if st.Drift == nil || len(st.Drift.Changes) != 1 || st.Drift.Changes[0].Name != "vps-fra" || st.Applied.CheckedAt == nil {
			t.Fatalf("status after a hand edit = %+v", st)
		}
		// Undoing the edit by hand clears the drift at the next check.
		e.mustCall(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": poolID, "gpuModel": "L40S"}, nil)
		if n := e.checkDrift(ctx); n != 0 {
			t.Fatalf("drift after undoing the edit: %d", n)
		}
		st = e.status()
		if st.Drift != nil {
			t.Fatalf("drift not cleared: %+v", st.Drift)
		}
		// Applying again resets a recorded drift at once.
		e.mustCall(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": poolID, "gpuModel": "A100"}, nil)
		e.checkDrift(ctx)
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}
		st = e.status()
		if st.Drift != nil {
			t.Fatalf("drift after re-applying: %+v", st.Drift)
		}
	})
}

func TestDriftReconcilerRunsOnItsOwn(t *testing.T) {
	storetest.Each(t, Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnvConfig(t, Config{DB: db, DriftEvery: 20 * time.Millisecond})
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}
		e.mustCall(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": e.poolID("vps-fra"), "gpuModel": "A100"}, nil)
		deadline := time.Now().Add(10 * time.Second)
		for e.status().Drift == nil {
			if time.Now().After(deadline) {
				t.Fatal("the reconciler recorded no drift within 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestStatusCheckChecksNow(t *testing.T) {
	storetest.Each(t, Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}
		e.mustCall(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": e.poolID("vps-fra"), "gpuModel": "A100"}, nil)
		if e.status().Drift != nil {
			t.Fatal("drift recorded before any check")
		}
		var st statusOut
		e.mustCall(e.admin, "fleet.status", map[string]any{"tenantId": "root", "check": true}, &st)
		if st.Drift == nil || e.status().Drift == nil {
			t.Fatalf("status with check = %+v; the drift must be found and recorded", st)
		}
	})
}

// poolID returns the id of root's pool with fleet name name.
func (e *fleetEnv) poolID(name string) string {
	e.t.Helper()
	var pools struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	e.mustCall(e.admin, "compute.pools.list", map[string]any{"tenantId": "root"}, &pools)
	for _, p := range pools.Items {
		if p.Name == name {
			return p.ID
		}
	}
	e.t.Fatalf("no pool %s in %+v", name, pools.Items)
	return ""
}

func (e *fleetEnv) checkDrift(ctx context.Context) int {
	e.t.Helper()
	n, err := e.srv.CheckDrift(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *fleetEnv) status() statusOut {
	e.t.Helper()
	var st statusOut
	e.mustCall(e.admin, "fleet.status", map[string]any{"tenantId": "root"}, &st)
	return st
}
