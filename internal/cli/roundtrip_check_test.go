package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestRoundtripPlanAndCheck plans the roundtrip on the baseline fleet (two Cubes on loopback
// addresses, one empty slot), checks the fleet (all ok: each Cube's sshd is reached through
// the coordinator's as a jump host), then breaks the cloud side, the membership and a Cube's
// host key and checks again: each break is one FAIL line naming what is wrong (golden file).
func TestRoundtripPlanAndCheck(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		f := newCubeFleetOn(t, c, 2, loopbackIP)
		// The coordinator and the GPU host: sshd on loopback, with a `wg` stand-in listing
		// the peers of peers.txt; each Cube's sshd on its address, on one port.
		sshd := testkit.StartSSHDWith(t, testkit.SSHDOptions{Forwarding: true})
		cube0 := testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: loopbackIP(0), Like: sshd})
		cube1 := testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: loopbackIP(1), Port: cube0.Port, Like: sshd})
		peers := filepath.Join(t.TempDir(), "peers.txt")
		writePeers := func(lines ...string) {
			t.Helper()
			if err := os.WriteFile(peers, []byte(strings.Join(lines, "")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		writePeers(wgPeer(1, loopbackIP(0)), wgPeer(2, loopbackIP(1)))
		stand := "#!/bin/sh\n[ \"$*\" = \"show wg0 allowed-ips\" ] || { echo \"wg: unexpected $*\" >&2; exit 1; }\ncat " + peers + "\n"
		if err := os.WriteFile(filepath.Join(sshd.Bin, "wg"), []byte(stand), 0o755); err != nil {
			t.Fatal(err)
		}
		host := map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User}
		f.fields["coordinator"] = host
		f.fields["gpu_wireguard"] = map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User, "interface": "wg0"}
		f.fields["ssh"] = map[string]any{"key_file": sshd.KeyFile, "known_hosts_file": sshd.KnownHosts, "cube_user": sshd.User, "cube_port": cube0.Port}
		f.writeProfile(t)
		ports := []string{fmt.Sprintf(":%d", sshd.Port), ":$SSH_PORT", fmt.Sprintf(":%d", cube0.Port), ":$CUBE_SSH_PORT"}
		if len(ports[2]) > len(ports[0]) {
			ports = append(ports[2:], ports[:2]...)
		}
		norm := strings.NewReplacer(append(ports, sshd.User+"@", "$USER@")...)
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
		c.admin("nodes", "cordon", loopbackIP(0), "--reason", "maintenance")
		var pool struct {
			Items []struct{ ID string } `json:"items"`
		}
		json.Unmarshal([]byte(c.admin("api", "compute.pools.list", `{"tenantId":"root"}`)), &pool)
		token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", pool.Items[0].ID, "--any-ip"))
		if code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", "10.7.0.99")); code != 200 {
			t.Fatalf("register a stray node: %d %s", code, out)
		}
		writePeers(wgPeer(1, loopbackIP(0)))
		cube1.AddKnownHost(t, cube1.OtherHostKey(t))
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
		for _, name := range []string{"security group cube-001", "target cube-000 in cubes", "load balancer alb forwards to cubes", "member cube-000", "member 10.7.0.99", "wireguard peer cube-001", "ssh cube cube-001"} {
			if !failed[name] {
				t.Errorf("check %q did not fail: %+v", name, out.Checks)
			}
		}
		// A Cube beyond the baseline (an unfinished roundtrip) stops the plan, as does a
		// broken planning rule.
		// A changed host key of the coordinator fails the SSH checks; the Cubes behind it are
		// not tried.
		sshd.AddKnownHost(t, sshd.OtherHostKey(t))
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
