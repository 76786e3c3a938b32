package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestRoundtripStatus prints the journals for people and scripts, and --abandon closes an
// open roundtrip journal (golden file).
func TestRoundtripStatus(t *testing.T) {
	dir := t.TempDir()
	b := &transcript{t: t}
	record := b.run
	record("roundtrip", "status", "--private-dir", dir)

	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	s, err := journal.Open(filepath.Join(dir, journal.RoundtripPath), clock)
	if err != nil {
		t.Fatal(err)
	}
	run := journal.NewRun(at)
	j := &journal.Journal{Workflow: "roundtrip up", Run: run, State: journal.StateOpen, StartedAt: at.UnixMilli(),
		Cubes:       []journal.Cube{{Name: "cube-" + run + "-2", Slot: 2, PrivateIP: "10.7.0.13", ServerID: "5a000000-0000-4000-8000-000000000009", RequestID: "req-1"}},
		TargetLists: map[string][]string{"tg-1": {"10.7.0.11:8080", "10.7.0.12:8080"}}}
	for _, step := range []string{"create server", "attach security group"} {
		if err := s.Begin(j, step, j.Cubes[0].Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(j, "create server", "request req-1 DONE"); err != nil {
		t.Fatal(err)
	}
	record("roundtrip", "status", "--private-dir", dir)
	record("roundtrip", "status", "--private-dir", dir, "--abandon") // the run still holds the lock
	s.Close()
	var out statusOut
	if err := json.Unmarshal([]byte(record("roundtrip", "status", "--private-dir", dir, "-o", "json")), &out); err != nil ||
		out.Roundtrip == nil || out.Roundtrip.Cubes[0].ServerID != j.Cubes[0].ServerID || len(out.Roundtrip.Unfinished()) != 1 {
		t.Errorf("status -o json: %+v %v", out, err)
	}
	record("roundtrip", "status", "--private-dir", dir, "--note", "deleted by hand")
	record("roundtrip", "status", "--private-dir", dir, "--abandon", "--note", "deleted the server by hand")
	record("roundtrip", "status", "--private-dir", dir, "--abandon")
	host, _ := os.Hostname()
	got := strings.ReplaceAll(b.String(), dir, "$TMP")
	if host != "" {
		got = strings.ReplaceAll(got, "on host "+host, "on host $HOST")
	}
	got = pidPattern.ReplaceAllLiteralString(got, "pid $PID")
	got = sincePattern.ReplaceAllLiteralString(got, "since $TIME")
	testkit.Golden(t, "roundtrip_status.golden", []byte(got))
}

var (
	pidPattern   = regexp.MustCompile(`pid \d+`)
	sincePattern = regexp.MustCompile(`since \d{4}-\d\d-\d\dT[0-9:]+Z`)
)

// TestRoundtripUpDownRefusals: roundtrip up without its required flags is a usage error; a
// preflight with a FAIL (a Cube without its WireGuard peer) exits 1 with PLAN_BLOCKED, names
// the failing check and changes nothing (no journal, no create); roundtrip down without a
// journal has nothing to take down; a run while another holds the journal is refused, naming
// the holder.
func TestRoundtripUpDownRefusals(t *testing.T) {
	eachDatabase(t, func(t *testing.T, c *cliEnv) {
		// Cubes on loopback addresses, each with its sshd, reached through the coordinator's.
		f := newCubeFleetOn(t, c, 2, loopbackIP)
		sshd := testkit.StartSSHDWith(t, testkit.SSHDOptions{Forwarding: true})
		cube0 := testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: loopbackIP(0), Like: sshd})
		testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: loopbackIP(1), Port: cube0.Port, Like: sshd})
		peers := sshd.WireGuardStandIn(t, "wg0")
		if err := os.WriteFile(peers, []byte(wgPeer(1, loopbackIP(0))), 0o644); err != nil {
			t.Fatal(err)
		}
		f.fields["coordinator"] = map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User}
		f.fields["gpu_wireguard"] = map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User, "interface": "wg0"}
		f.fields["ssh"] = map[string]any{"key_file": sshd.KeyFile, "known_hosts_file": sshd.KnownHosts, "cube_user": sshd.User, "cube_port": cube0.Port}
		f.writeProfile(t)
		private := t.TempDir()
		fleet := []string{"--profile", f.profile, "--config", f.ionos.config, "--api-url", f.ionos.sim.URL, "--private-dir", private}

		code, _, errOut := f.run("", append([]string{"roundtrip", "up"}, fleet...)...)
		if code != ExitUsage || !strings.Contains(errOut, "--canary-template and --agent-binary-url are required") {
			t.Errorf("up without its flags: exit %d %s", code, errOut)
		}
		up := append([]string{"roundtrip", "up", "--canary-template", "sh", "--agent-binary-url", "http://127.0.0.1:9/cubefleet"}, fleet...)
		code, _, errOut = f.run("", up...)
		if code != ExitFailure || !strings.Contains(errOut, "PLAN_BLOCKED: preflight: 1 of") || !strings.Contains(errOut, "FAIL wireguard peer cube-001") {
			t.Errorf("up with a failing preflight: exit %d %s", code, errOut)
		}
		// A control plane loading a fixed origin list (control_plane.target_group): refused
		// before anything, naming scale apply with a replacement.
		cp := f.fields["control_plane"].(map[string]any)
		cp["target_group"] = "cubes"
		f.writeProfile(t)
		code, _, errOut = f.run("", up...)
		if code != ExitFailure || !strings.Contains(errOut, "fixed origin list") || !strings.Contains(errOut, "scale apply --target-cubes 3 --replacement URL") {
			t.Errorf("up with a static-membership control plane: exit %d %s", code, errOut)
		}
		delete(cp, "target_group")
		f.writeProfile(t)
		if n := f.ionos.sim.Sim.Count("POST", "/cloudapi/v6/datacenters/"+ionossim.SampleDatacenterID+"/servers"); n != 0 {
			t.Errorf("%d creates after a failed preflight", n)
		}
		if j, err := journal.Read(filepath.Join(private, journal.RoundtripPath)); j != nil || err != nil {
			t.Errorf("journal after a failed preflight: %+v %v", j, err)
		}
		code, _, errOut = f.run("", append([]string{"roundtrip", "down"}, fleet...)...)
		if code != ExitFailure || !strings.Contains(errOut, "holds no roundtrip to take down") {
			t.Errorf("down without a journal: exit %d %s", code, errOut)
		}
		held, err := journal.Open(filepath.Join(private, journal.RoundtripPath), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, _, errOut = f.run("", up...)
		held.Close()
		if code != ExitFailure || !strings.Contains(errOut, "another run holds") || !strings.Contains(errOut, "pid ") {
			t.Errorf("up while another run holds the journal: exit %d %s", code, errOut)
		}
	})
}
