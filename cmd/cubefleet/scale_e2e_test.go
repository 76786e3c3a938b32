package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// scaleWorld is the cloud and the hosts scale apply acts on: the IONOS simulator (servers
// cube-000... on the agents' loopback addresses, target group "cubes" of their origins and
// "control-plane" routing to the control plane), an sshd on 127.0.0.1 as coordinator and GPU
// host with a `wg` stand-in holding one peer per Cube, and the profile and configuration.
type scaleWorld struct {
	sim      *ionossim.Listener
	dir      string
	profile  map[string]any
	config   string
	peers    string // the stand-in's peers, one "KEY\tIP/32" line each
	controlG string // the control-plane target group's id
}

const scaleIonosToken = "scale-e2e-token"

func newScaleWorld(t *testing.T, net, cubesN int, controlPlane *cluster) *scaleWorld {
	t.Helper()
	sim := ionossim.New(ionossim.Options{Authorize: ionossim.AcceptToken(scaleIonosToken), QueueDelay: -1, RunDuration: 100 * time.Millisecond})
	world := ionossim.SampleFleetOn(cubesN, "127.0.0.0/8", func(i int) string { return cubeIP(net, i) })
	cp := *world.TargetGroups[0]
	cp.ID, cp.Name, cp.Targets = "77777777-7777-4777-8777-777777777777", "control-plane", nil
	world.TargetGroups = append(world.TargetGroups, &cp)
	if err := sim.Load(world); err != nil {
		t.Fatal(err)
	}
	l, err := ionossim.Listen(context.Background(), "127.0.0.1:0", sim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	w := &scaleWorld{sim: l, dir: t.TempDir(), controlG: cp.ID}
	setTargets(t, sim, cp.ID, strings.TrimPrefix(controlPlane.url, "http://"))
	writeFile(t, filepath.Join(w.dir, "ionos-token.txt"), scaleIonosToken+"\n", 0o600)
	cfg := &cubes.Config{DatacenterID: ionossim.SampleDatacenterID, PrivateLANID: ionossim.SamplePrivateLAN, MinimumCores: 4,
		MinimumRAMMiB: 8192, MinimumCubes: 1, ProtectedServerIDs: []string{}, WorkerSecurityGroupIDs: []string{ionossim.SampleWorkerGroupID}}
	for i := range cubesN {
		cfg.Slots = append(cfg.Slots, cubes.Slot{Name: fmt.Sprintf("cube-%03d", i), PrivateIP: cubeIP(net, i), ServerID: ionossim.SampleServerID(i)})
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.config = filepath.Join(w.dir, "config.json")
	writeFile(t, w.config, string(b), 0o600)
	sshd := testkit.StartSSHD(t)
	w.peers = sshd.WireGuardStandIn(t, "wg0")
	var peers strings.Builder
	for i := range cubesN {
		fmt.Fprintf(&peers, "%042dA=\t%s/32\n", i+1, cubeIP(net, i))
	}
	writeFile(t, w.peers, peers.String(), 0o644)
	host := map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User}
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "ionos-fleet-profile.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &w.profile); err != nil {
		t.Fatal(err)
	}
	w.profile["control_plane"] = map[string]any{"url": controlPlane.url, "pool": "lab", "api_key_file": filepath.Join(controlPlane.dataDir, "admin.token"), "target_group": "control-plane"}
	w.profile["ionos_token_file"] = filepath.Join(w.dir, "ionos-token.txt")
	w.profile["coordinator"] = host
	w.profile["gpu_wireguard"] = map[string]any{"host": "127.0.0.1", "port": sshd.Port, "user": sshd.User, "interface": "wg0", "config_file": filepath.Join(w.dir, "wg0.conf")}
	w.profile["ssh"] = map[string]any{"key_file": sshd.KeyFile, "known_hosts_file": sshd.KnownHosts, "cube_user": sshd.User}
	w.profile["drain_deadline"] = "60s"
	return w
}

// apply runs scale apply to target Cubes with extra flags through c and returns its stdout,
// stderr and exit code.
func (w *scaleWorld) apply(t *testing.T, c *cluster, target int, extra ...string) (string, string, int) {
	t.Helper()
	b, err := json.Marshal(w.profile)
	if err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(w.dir, "profile.json")
	writeFile(t, profile, string(b), 0o600)
	args := append([]string{"scale", "apply", "--profile", profile, "--config", w.config, "--api-url", w.sim.URL,
		"--target-cubes", fmt.Sprint(target), "--canary-template", "sh2", "--yes", "--private-dir", filepath.Join(w.dir, "private"),
		"--poll", "200ms"}, extra...)
	return c.run("", "", args...)
}

