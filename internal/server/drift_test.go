package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/controlplane"
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
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
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
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
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
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
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

// TestDriftAndWebhookMetrics: after a drift check that finds a hand edit and the delivery of
// its fleet.drifted to a receiver, /metrics shows the tenant in drift, the check and the event,
// the delivery by outcome and an empty outbox.
func TestDriftAndWebhookMetrics(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, func(c *Config) { c.AllowPrivateWebhookTargets = true })
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		t.Cleanup(receiver.Close)
		e.must(e.admin, "webhooks.create", map[string]any{"tenantId": "root", "url": receiver.URL, "events": []string{"fleet.drifted"}}, nil)
		e.driftedFleet()
		want := []string{
			`cubefleet_fleet_drifted{tenant="root"} 1`,
			`cubefleet_fleet_drifted{tenant="acme"} 0`,
			`cubefleet_fleet_drift_checks_total{result="ok"} 2`,
			`cubefleet_fleet_drift_events_total{type="fleet.drifted"} 1`,
			`cubefleet_fleet_drift_check_duration_seconds_count 2`,
			`cubefleet_webhook_deliveries_total{outcome="delivered"} 1`,
			`cubefleet_webhook_outbox_pending 0`,
			`cubefleet_webhook_outbox_oldest_age_seconds 0`,
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, body := e.get("/metrics")
			var missing []string
			for _, w := range want {
				if !strings.Contains(string(body), w+"\n") {
					missing = append(missing, w)
				}
			}
			if len(missing) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/metrics lacks %q", missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
