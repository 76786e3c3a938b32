package ionos_test

import (
	"testing"

	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
)

// BenchmarkInventory1000 reads a 1,000-server data center from the loopback simulator through
// the SDK (targets: <= 1 s and <= 10 requests per inventory; requests/op is the simulator's
// count).
func BenchmarkInventory1000(b *testing.B) {
	bd := setup(b, ionossim.SampleFleet(1000), nil)
	ctx := testCtx(b)
	bd.sim.Sim.ResetCounts()
	n := 0
	for b.Loop() {
		inv, err := bd.client.Inventory(ctx, ionossim.SampleDatacenterID)
		if err != nil {
			b.Fatal(err)
		}
		if len(inv.Servers) != 1000 {
			b.Fatalf("%d servers", len(inv.Servers))
		}
		n++
	}
	b.ReportMetric(float64(bd.sim.Sim.Total())/float64(n), "requests/op")
}
