package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
		// The coordinator and the GPU host: sshd on loopback, with a `wg` stand-in listing
		// the peers of peers.txt.
		sshd := testkit.StartSSHD(t)
		peers := filepath.Join(t.TempDir(), "peers.txt")
		writePeers := func(lines ...string) {
			t.Helper()
			if err := os.WriteFile(peers, []byte(strings.Join(lines, "")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		writePeers(wgPeer(1, ionossim.SampleServerIP(0)), wgPeer(2, ionossim.SampleServerIP(1)))
		stand := "#!/bin/sh\n[ \"$*\" = \"show wg0 allowed-ips\" ] || { echo \"wg: unexpected $*\" >&2; exit 1; }\ncat " + peers + "\n"
		if err := os.WriteFile(filepath.Join(sshd.Bin, "wg"), []byte(stand), 0o755); err != nil {
			t.Fatal(err)
		}
		host := map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User}
		f.fields["coordinator"] = host
		f.fields["gpu_wireguard"] = map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User, "interface": "wg0"}
		f.fields["ssh"] = map[string]any{"key_file": sshd.KeyFile, "known_hosts_file": sshd.KnownHosts, "cube_user": "root"}
		f.writeProfile(t)
		norm := strings.NewReplacer(fmt.Sprintf(":%d", sshd.Port), ":$SSH_PORT", sshd.User+"@", "$USER@")
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
		writePeers(wgPeer(1, ionossim.SampleServerIP(0)))
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
		for _, name := range []string{"security group cube-001", "target cube-000 in cubes", "load balancer alb forwards to cubes", "member cube-000", "member 10.7.0.99", "wireguard peer cube-001"} {
			if !failed[name] {
				t.Errorf("check %q did not fail: %+v", name, out.Checks)
			}
		}
		// A Cube beyond the baseline (an unfinished roundtrip) stops the plan, as does a
		// broken planning rule.
		// A changed host key fails the SSH checks.
		sshd.WriteKnownHost(t, sshd.OtherHostKey(t))
		f.record(&b, "roundtrip", "check")
		f.fields["baseline_cubes"] = []string{"cube-000"}
		f.writeProfile(t)
		f.record(&b, "roundtrip", "plan")
		testkit.Golden(t, "roundtrip_check.golden", []byte(norm.Replace(b.String())))
	})
}

// wgPeer is one line of `wg show IF allowed-ips`: peer n's public key and ip/32.
func wgPeer(n int, ip string) string {
	return fmt.Sprintf("%042dA=\t%s/32\n", n, ip)
}
