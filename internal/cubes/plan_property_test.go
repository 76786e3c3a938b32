package cubes_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// genWorld draws a configuration, an inventory and a target. Half the worlds start clean
// (every slot's Cube present, running, addressed and grouped as configured) so that accepted
// plans are common; every world then gets random damage: empty slots, missing, foreign,
// protected, stopped, busy, renamed or under-sized servers, stray address holders.
func genWorld(t *rapid.T) (*cubes.Config, *ionos.Inventory, int) {
	cfg, inv := base()
	k := rapid.IntRange(1, 8).Draw(t, "slots")
	clean := rapid.Bool().Draw(t, "clean")
	damage := func(label string) bool { return !clean && rapid.IntRange(0, 9).Draw(t, label) == 0 }
	cfg.Slots = nil
	inv.Servers = inv.Servers[3:] // keep the protected coordinator
	cfg.MinimumCubes = rapid.IntRange(1, k).Draw(t, "minimum_cubes")
	for i := range k {
		name, ip := fmt.Sprintf("cube-%d", i), fmt.Sprintf("10.7.0.%d", 20+i)
		slot := cubes.Slot{Name: name, PrivateIP: ip}
		if rapid.IntRange(0, 3).Draw(t, "empty") > 0 {
			slot.ServerID = srvID(i)
			s := cube(i, name, ip)
			if damage("stopped") {
				s.VMState = rapid.SampledFrom([]string{"SUSPENDED", "SHUTOFF", "CRASHED"}).Draw(t, "vmState")
			}
			if damage("busy") {
				s.State = "BUSY"
			}
			if damage("foreign") {
				s.Type = "ENTERPRISE"
			}
			if damage("small") {
				s.Cores = 2
			}
			if damage("renamed") {
				s.Name = "renamed"
			}
			if damage("ungrouped") {
				s.SecurityGroupIDs = []string{defaultSG}
			}
			if !damage("missing") {
				inv.Servers = append(inv.Servers, s)
			}
		}
		if damage("protected") {
			slot.ServerID = protectedP
		}
		if damage("duplicate") && i > 0 {
			slot.ServerID = srvID(rapid.IntRange(0, i-1).Draw(t, "dup"))
		}
		cfg.Slots = append(cfg.Slots, slot)
	}
	if damage("stray") {
		inv.Servers = append(inv.Servers, cube(90, "stray", fmt.Sprintf("10.7.0.%d", 20+rapid.IntRange(0, k-1).Draw(t, "stray ip"))))
	}
	if damage("pending") {
		inv.PendingRequests = append(inv.PendingRequests, ionos.PendingRequest{ID: id(700), Method: "DELETE", Status: "RUNNING",
			Targets: []ionos.RequestTarget{{ID: srvID(0), Type: "server"}}})
	}
	if damage("stale") {
		inv.FetchedAt = now.Add(-time.Hour).UnixMilli()
	}
	return cfg, inv, rapid.IntRange(0, k+1).Draw(t, "target")
}

func TestPlanProperties(t *testing.T) {
	accepted, rejected := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		cfg, inv, target := genWorld(t)
		plan := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: target, Now: now})

		if again := cubes.PlanSlots(cfg, inv, cubes.PlanOptions{Target: target, Now: now}); !reflect.DeepEqual(plan, again) {
			t.Fatal("the same inputs gave two plans")
		}
		if len(plan.Slots) != len(cfg.Slots) || plan.Accepted != (len(plan.Problems) == 0) {
			t.Fatalf("%d slot plans for %d slots; accepted %v with %d problems", len(plan.Slots), len(cfg.Slots), plan.Accepted, len(plan.Problems))
		}
		if !plan.Accepted {
			rejected++
			return
		}
		accepted++
		servers := map[string]ionos.Server{}
		for _, s := range inv.Servers {
			servers[s.ID] = s
		}
		kept, lastRetained, firstRemoved := 0, -1, len(plan.Slots)
		for _, sp := range plan.Slots {
			if slices.Contains(cfg.ProtectedServerIDs, sp.ServerID) {
				t.Fatalf("accepted plan lists protected server %s in slot %d", sp.ServerID, sp.Index)
			}
			switch sp.Action {
			case cubes.Retain:
				kept++
				lastRetained = sp.Index
				s, ok := servers[sp.ServerID]
				if !ok || s.VMState != "RUNNING" || s.Type != "CUBE" || s.State != "AVAILABLE" {
					t.Fatalf("accepted plan retains slot %d whose server is %+v", sp.Index, s)
				}
			case cubes.Create:
				kept++
			case cubes.Remove:
				firstRemoved = min(firstRemoved, sp.Index)
			}
		}
		if lastRetained > firstRemoved {
			t.Fatalf("slot %d is removed while higher slot %d is retained: %s", firstRemoved, lastRetained, actions(plan))
		}
		if kept != target {
			t.Fatalf("accepted plan keeps %d Cubes for target %d", kept, target)
		}
		if plan.Capacity == nil || plan.Capacity.Cubes != target || plan.Capacity.WorkerSlots != cubes.WorkersPerCube*target {
			t.Fatalf("accepted plan reports capacity %+v for target %d", plan.Capacity, target)
		}
	})
	t.Logf("%d accepted and %d rejected plans checked", accepted, rejected)
	if accepted < 10 || rejected < 10 {
		t.Errorf("the generator is lopsided: %d accepted, %d rejected", accepted, rejected)
	}
}