// targets lists the simulator's target group id as "ip:port".
func (w *scaleWorld) targets(id string) []string {
	var out []string
	for _, g := range w.sim.Sim.Snapshot().TargetGroups {
		if g.ID == id {
			for _, tg := range g.Targets {
				out = append(out, fmt.Sprintf("%s:%d", tg.IP, tg.Port))
			}
		}
	}
	return out
}

// servers lists the simulator's server names.
func (w *scaleWorld) servers() []string {
	var out []string
	for _, s := range w.sim.Sim.Snapshot().Datacenters[0].Servers {
		out = append(out, s.Name)
	}
	return out
}

// TestScaleApplyReduces reduces a static-membership fleet of 4 Cubes (real agents on loopback
// addresses, the control plane with --origins of 4 on PostgreSQL, the IONOS simulator) to 2
// with work running on every Cube: 2 sandboxes on cube-000 and cube-001, 1 on cube-002 and
// cube-003. Naming the routed server itself as the replacement is refused before anything is
// cordoned; with a ready replacement (--origins of the 2 that stay) the run resumes: the
// control plane's target group is handed over, the 2 least active Cubes (ties: the highest
// slot first) drain, lose their targets and peers and are deleted by id; every sandbox ends
// exited and is read through the replacement. The run is killed twice between a side effect
// and its journal entry and resumed each time. Then a drain past its deadline keeps the Cube.
func TestScaleApplyReduces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runtime runs each sandbox as a user of its own, which needs root")
	}
	dsn := storetest.PostgresURL(t)
	net := 100 + os.Getpid()%100
	args := []string{"--node-heartbeat-timeout", "5s", "--node-lost-after", "30s"} // replicas: e2eReplicaArgs' window
	previous := startServerB(t, dsn, append(args, "--origins", writeOrigins(t, net, 4), "--cube-count", "4")...)
	nextAddr := freeAddr(t)
	token, err := os.ReadFile(filepath.Join(previous.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	f := &sandboxFleet{t: t, c: previous, api: client.New(previous.url, strings.TrimSpace(string(token)), nil), net: net,
		replicas: []*cluster{previous, {url: "http://" + nextAddr}}, database: dsn}
	f.applyDocAndJoin(e2eStaticFleetDoc, 4)
	w := newScaleWorld(t, net, 4, previous)

	var work []sandboxes.Sandbox
	for i, n := range []int{2, 2, 1, 1} {
		for k := range n {
			secs := "20"
			if i >= 2 {
				secs = "6"
			}
			work = append(work, f.create("sh", map[string]any{"nodeSelector": map[string]string{"kubernetes.io/hostname": cubeIP(net, i)}},
				"sh", "-c", fmt.Sprintf("sleep %s; echo work-%d-%d", secs, i, k)))
		}
	}
	testkit.WaitFor(t, 30*time.Second, "the work running on every Cube", func() bool {
		for _, s := range work {
			if f.get(s.ID).State != sandboxes.StateRunning {
				return false
			}
		}
		return true
	})

	// The routed server as its own replacement: refused at the coordinator step, nothing
	// cordoned, the journal open.
	out, errOut, code := w.apply(t, previous, 2, "--replacement", previous.url)
	if code != 1 || !strings.Contains(errOut, "restarting the only routed server is refused") {
		t.Fatalf("the routed server as the replacement: exit %d\n%s%s", code, out, errOut)
	}
	for i := range 4 {
		if v := f.node(cubeIP(net, i)); v.Cordoned {
			t.Errorf("node %s was cordoned by a refused run", v.ID)
		}
	}

	next := startServerAt(t, nextAddr, replicaDir(t, previous), dsn, "", append(args, "--origins", writeOrigins(t, net, 2), "--cube-count", "2")...)
	// Killed (SIGKILL) right after the handover and right after the first deletion, each
	// before its journal entry: each rerun resumes.
	for _, at := range []string{"coordinator/applied", "delete-server/applied"} {
		t.Setenv("CUBEFLEET_TEST_CRASH_AT", at)
		if out, errOut, code := w.apply(t, previous, 2, "--replacement", next.url); code != -1 {
			t.Fatalf("the run meant to be killed at %s: exit %d\n%s%s", at, code, out, errOut)
		}
	}
	t.Setenv("CUBEFLEET_TEST_CRASH_AT", "")
	out, errOut, code = w.apply(t, previous, 2, "--replacement", next.url, "-o", "json")
	if code != 0 {
		t.Fatalf("scale apply 4 -> 2: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "resuming run") || !strings.Contains(errOut, "delete-server cube-003 (resumed") || strings.Contains(errOut, "changed meanwhile") {
		t.Errorf("progress on stderr:\n%s", errOut)
	}
	var j journal.Journal
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.State != journal.StateDone {
		t.Fatalf("the journal: %v %s\n%s", err, j.State, out)
	}
	var deleted []string
	for _, s := range j.Steps {
		if s.Name == cubes.StepDeleteServer {
			deleted = append(deleted, s.Cube)
		}
	}
	if !slices.Equal(deleted, []string{"cube-003", "cube-002"}) {
		t.Errorf("deleted %v, want cube-003 then cube-002 (the least active, ties to the highest slot)", deleted)
	}
	if got := w.servers(); !slices.Equal(got, []string{"cube-000", "cube-001"}) {
		t.Errorf("servers left: %v", got)
	}
	if got := w.targets(w.controlG); !slices.Equal(got, []string{nextAddr}) {
		t.Errorf("the control plane's target group: %v, want the replacement %s", got, nextAddr)
	}
	if got := w.targets(ionossim.SampleTargetGroupID); !slices.Equal(got, []string{cubeIP(net, 0) + ":8080", cubeIP(net, 1) + ":8080"}) {
		t.Errorf("the Cubes' target group: %v", got)
	}
	if peers, _ := os.ReadFile(w.peers); strings.Count(string(peers), "\n") != 2 || strings.Contains(string(peers), cubeIP(net, 2)+"/") || strings.Contains(string(peers), cubeIP(net, 3)+"/") {
		t.Errorf("peers left:\n%s", peers)
	}
	// Nothing is lost: every sandbox ends exited, read through the replacement.
	routed := &sandboxFleet{t: t, api: client.New(next.url, strings.TrimSpace(string(token)), nil)}
	for _, s := range work {
		if got := routed.wait(s.ID, 60*time.Second); got.State != sandboxes.StateExited {
			t.Errorf("sandbox %s on %s ended %s", s.ID, got.NodeID, got.State)
		}
		if l := routed.logs(s.ID); !strings.HasPrefix(l.Stdout, "work-") {
			t.Errorf("sandbox %s's output through the replacement: %q", s.ID, l.Stdout)
		}
	}

	// The deleted Cubes are off (their agents with them); the previous server has finished
	// its accepted work: stop it, as the procedure says. Their nodes were deregistered through
	// one replica while the other still held them in memory: they stay gone on both.
	f.agents[2].down(t)
	f.agents[3].down(t)
	previous.stop()
	for i := 2; i < 4; i++ {
		err := routed.api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": cubeIP(net, i)}, &nodes.View{})
		if !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("the node of the deleted cube-00%d after scale apply: %v, want NOT_FOUND", i, err)
		}
	}

	// A drain past its deadline keeps the Cube, cordoned, and says what still runs.
	delete(w.profile["control_plane"].(map[string]any), "target_group")
	w.profile["control_plane"].(map[string]any)["url"] = next.url
	w.profile["drain_deadline"] = "3s"
	cfg := &cubes.Config{DatacenterID: ionossim.SampleDatacenterID, PrivateLANID: ionossim.SamplePrivateLAN, MinimumCores: 4,
		MinimumRAMMiB: 8192, MinimumCubes: 1, ProtectedServerIDs: []string{}, WorkerSecurityGroupIDs: []string{ionossim.SampleWorkerGroupID},
		Slots: []cubes.Slot{{Name: "cube-000", PrivateIP: cubeIP(net, 0), ServerID: ionossim.SampleServerID(0)},
			{Name: "cube-001", PrivateIP: cubeIP(net, 1), ServerID: ionossim.SampleServerID(1)}}}
	b, _ := json.Marshal(cfg)
	writeFile(t, w.config, string(b), 0o600)
	long := routed.create("sh", map[string]any{"nodeSelector": map[string]string{"kubernetes.io/hostname": cubeIP(net, 1)}}, "sleep", "60")
	testkit.WaitFor(t, 30*time.Second, "the long sandbox running", func() bool { return routed.get(long.ID).State == sandboxes.StateRunning })
	out, errOut, code = w.apply(t, next, 1)
	if code != 1 || !strings.Contains(errOut, "still runs 1 sandbox ("+long.ID+") at the drain deadline") || !strings.Contains(errOut, "stays cordoned") {
		t.Fatalf("a drain past its deadline: exit %d\n%s%s", code, out, errOut)
	}
	if got := w.servers(); !slices.Equal(got, []string{"cube-000", "cube-001"}) {
		t.Errorf("servers after the drain past its deadline: %v", got)
	}
	var v nodes.View
	if err := routed.api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": cubeIP(net, 1)}, &v); err != nil || !v.Cordoned {
		t.Errorf("cube-001's node after the drain past its deadline: cordoned %v, %v", v.Cordoned, err)
	}
	if got := routed.get(long.ID).State; got != sandboxes.StateRunning {
		t.Errorf("the long sandbox was not left running: %s", got)
	}
}

// TestScaleApplyGrows grows the roundtrip's fleet of 2 Cubes to 3 with scale apply. With a
// control plane loading a fixed origin list (control_plane.target_group) and no
// --replacement, the run stops at its coordinator step, before anything is created, saying
// how to start a replacement for 3 Cubes; scale status --abandon closes that journal. Then the
// new Cube goes through roundtrip up's steps (the simulator boots its agent from its user
// data), is Ready in the pool with its peer and its target, and the journal is done.
func TestScaleApplyGrows(t *testing.T) {
	rg := newRoundtripRig(t, "")
	before := rg.view()
	args := []string{"scale", "apply", "--profile", rg.profile, "--config", rg.config, "--api-url", rg.simURL,
		"--private-dir", rg.privateDir, "--poll", "100ms", "--wait-budget", "20s", "--timeout", "20s", "--target-cubes", "3",
		"--agent-binary-url", "http://127.0.0.1:9/cubefleet", "--agent-env", rg.agentEnv, "--canary-template", "sh", "--node-wait", "60s"}
	if _, errOut, code := rg.f.c.run("", "", args...); code != 2 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("without --yes and a terminal: exit %d\n%s", code, errOut)
	}

	original, err := os.ReadFile(rg.profile)
	if err != nil {
		t.Fatal(err)
	}
	var static map[string]any
	if err := json.Unmarshal(original, &static); err != nil {
		t.Fatal(err)
	}
	static["control_plane"].(map[string]any)["target_group"] = "cubes"
	b, _ := json.Marshal(static)
	writeFile(t, rg.profile, string(b), 0o600)
	if out, errOut, code := rg.f.c.run("", "", append(args, "--yes")...); code != 1 || !strings.Contains(errOut, "--cube-count 3 with the origins of the Cubes the fleet holds after this run") {
		t.Fatalf("growth of a static-membership fleet without --replacement: exit %d\n%s%s", code, out, errOut)
	}
	if n := rg.creates(); n != 0 {
		t.Errorf("%d creates by a growth stopped at its coordinator step", n)
	}
	writeFile(t, rg.profile, string(original), 0o600)
	status := []string{"scale", "status", "--private-dir", rg.privateDir}
	if out, errOut, code := rg.f.c.run("", "", append(status, "--abandon", "--note", "no replacement")...); code != 0 || !strings.Contains(out, "Abandoned the scale apply growth journal of run") {
		t.Fatalf("scale status --abandon: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := rg.f.c.run("", "", append(args, "--yes", "-o", "json")...)
	if code != 0 {
		t.Fatalf("scale apply 2 -> 3: exit %d\n%s%s", code, out, errOut)
	}
	var j journal.Journal
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.State != journal.StateDone || j.Workflow != cubes.WorkflowScaleGrowth || len(j.Cubes) != 1 {
		t.Fatalf("the journal: %v\n%s", err, out)
	}
	if strings.Contains(errOut, "resuming run") {
		t.Errorf("the growth resumed the abandoned run:\n%s", errOut)
	}
	if out, errOut, code := rg.f.c.run("", "", append(status, "-o", "json")...); code != 0 || strings.Count(out, `"state": "abandoned"`) != 1 || strings.Count(out, `"state": "done"`) != 1 {
		t.Errorf("scale status: exit %d\n%s%s", code, out, errOut)
	}
	c := j.Cubes[0]
	v := rg.view()
	if len(v.Servers) != len(before.Servers)+1 || len(v.Targets) != len(before.Targets)+1 || !strings.Contains(v.Servers[len(v.Servers)-1], c.ServerID+" "+c.Name+" RUNNING") {
		t.Errorf("after the growth: %+v", v)
	}
	if peers, _ := os.ReadFile(rg.peers); !strings.Contains(string(peers), c.PeerKey+"\t"+c.PrivateIP+"/32") {
		t.Errorf("the new Cube's peer: %q", peers)
	}
	rg.waitNode(c.PrivateIP, func(v nodes.View) bool { return v.State == nodes.StateReady && v.Pool == "lab" })
}
