package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// growPoints and reducePoints are every step of scale apply's growth (roundtrip up's) and of
// its reduction (roundtrip down's, between the accepted result and the coordinator before
// them and the result read through both configurations after).
var (
	growPoints   = upPoints
	reducePoints = append(append([]string{cubes.StepAcceptResult, cubes.StepCoordinator}, downPoints...), cubes.StepCheckResult)
)

// scale runs `cubefleet scale apply --target-cubes target --yes -o json` on the rig's fleet
// as a child process, killed at crashAt when it is set.
func (rg *roundtripRig) scale(crashAt string, target int) (string, string, int) {
	rg.t.Helper()
	return rg.cli(crashAt, "scale", "apply", "--profile", rg.profile, "--config", rg.config, "--api-url", rg.simURL,
		"--private-dir", rg.privateDir, "--poll", "100ms", "--wait-budget", "20s", "--timeout", "20s", "--target-cubes", fmt.Sprint(target),
		"--agent-binary-url", "http://127.0.0.1:9/cubefleet", "--agent-env", rg.agentEnv, "--canary-template", "sh", "--node-wait", "60s",
		"--yes", "-o", "json")
}

// scaleCrashing runs scale apply to target killed (SIGKILL) at each of points in turn, every
// rerun resuming the journal the previous one left, then once more to the end, and returns
// the finished journal.
func (rg *roundtripRig) scaleCrashing(target int, points []string) journal.Journal {
	t := rg.t
	t.Helper()
	for _, p := range points {
		if out, errOut, code := rg.scale(p, target); code != -int(syscall.SIGKILL) {
			t.Fatalf("scale apply to %d meant to be killed at %s: exit %d\n%s%s", target, p, code, out, errOut)
		}
	}
	out, errOut, code := rg.scale("", target)
	var j journal.Journal
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j.State != journal.StateDone {
		t.Fatalf("scale apply to %d after crashes at %v: exit %d\n%s%s", target, points, code, out, errOut)
	}
	if len(points) > 0 && !strings.Contains(errOut, "resuming run "+j.Run) {
		t.Errorf("the last rerun did not resume run %s:\n%s", j.Run, errOut)
	}
	return j
}

