package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestRoundtripPlanAndCheck plans the roundtrip on the baseline fleet (two Cubes, one empty
// slot), checks the fleet (all ok), then breaks the cloud side and the membership and checks
// again: each break is one FAIL line naming what is wrong (golden file).
func TestRoundtripPlanAndCheck(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		f := newCubeFleet(t, c, 2)
		var b strings.Builder
		f.record(&b, "roundtrip", "plan")
		f.record(&b, "roundtrip", "check")

		st := f.ionos.sim.Sim.Snapshot()
		dc := st.Datacenters[0]
		dc.Servers[1].SecurityGroupIDs = nil
		st.TargetGroups[0].Targets[0].MaintenanceEnabled = true
		dc.ApplicationLBs[0].ForwardingRules[0].HTTPRules = nil
		if err := f.ionos.sim.Sim.Load(st); err != nil {
			t.Fatal(err)
		}
		c.admin("nodes", "cordon", ionossim.SampleServerIP(0), "--reason", "maintenance")
		var pool struct {
			Items []struct{ ID string } `json:"items"`
		}
		json.Unmarshal([]byte(c.admin("api", "compute.pools.list", `{"tenantId":"root"}`)), &pool)
		token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.Items[0].ID, "--any-ip"))
		if code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", "10.7.0.99")); code != 200 {
			t.Fatalf("register a stray node: %d %s", code, out)
		}
		f.record(&b, "roundtrip", "check")
		var out checksOut
		if err := json.Unmarshal([]byte(f.record(&strings.Builder{}, "roundtrip", "check", "-o", "json")), &out); err != nil || out.OK {
			t.Fatalf("check -o json: ok %v, %v", out.OK, err)
		}
		failed := map[string]bool{}
		for _, ch := range out.Checks {
			if !ch.OK {
				failed[ch.Name] = true
			}
		}
		for _, name := range []string{"security group cube-001", "target cube-000 in cubes", "load balancer alb forwards to cubes", "member cube-000", "member 10.7.0.99"} {
			if !failed[name] {
				t.Errorf("check %q did not fail: %+v", name, out.Checks)
			}
		}
		// A Cube beyond the baseline (an unfinished roundtrip) stops the plan, as does a
		// broken planning rule.
		var profile map[string]any
		if err := json.Unmarshal([]byte(readExample(t, "ionos-fleet-profile.example.json")), &profile); err != nil {
			t.Fatal(err)
		}
		profile["control_plane"] = map[string]any{"url": c.url, "pool": pool.Items[0].ID, "api_key_file": c.tokenFile}
		profile["ionos_token_file"] = f.ionos.token
		profile["baseline_cubes"] = []string{"cube-000"}
		f.writeProfile(t, profile)
		f.record(&b, "roundtrip", "plan")
		testkit.Golden(t, "roundtrip_check.golden", []byte(b.String()))
	})
}
