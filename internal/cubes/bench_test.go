package cubes_test

import (
	"fmt"
	"testing"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// bigWorld is n slots, each held by a running Cube on private LAN 2, plus the base world's
// networks, groups and templates: the worst case of an accepted plan.
func bigWorld(n int) (*cubes.Config, *ionos.Inventory) {
	cfg, inv := base()
	cfg.Slots = make([]cubes.Slot, n)
	inv.Servers = inv.Servers[3:]
	for i := range n {
		name, ip := fmt.Sprintf("cube-%04d", i), fmt.Sprintf("10.7.%d.%d", (20+i)/250, (20+i)%250+1)
		cfg.Slots[i] = cubes.Slot{Name: name, PrivateIP: ip, ServerID: srvID(i)}
		inv.Servers = append(inv.Servers, cube(i, name, ip))
	}
	return cfg, inv
}

// BenchmarkPlanSlots1000x1000 plans 1,000 slots against 1,000 servers (target: <= 50 ms).
func BenchmarkPlanSlots1000x1000(b *testing.B) {
	cfg, inv := bigWorld(1000)
	if p := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: 500, Now: now}); !p.Accepted {
		b.Fatalf("rejected: %s", problems(p))
	}
	b.ReportAllocs()
	for b.Loop() {
		cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: 500, Now: now})
	}
}
