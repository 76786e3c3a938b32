package sandboxes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestPools: a pool's use for the console's Pools page: each offer's quota with what its tenant
// takes, each warm pool's fill against its min and max, and the creates waiting for room.
func TestPools(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10, "vcpu": 64}, Warm: &compute.Warm{Min: 2, Max: 3}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 3)
		a.Behave = forever
		a.Start(50 * time.Millisecond)
		var use sandboxes.PoolUse
		e.Eventually(10*time.Second, func() string {
			if err := e.Svc.KeepWarm(ctx); err != nil {
				return err.Error()
			}
			pools, err := e.Svc.Pools(ctx)
			if err != nil {
				return err.Error()
			}
			if len(pools) != 1 || len(pools[0].Warm) != 1 || pools[0].Warm[0].Ready != 2 {
				return fmt.Sprintf("pools %+v", pools)
			}
			use = pools[0]
			return ""
		})
		if w := use.Warm[0]; w.TemplateID != e.Templates["acme"] || w.Template != "py" || w.Min != 2 || w.Max != 3 || w.Starting != 0 {
			t.Errorf("warm fill %+v", w)
		}
		e.Create("acme", "sleep") // claims a warm sandbox
		e.Create("root", "sleep") // the third slot
		e.Create("root", "sleep") // waits
		e.Eventually(10*time.Second, func() string {
			pools, err := e.Svc.Pools(ctx)
			if err != nil {
				return err.Error()
			}
			use = pools[0]
			// acme takes the claimed sandbox and the idle warm one left (warm sandboxes count
			// against their tenant's offer); the third slot is root's, and root's next waits.
			if use.Waiting != 1 || len(use.Offers) != 1 || use.Offers[0].Used.Sandboxes != 2 || use.Warm[0].Ready != 1 {
				return fmt.Sprintf("pool %+v", use)
			}
			return ""
		})
		if off := use.Offers[0]; off.Tenant != "acme" || off.Quota["sandboxes"] != 10 || off.Quota["vcpu"] != 64 || off.Used.VCPU != 4 || use.PoolID != e.Pool {
			t.Errorf("offer use %+v of pool %s", off, use.PoolID)
		}
	})
}
