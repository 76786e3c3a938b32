package cubes_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos"
)

// baseFound is what the base world's names resolve to.
func baseFound() *cubes.Discovered {
	return &cubes.Discovered{DatacenterID: dcID, PrivateLANID: 2, NATGatewayID: id(400), ApplicationLoadBalancerID: id(500),
		TargetGroupIDs: []string{id(600)}, WorkerSecurityGroupID: workerSG,
		BaselineServerIDs: map[string]string{"cube-0": srvID(0), "cube-1": srvID(1), "cube-2": srvID(2)}, RuntimeSourceServerID: srvID(0)}
}

// TestCheckFleet: each break of the cloud side or the membership fails exactly its checks.
func TestCheckFleet(t *testing.T) {
	healthy := func(inv *ionos.Inventory) {
		inv.TargetGroups[0].Targets = nil
		for _, ip := range []string{"10.7.0.11", "10.7.0.12", "10.7.0.13"} {
			inv.TargetGroups[0].Targets = append(inv.TargetGroups[0].Targets, ionos.Target{IP: ip, Port: 8080, Weight: 1, HealthCheckEnabled: true})
		}
	}
	for _, tc := range []struct {
		name    string
		edit    func(inv *ionos.Inventory, ms *[]cubes.Member)
		failing []string
	}{
		{name: "healthy", edit: func(*ionos.Inventory, *[]cubes.Member) {}},
		{name: "NAT gateway off the private LAN", edit: func(inv *ionos.Inventory, _ *[]cubes.Member) { inv.NATGateways[0].LANs = nil },
			failing: []string{"NAT gateway nat"}},
		{name: "load balancer on another LAN", edit: func(inv *ionos.Inventory, _ *[]cubes.Member) { inv.ApplicationLoadBalancers[0].TargetLANID = 3 },
			failing: []string{"load balancer alb target LAN"}},
		{name: "a target missing, one drained", edit: func(inv *ionos.Inventory, _ *[]cubes.Member) {
			inv.TargetGroups[0].Targets = inv.TargetGroups[0].Targets[1:]
			inv.TargetGroups[0].Targets[0].Weight = 0
		}, failing: []string{"target cube-0 in cubes", "target cube-1 in cubes"}},
		{name: "a Cube not registered, a stray node, one NotReady", edit: func(_ *ionos.Inventory, ms *[]cubes.Member) {
			(*ms)[0] = cubes.Member{ID: "10.7.0.99", IP: "10.7.0.99", State: "Ready"}
			(*ms)[1].State = "NotReady"
		}, failing: []string{"member cube-0", "member cube-1", "member 10.7.0.99"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, inv := base()
			healthy(inv)
			ms := members(0, 1, 2)
			tc.edit(inv, &ms)
			failed := map[string]bool{}
			for _, c := range cubes.CheckFleet(cfg, inv, baseFound(), ms, 8080, cubes.PlanOptions{Now: now}) {
				if !c.OK {
					failed[c.Name] = true
				}
			}
			want := map[string]bool{}
			for _, n := range tc.failing {
				want[n] = true
			}
			if !maps.Equal(failed, want) {
				t.Errorf("failing %v, want %v", slices.Sorted(maps.Keys(failed)), tc.failing)
			}
		})
	}
}

// TestPlanRoundtrip: the new Cube takes the lowest empty slot with a journaled name, and a
// Cube beyond the baseline stops the plan.
func TestPlanRoundtrip(t *testing.T) {
	cfg, inv := base()
	p := &cubes.Profile{CubeNamePrefix: "cube-", BaselineCubes: []string{"cube-0", "cube-1", "cube-2"}, Image: "ubuntu:latest",
		ControlPlane: cubes.ProfileControlPlane{Pool: "fra"}, GPUWireGuard: cubes.ProfileWireGuard{ProfileSSHHost: cubes.ProfileSSHHost{Host: "gpu"}, Interface: "wg0"}}
	plan := func(found *cubes.Discovered) *cubes.RoundtripPlan {
		sp := cubes.PlanScale(cfg, inv, members(0, 0, 0), cubes.ScaleOptions{Target: 4, Now: now, RuntimeSourceServerID: srvID(0)})
		return cubes.PlanRoundtrip(cfg, p, found, sp)
	}
	rp := plan(baseFound())
	if !rp.Accepted || rp.Slot != 3 || rp.PrivateIP != "10.7.0.14" || rp.NamePattern != "cube-<run>-3" || len(rp.Calls) != 8 {
		t.Fatalf("plan %+v", rp)
	}
	found := baseFound()
	delete(found.BaselineServerIDs, "cube-2")
	p.BaselineCubes = p.BaselineCubes[:2]
	if rp := plan(found); rp.Accepted || rp.Slot != -1 || len(rp.Problems) != 1 || rp.Problems[0].Rule != cubes.RuleIdentityMismatch || rp.Problems[0].SlotIndex != 2 {
		t.Errorf("a Cube beyond the baseline: %+v", rp.Problems)
	}
}