// setSlot records serverID ("" for none) in slot i of the rig's configuration, as the
// operator does after a growth or a reduction.
func (rg *roundtripRig) setSlot(i int, serverID string) {
	t := rg.t
	t.Helper()
	f, err := os.Open(rg.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cubes.DecodeConfig(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Slots[i].ServerID = serverID
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, rg.config, string(b), 0o600)
}

// TestScaleApplyCrashes grows the rig's fleet of 2 Cubes to 3 with scale apply and reduces it
// to 2 again, killing each run with SIGKILL at every step of the workflow in turn (each rerun
// resumes the journal and is killed at the next step), at one of the points of every step:
// when it is journaled begun, after its side effect before its journal entry, and after the
// entry (-short: after the side effect only). After each growth: exactly one Cube created, in
// slot 2, named for its run and slot, with one peer and one target; recorded in its slot,
// scale plan and roundtrip check accept it (the first time). After each reduction: the cloud,
// the GPU host's peers and config file and the target lists exactly as before the growth (so
// only the planned server was deleted and no peer is orphaned), the node gone, and both the
// growth's canary and the result accepted on the departing Cube still read as exited.
func TestScaleApplyCrashes(t *testing.T) {
	rg := newRoundtripRig(t, "")
	before := rg.baseline()
	ats := []string{"begun", "applied", "done"}
	if testing.Short() {
		ats = []string{"applied"}
	}
	for n, at := range ats {
		points := func(steps []string) []string {
			var out []string
			for _, s := range steps {
				out = append(out, s+"/"+at)
			}
			return out
		}
		creates := rg.creates()
		grown := rg.scaleCrashing(3, points(growPoints))
		if got := rg.creates() - creates; got != 1 {
			t.Errorf("crashes at */%s: %d Cubes created, want 1", at, got)
		}
		if len(grown.Cubes) != 1 || grown.Workflow != cubes.WorkflowScaleGrowth {
			t.Fatalf("the growth's journal: %+v", grown)
		}
		c := grown.Cubes[0]
		if c.Slot != 2 || c.Name != journal.CubeName("cube-", grown.Run, 2) {
			t.Errorf("the grown Cube %s in slot %d, want %s in slot 2", c.Name, c.Slot, journal.CubeName("cube-", grown.Run, 2))
		}
		v := rg.view()
		if len(v.Servers) != len(before.cloud.Servers)+1 || !strings.Contains(v.Servers[len(v.Servers)-1], c.ServerID+" "+c.Name+" RUNNING ["+c.PrivateIP+"]") {
			t.Errorf("servers after the growth: %v", v.Servers)
		}
		if got := countContaining(v.Targets, " "+c.PrivateIP+":8080 "); got != 1 || len(v.Targets) != len(before.cloud.Targets)+1 {
			t.Errorf("targets after the growth (%d of the new Cube): %v", got, v.Targets)
		}
		peers, _ := os.ReadFile(rg.peers)
		if got := strings.Count(string(peers), "\t"+c.PrivateIP+"/32"); got != 1 || !strings.Contains(string(peers), c.PeerKey+"\t") {
			t.Errorf("peers after the growth (%d for %s):\n%s", got, c.PrivateIP, peers)
		}
		rg.waitNode(c.PrivateIP, func(v nodes.View) bool { return v.State == nodes.StateReady && v.Pool == "lab" })

		// The operator records the new Cube in its slot; its run's name is its slot's.
		rg.setSlot(2, c.ServerID)
		fleet := []string{"--profile", rg.profile, "--config", rg.config, "--api-url", rg.simURL}
		if out, errOut, code := rg.cli("", append([]string{"scale", "plan", "--target-cubes", "3"}, fleet...)...); code != 0 || !strings.Contains(out, "Nothing to do") {
			t.Errorf("scale plan after the growth: exit %d\n%s%s", code, out, errOut)
		}
		if n == 0 {
			testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: c.PrivateIP, Port: rg.cubePort, Like: rg.sshd})
			out, errOut, code := rg.cli("", append([]string{"roundtrip", "check"}, fleet...)...)
			if code != 0 || !strings.Contains(out, "ok   fleet plan") {
				t.Errorf("roundtrip check after the growth: exit %d\n%s%s", code, out, errOut)
			}
		}

		reduced := rg.scaleCrashing(2, points(reducePoints))
		if len(reduced.Cubes) != 1 || reduced.Cubes[0].ServerID != c.ServerID || reduced.Cubes[0].Name != c.Name {
			t.Fatalf("the reduction's journal: %+v, want the grown Cube %s (%s)", reduced.Cubes, c.Name, c.ServerID)
		}
		var deleted []string
		for _, s := range reduced.Steps {
			if s.Name == cubes.StepDeleteServer && !slices.Contains(deleted, s.Cube) {
				deleted = append(deleted, s.Cube)
			}
		}
		if !slices.Equal(deleted, []string{c.Name}) {
			t.Errorf("deleted %v, want only %s", deleted, c.Name)
		}
		rg.setSlot(2, "")
		rg.reap()
		if after := rg.baseline(); !slices.Equal(after.cloud.Servers, before.cloud.Servers) || !slices.Equal(after.cloud.Targets, before.cloud.Targets) ||
			after.peers != before.peers || after.wgCfg != before.wgCfg {
			t.Errorf("after the reduction:\n%+v\nwant\n%+v", after, before)
		}
		for _, id := range []string{c.Canary, reduced.Cubes[0].Canary} {
			if s := rg.f.get(id); s.State != "exited" {
				t.Errorf("sandbox %s (run on the departed Cube): %s, want exited", id, s.State)
			}
		}
		if t.Failed() {
			t.Fatalf("after crashes at every step/%s", at)
		}
	}
}

// countContaining counts the elements of list containing sub.
func countContaining(list []string, sub string) int {
	n := 0
	for _, s := range list {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}
