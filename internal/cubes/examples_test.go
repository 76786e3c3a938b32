package cubes_test

import (
	"os"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// TestExamples checks that the shipped examples decode and plan as docs/ionos.md says.
func TestExamples(t *testing.T) {
	cf, err := os.Open("../../examples/ionos-fleet-config.example.json")
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	cfg, err := cubes.DecodeConfig(cf)
	if err != nil {
		t.Fatal(err)
	}
	invf, err := os.Open("../../examples/ionos-inventory.example.json")
	if err != nil {
		t.Fatal(err)
	}
	defer invf.Close()
	inv, err := ionos.DecodeInventory(invf)
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(inv.FetchedAt).Add(time.Minute)
	for target, want := range map[int]string{2: "RRXEE", 3: "RRREE", 4: "RRRCE", 5: "RRRCC"} {
		p := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: target, Now: at})
		if !p.Accepted || actions(p) != want {
			t.Errorf("target %d: %s accepted %v, want %s\n%s", target, actions(p), p.Accepted, want, problems(p))
		}
	}
	if p := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: 1, Now: at}); p.Accepted {
		t.Error("target 1 is below minimum_cubes 2 but was accepted")
	}
}
