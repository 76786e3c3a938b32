package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/fleetssh"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// The roundtrip end to end on one machine: a `cubefleet server` process with two baseline
// Cubes (real `cubefleet agent run` processes on loopback addresses), the IONOS simulator
// with zero latency whose RUNNING hook boots a real agent from the new Cube's cloud-init user
// data on the slot's loopback address, Debian's sshd on loopback as the coordinator and the
// GPU host (with a `wg` stand-in recording the peers and a real config file), and `cubefleet
// roundtrip up|down` run as child processes, killed with SIGKILL where the crash tests say.

// roundtripFleetDoc is the fleet of the roundtrip tests: pool "lab" and template "sh".
const roundtripFleetDoc = `{"version": 1,
 "sites": [{"name": "lab", "kind": "shared", "region": "local"}],
 "pools": [{"name": "lab", "site": "lab", "class": "vps-host"}],
 "flavors": [{"pool": "lab", "name": "tiny", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}],
 "sandboxTemplates": [{"name": "sh", "pool": "lab", "flavor": "tiny", "imageId": "ubuntu-24.04", "network": "private"}]}`

const rtToken = "ionos-test-token"

// roundtripRig is the whole set-up.
type roundtripRig struct {
	t          testing.TB
	f          *sandboxFleet
	sim        *ionossim.Sim
	simURL     string
	sshd       *testkit.SSHD
	peers      string // the stand-in's live peers
	wgConf     string // the GPU host's interface config file
	dir        string
	profile    string
	config     string
	privateDir string
	agentEnv   string
	cubePort   int // the port of each Cube's sshd

	mu     sync.Mutex
	booted map[string]*sandboxAgent // the agents of the Cubes the simulator booted, by IP
}

func newRoundtripRig(t testing.TB, database string) *roundtripRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the process runtime runs each sandbox as a user of its own, which needs root")
	}
	c := startServerB(t, database, "--node-heartbeat-timeout", e2eHeartbeat.String(), "--node-lost-after", "10s")
	token, err := os.ReadFile(filepath.Join(c.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	f := &sandboxFleet{t: t, c: c, api: client.New(c.url, strings.TrimSpace(string(token)), nil), net: 100 + os.Getpid()%100}
	doc := filepath.Join(t.TempDir(), "fleet.json")
	writeFile(t, doc, roundtripFleetDoc, 0o600)
	c.ok("fleet", "apply", doc, "--tenant", "root", "--yes")
	rg := &roundtripRig{t: t, f: f, dir: t.TempDir(), booted: map[string]*sandboxAgent{}}
	for range 2 {
		f.addAgent()
	}
	for _, a := range f.agents {
		rg.waitNode(a.ip, func(v nodes.View) bool { return v.State == nodes.StateReady })
	}
	subnet := fmt.Sprintf("127.77.%d", f.net)
	ip := func(i int) string { return fmt.Sprintf("%s.%d", subnet, 10+i) }

	world := ionossim.SampleFleetOn(2, subnet+".0/24", ip)
	rg.sim = ionossim.New(ionossim.Options{Authorize: ionossim.AcceptToken(rtToken), QueueDelay: -1, RunDuration: -1, OnRunning: rg.boot})
	if err := rg.sim.Load(world); err != nil {
		t.Fatal(err)
	}
	l, err := ionossim.Listen(context.Background(), "127.0.0.1:0", rg.sim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rg.simURL = l.URL
	tokenFile := filepath.Join(rg.dir, "ionos-token.txt")
	writeFile(t, tokenFile, rtToken+"\n", 0o600)

	cfg := &cubes.Config{DatacenterID: ionossim.SampleDatacenterID, PrivateLANID: ionossim.SamplePrivateLAN, MinimumCores: 4,
		MinimumRAMMiB: 8192, MinimumCubes: 1, WorkerSecurityGroupIDs: []string{ionossim.SampleWorkerGroupID}}
	for i := range 3 {
		s := cubes.Slot{Name: fmt.Sprintf("cube-%03d", i), PrivateIP: ip(i)}
		if i < 2 {
			s.ServerID = ionossim.SampleServerID(i)
		}
		cfg.Slots = append(cfg.Slots, s)
	}
	b, _ := json.Marshal(cfg)
	rg.config = filepath.Join(rg.dir, "config.json")
	writeFile(t, rg.config, string(b), 0o600)

	// The coordinator and GPU host, and each baseline Cube's sshd on its address (roundtrip
	// check reaches it through the coordinator).
	rg.sshd = testkit.StartSSHDWith(t, testkit.SSHDOptions{Forwarding: true})
	cubeSSHD := testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: ip(0), Like: rg.sshd})
	rg.cubePort = cubeSSHD.Port
	testkit.StartSSHDWith(t, testkit.SSHDOptions{Addr: ip(1), Port: cubeSSHD.Port, Like: rg.sshd})
	rg.peers = rg.sshd.WireGuardStandIn(t, "wg0")
	rg.wgConf = filepath.Join(rg.dir, "wg0.conf")
	conf := "[Interface]\nPrivateKey = gpu-host-key\nListenPort = 51820\n"
	var live string
	for i := range 2 {
		_, key, err := fleetssh.NewWireGuardKey()
		if err != nil {
			t.Fatal(err)
		}
		conf += fmt.Sprintf("\n[Peer]\nPublicKey = %s\nAllowedIPs = %s/32\n", key, ip(i))
		live += fmt.Sprintf("%s\t%s/32\n", key, ip(i))
	}
	writeFile(t, rg.wgConf, conf, 0o600)
	writeFile(t, rg.peers, live, 0o644)

	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "ionos-fleet-profile.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	var profile map[string]any
	if err := json.Unmarshal(example, &profile); err != nil {
		t.Fatal(err)
	}
	host := map[string]any{"host": "127.0.0.1", "port": rg.sshd.Port, "user": rg.sshd.User}
	profile["control_plane"] = map[string]any{"url": c.url, "pool": "lab", "api_key_file": filepath.Join(c.dataDir, "admin.token")}
	profile["ionos_token_file"] = tokenFile
	profile["coordinator"] = host
	profile["gpu_wireguard"] = map[string]any{"host": "127.0.0.1", "port": rg.sshd.Port, "user": rg.sshd.User, "interface": "wg0", "config_file": rg.wgConf}
	profile["ssh"] = map[string]any{"key_file": rg.sshd.KeyFile, "known_hosts_file": rg.sshd.KnownHosts, "cube_user": rg.sshd.User, "cube_port": cubeSSHD.Port}
	profile["drain_deadline"] = "30s"
	b, _ = json.Marshal(profile)
	rg.profile = filepath.Join(rg.dir, "profile.json")
	writeFile(t, rg.profile, string(b), 0o600)

	rg.agentEnv = filepath.Join(rg.dir, "agent-extra.env")
	writeFile(t, rg.agentEnv, strings.Join([]string{
		"CUBEFLEET_ALLOW_LOOPBACK=1",
		"CUBE_S3_ENDPOINT=" + c.url,
		"CUBEFLEET_REPORT_PERIOD=" + e2eReport.String(),
		"CUBEFLEET_RUNTIME=process",
		"CUBEFLEET_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1",
		"CUBEFLEET_QUOTA_CPU=64000",
		"CUBEFLEET_QUOTA_MEM_MB=131072",
		"CUBEFLEET_MAX_MVM_NUM=64",
	}, "\n")+"\n", 0o600)
	rg.privateDir = filepath.Join(rg.dir, "private")
	return rg
}

// boot is the simulator's RUNNING hook: it plays cloud-init for the new Cube. It reads the
// user data of the server's create request, writes its files below a directory of the Cube's
// own (the join token, the agent's env file) and starts `cubefleet agent run` with that env
// file and the Cube's own state, sandbox and listen settings.
func (rg *roundtripRig) boot(_ string, srv ionossim.Server) {
	t := rg.t
	if len(srv.NICs) == 0 || len(srv.NICs[0].IPs) == 0 {
		return
	}
	ip := srv.NICs[0].IPs[0]
	var userData string
	for _, rq := range rg.sim.Snapshot().Requests {
		if rq.Method == "POST" && len(rq.Targets) > 0 && rq.Targets[0].ID == srv.ID {
			var body struct {
				Entities struct {
					Volumes struct {
						Items []struct {
							Properties struct {
								UserData string `json:"userData"`
							} `json:"properties"`
						} `json:"items"`
					} `json:"volumes"`
				} `json:"entities"`
			}
			if json.Unmarshal([]byte(rq.Body), &body) == nil && len(body.Entities.Volumes.Items) == 1 {
				ud, _ := base64.StdEncoding.DecodeString(body.Entities.Volumes.Items[0].Properties.UserData)
				userData = string(ud)
			}
		}
	}
	files := cloudInitFiles(userData)
	if files[cubes.BootAgentEnvFile] == "" || files[cubes.BootJoinTokenFile] == "" {
		t.Errorf("server %s (%s): user data without the agent's env file and join token:\n%s", srv.ID, srv.Name, userData)
		return
	}
	a := &sandboxAgent{ip: ip, dir: t.TempDir(), sandboxDir: agenttest.SandboxDir(t)}
	tokenFile := filepath.Join(a.dir, "join.token")
	writeFile(t, tokenFile, files[cubes.BootJoinTokenFile], 0o600)
	env := strings.ReplaceAll(files[cubes.BootAgentEnvFile], cubes.BootJoinTokenFile, tokenFile)
	env += strings.Join([]string{
		"CUBEFLEET_AGENT_STATE_DIR=" + filepath.Join(a.dir, "state"),
		"CUBEFLEET_AGENT_LISTEN=" + freeAddrOn(t, ip),
		"CUBEFLEET_SANDBOX_DIR=" + a.sandboxDir,
	}, "\n") + "\n"
	a.envFile = filepath.Join(a.dir, "agent.env")
	writeFile(t, a.envFile, env, 0o600)
	a.start(t, rg.f.c.bin)
	t.Cleanup(func() { a.down(t) })
	rg.mu.Lock()
	rg.booted[ip] = a
	rg.mu.Unlock()
}

// cloudInitFiles returns the write_files of a #cloud-config (base64 content) by path.
func cloudInitFiles(doc string) map[string]string {
	out := map[string]string{}
	path := ""
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if p, ok := strings.CutPrefix(line, "- path: "); ok {
			path = p
		}
		if c, ok := strings.CutPrefix(line, "content: "); ok && path != "" {
			b, _ := base64.StdEncoding.DecodeString(c)
			out[path] = string(b)
		}
	}
	return out
}

// reap stops the agents of Cubes the simulator no longer has (deleted servers).
func (rg *roundtripRig) reap() {
	alive := map[string]bool{}
	for _, s := range rg.sim.Snapshot().Datacenters[0].Servers {
		for _, n := range s.NICs {
			for _, ip := range n.IPs {
				alive[ip] = true
			}
		}
	}
	rg.mu.Lock()
	defer rg.mu.Unlock()
	for ip, a := range rg.booted {
		if !alive[ip] {
			a.down(rg.t)
			delete(rg.booted, ip)
		}
	}
}

// waitNode waits until node id's view satisfies ok.
func (rg *roundtripRig) waitNode(id string, ok func(nodes.View) bool) {
	rg.t.Helper()
	testkit.WaitFor(rg.t, 60*time.Second, "node "+id, func() bool {
		var v nodes.View
		return rg.f.api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": id}, &v) == nil && ok(v)
	})
}

// run runs `cubefleet roundtrip VERB` as a child process (crashAt, when set, is where it
// kills itself) and returns stdout, stderr and the exit code (-9 for SIGKILL).
func (rg *roundtripRig) run(crashAt, verb string, extra ...string) (string, string, int) {
	rg.t.Helper()
	args := []string{"roundtrip", verb, "--profile", rg.profile, "--config", rg.config, "--api-url", rg.simURL,
		"--private-dir", rg.privateDir, "--poll", "100ms", "--wait-budget", "20s", "--timeout", "20s"}
	if verb == "up" {
		args = append(args, "--agent-binary-url", "http://127.0.0.1:9/cubefleet", "--agent-env", rg.agentEnv,
			"--canary-template", "sh", "--node-wait", "60s")
	}
	return rg.cli(crashAt, append(args, extra...)...)
}

// cli runs cubefleet with args as a child process (crashAt, when set, is where it kills
// itself) and returns stdout, stderr and the exit code (-9 for SIGKILL).
func (rg *roundtripRig) cli(crashAt string, args ...string) (string, string, int) {
	rg.t.Helper()
	cmd := exec.Command(rg.f.c.bin, args...)
	cmd.Env = append(cleanEnv(), "NO_COLOR=1", "XDG_CONFIG_HOME="+rg.t.TempDir())
	if crashAt != "" {
		cmd.Env = append(cmd.Env, "CUBEFLEET_TEST_CRASH_AT="+crashAt)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	started := time.Now()
	err := cmd.Run()
	if _, bench := rg.t.(*testing.B); !bench {
		rg.t.Logf("%s %s (crash at %q): %s\n%s", args[0], args[1], crashAt, time.Since(started), errOut.String())
	}
	code := 0
	if ee := new(exec.ExitError); errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = -int(ws.Signal())
		}
	} else if err != nil {
		rg.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// ok runs verb and fails the test unless it exits 0.
func (rg *roundtripRig) ok(verb string, extra ...string) string {
	rg.t.Helper()
	out, errOut, code := rg.run("", verb, extra...)
	if code != 0 {
		rg.t.Fatalf("roundtrip %s: exit %d\n%s%s", verb, code, out, errOut)
	}
	return out
}

// cloudView is what the roundtrip must leave as it found it: the servers (id, name, state,
// NICs' IPs, security groups) and the target groups' targets.
type cloudView struct {
	Servers []string
	Targets []string
}

func (rg *roundtripRig) view() cloudView {
	st := rg.sim.Snapshot()
	var v cloudView
	for _, s := range st.Datacenters[0].Servers {
		var ips []string
		for _, n := range s.NICs {
			ips = append(ips, n.IPs...)
		}
		v.Servers = append(v.Servers, fmt.Sprintf("%s %s %s %v %v", s.ID, s.Name, s.VMState, ips, s.SecurityGroupIDs))
	}
	for _, tg := range st.TargetGroups {
		for _, x := range tg.Targets {
			v.Targets = append(v.Targets, fmt.Sprintf("%s %s:%d w%d hc%v", tg.ID, x.IP, x.Port, x.Weight, x.HealthCheckEnabled))
		}
	}
	return v
}

// creates counts the server creates the simulator accepted.
func (rg *roundtripRig) creates() int {
	n := 0
	for _, rq := range rg.sim.Snapshot().Requests {
		if rq.Method == "POST" && strings.HasSuffix(rq.URL, "/servers") {
			n++
		}
	}
	return n
}

// baseline is the fleet as the roundtrip must leave it.
type baseline struct {
	cloud        cloudView
	peers, wgCfg string
}

func (rg *roundtripRig) baseline() baseline {
	p, _ := os.ReadFile(rg.peers)
	c, _ := os.ReadFile(rg.wgConf)
	return baseline{cloud: rg.view(), peers: string(p), wgCfg: string(c)}
}

func (rg *roundtripRig) journal() *journal.Journal {
	rg.t.Helper()
	j, err := journal.Read(filepath.Join(rg.privateDir, journal.RoundtripPath))
	if err != nil || j == nil {
		rg.t.Fatalf("journal: %v %v", j, err)
	}
	return j
}

// checkUp checks the fleet with the roundtrip's Cube up: one server more, RUNNING, with the
// worker group, one peer more (live and in the config file), one target more, the node
// Ready in the pool, the canary exited.
func (rg *roundtripRig) checkUp(before baseline) *journal.Journal {
	t := rg.t
	t.Helper()
	j := rg.journal()
	c := j.Cubes[0]
	if j.Workflow != cubes.WorkflowUp || j.State != journal.StateDone || c.ServerID == "" || c.Canary == "" {
		t.Fatalf("journal after up: %+v", j)
	}
	v := rg.view()
	if len(v.Servers) != len(before.cloud.Servers)+1 || len(v.Targets) != len(before.cloud.Targets)+1 {
		t.Errorf("after up: %+v", v)
	}
	if s := v.Servers[len(v.Servers)-1]; !strings.Contains(s, c.ServerID+" "+c.Name+" RUNNING ["+c.PrivateIP+"]") || !strings.Contains(s, ionossim.SampleWorkerGroupID) {
		t.Errorf("the new server: %s", s)
	}
	peers, _ := os.ReadFile(rg.peers)
	conf, _ := os.ReadFile(rg.wgConf)
	if !strings.Contains(string(peers), c.PeerKey+"\t"+c.PrivateIP+"/32") || !strings.Contains(string(conf), "PublicKey = "+c.PeerKey) {
		t.Errorf("peer %s: live %q, config %q", c.PeerKey, peers, conf)
	}
	rg.waitNode(c.PrivateIP, func(v nodes.View) bool { return v.State == nodes.StateReady && v.Pool == "lab" })
	if s := rg.f.get(c.Canary); s.State != "exited" || s.NodeID != c.PrivateIP {
		t.Errorf("canary: %s on %s, want exited on %s", s.State, s.NodeID, c.PrivateIP)
	}
	return j
}

// checkDown checks that the fleet is as before the up, the canary's result still resolves,
// and the node is gone from the registry.
func (rg *roundtripRig) checkDown(before baseline, up *journal.Journal) {
	t := rg.t
	t.Helper()
	rg.reap()
	j := rg.journal()
	if j.Workflow != cubes.WorkflowDown || j.State != journal.StateDone {
		t.Fatalf("journal after down: %+v", j)
	}
	after := rg.baseline()
	if !reflect.DeepEqual(after, before) {
		t.Errorf("after down:\n%+v\nwant\n%+v", after, before)
	}
	if s := rg.f.get(up.Cubes[0].Canary); s.State != "exited" {
		t.Errorf("canary after down: %s", s.State)
	}
	var v nodes.View
	if err := rg.f.api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": up.Cubes[0].PrivateIP}, &v); err == nil {
		t.Errorf("node %s still registered: %+v", up.Cubes[0].PrivateIP, v.State)
	}
}

// maxUpRequests bounds the IONOS API requests of one `roundtrip up` against the simulator with
// zero latency (its preflight's inventory included).
const maxUpRequests = 30

// TestRoundtripUpDown adds a Cube and removes it again: up makes it Ready with its canary
// run; down waits for a sandbox still running there (progress on stderr), then leaves the
// simulator, the peers and the target lists exactly as before, with every result readable.
func TestRoundtripUpDown(t *testing.T) {
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			rg := newRoundtripRig(t, dsn(t))
			before := rg.baseline()
			rg.sim.ResetCounts()
			out := rg.ok("up", "-o", "json")
			if n := rg.sim.Total(); n > maxUpRequests {
				t.Errorf("roundtrip up made %d IONOS API requests, want at most %d: %v", n, maxUpRequests, rg.sim.Counts())
			} else {
				t.Logf("roundtrip up made %d IONOS API requests", n)
			}
			var j journal.Journal
			if err := json.Unmarshal([]byte(out), &j); err != nil || j.State != journal.StateDone {
				t.Fatalf("up -o json: %v\n%s", err, out)
			}
			up := rg.checkUp(before)
			if _, errOut, code := rg.run("", "up"); code != 1 || !strings.Contains(errOut, "roundtrip down first") {
				t.Errorf("a second up: exit %d %s", code, errOut)
			}
			ip := up.Cubes[0].PrivateIP
			work := rg.f.create("sh", map[string]any{"nodeSelector": map[string]string{"kubernetes.io/hostname": ip}}, "sleep", "2")
			testkit.WaitFor(t, 30*time.Second, "the sandbox running on the new Cube", func() bool { return rg.f.get(work.ID).State == "running" })
			_, errOut, code := rg.run("", "down")
			if code != 0 || !strings.Contains(errOut, "1 sandbox left") {
				t.Fatalf("down: exit %d\n%s", code, errOut)
			}
			if s := rg.f.get(work.ID); s.State != "exited" {
				t.Errorf("the sandbox accepted before the drain: %s, want exited", s.State)
			}
			rg.checkDown(before, up)
			if creates := rg.creates(); creates != 1 {
				t.Errorf("%d creates, want 1", creates)
			}
		})
	}
}

// BenchmarkRoundtripUp runs `roundtrip up` (then, untimed, `roundtrip down`) against the
// simulator with zero latency and reports the IONOS API requests each up makes
// (requests/op; TestRoundtripUpDown fails above maxUpRequests).
func BenchmarkRoundtripUp(b *testing.B) {
	rg := newRoundtripRig(b, "")
	total := 0
	b.ResetTimer()
	for range b.N {
		rg.sim.ResetCounts()
		rg.ok("up")
		total += rg.sim.Total()
		b.StopTimer()
		rg.ok("down")
		rg.reap()
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/float64(b.N), "requests/op")
}

// upPoints and downPoints are every step of up and down; the crash test kills the process
// right after each step is journaled done, and between its side effect and that journal
// write.
var (
	upPoints   = []string{cubes.StepCreateServer, cubes.StepWaitRunning, cubes.StepAttachGroup, cubes.StepAddPeer, cubes.StepVerifyWorkers, cubes.StepAddTargets}
	downPoints = []string{cubes.StepCordon, cubes.StepReturnTraffic, cubes.StepDrain, cubes.StepRestoreTargets, cubes.StepRemovePeer, cubes.StepDeregister, cubes.StepDeleteServer, cubes.StepConfirmResult}
)

// TestRoundtripCrashes kills `roundtrip up` and `roundtrip down` with SIGKILL at every step,
// after the step's side effect and before its journal entry, and after the entry (and the
// create and the delete also just before their call; -short: each step once, after its side
// effect); each rerun
// resumes and converges: one Cube created per roundtrip, the peers and target lists as
// before after down, every canary's result readable.
func TestRoundtripCrashes(t *testing.T) {
	rg := newRoundtripRig(t, "")
	before := rg.baseline()
	var points [][2]string
	for _, at := range []string{"applied", "done"} {
		for i := range max(len(upPoints), len(downPoints)) {
			points = append(points, [2]string{upPoints[i%len(upPoints)] + "/" + at, downPoints[i%len(downPoints)] + "/" + at})
		}
	}
	points = append(points, [2]string{cubes.StepCreateServer + "/begun", cubes.StepDeleteServer + "/begun"})
	if testing.Short() {
		points = points[:len(downPoints)] // every step once, after its side effect
	}
	for _, p := range points {
		creates := rg.creates()
		if _, errOut, code := rg.run(p[0], "up"); code != -int(syscall.SIGKILL) {
			t.Fatalf("up crashing at %s: exit %d\n%s", p[0], code, errOut)
		}
		if p[0] != "add-targets/done" {
			if _, errOut, code := rg.run("", "up"); code != 0 {
				t.Fatalf("up resumed after a crash at %s: exit %d\n%s", p[0], code, errOut)
			}
		} else if _, errOut, code := rg.run("", "up"); code != 0 || !strings.Contains(errOut, "resuming run") {
			t.Fatalf("up resumed after its last step: exit %d\n%s", code, errOut)
		}
		if got := rg.creates() - creates; got != 1 {
			t.Errorf("crash at %s: %d Cubes created, want 1", p[0], got)
		}
		up := rg.checkUp(before)
		if _, errOut, code := rg.run(p[1], "down"); code != -int(syscall.SIGKILL) {
			t.Fatalf("down crashing at %s: exit %d\n%s", p[1], code, errOut)
		}
		if _, errOut, code := rg.run("", "down"); code != 0 {
			t.Fatalf("down resumed after a crash at %s: exit %d\n%s", p[1], code, errOut)
		}
		rg.checkDown(before, up)
		if t.Failed() {
			t.Fatalf("after crashes at %s and %s", p[0], p[1])
		}
	}
}

// TestRoundtripFaults runs the roundtrip through the simulator's faults where they matter:
// the create answered 504 after it was applied (the rerun finds the Cube by name and does
// not create a second), every call answered 429 three times first, the new server's GET
// answered 404 three times, a request stuck BUSY past the wait budget (exit 1 saying to
// rerun; the rerun resumes the same server), and the delete answered 504 after it was
// applied (exit 1; the rerun finds it gone and finishes).
func TestRoundtripFaults(t *testing.T) {
	rg := newRoundtripRig(t, "")
	before := rg.baseline()
	fault := func(spec string) {
		t.Helper()
		f, err := ionossim.ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		rg.sim.InjectFault(f)
	}

	fault("POST servers: 504 after-apply")
	fault("*: 429 x3")
	_, errOut, code := rg.run("", "up")
	if code != 1 || !strings.Contains(errOut, "looks the name") {
		t.Fatalf("up under a 504 create: exit %d\n%s", code, errOut)
	}
	rg.sim.ClearFaults()
	fault("GET servers/{id}: 404 x3")
	if _, errOut, code := rg.run("", "up"); code != 0 || !strings.Contains(errOut, "not creating another") {
		t.Fatalf("up resumed after the 504: exit %d\n%s", code, errOut)
	}
	rg.sim.ClearFaults()
	if n := rg.creates(); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	up := rg.checkUp(before)
	fault("DELETE servers/{id}: 504 after-apply")
	if _, errOut, code := rg.run("", "down"); code != 1 || !strings.Contains(errOut, "delete-server") {
		t.Fatalf("down under a 504 delete: exit %d\n%s", code, errOut)
	}
	rg.sim.ClearFaults()
	if _, errOut, code := rg.run("", "down"); code != 0 {
		t.Fatalf("down resumed after the 504 delete: exit %d\n%s", code, errOut)
	}
	if st := rg.journal().Steps; !slices.ContainsFunc(st, func(s journal.Step) bool {
		return s.Name == cubes.StepDeleteServer && strings.Contains(s.Detail, "already deleted")
	}) {
		t.Errorf("the resumed delete did not find the server gone: %+v", st)
	}
	rg.checkDown(before, up)

	fault("requests: stuck BUSY 10m")
	_, errOut, code = rg.run("", "up", "--wait-budget", "500ms")
	if code != 1 || !strings.Contains(errOut, "rerun the command; it resumes waiting") {
		t.Fatalf("up with a stuck request: exit %d\n%s", code, errOut)
	}
	rg.sim.ClearFaults()
	st := rg.sim.Snapshot()
	for _, rq := range st.Requests {
		rq.Stuck, rq.DoneAt = false, time.Now()
	}
	if err := rg.sim.Load(st); err != nil {
		t.Fatal(err)
	}
	rg.ok("up")
	if n := rg.creates(); n != 2 {
		t.Errorf("%d creates over two roundtrips, want 2", n)
	}
	up = rg.checkUp(before)
	rg.ok("down")
	rg.checkDown(before, up)
}

// TestRoundtripDrainDeadline: a sandbox that outlives the profile's drain deadline keeps the
// Cube (exit 1 naming what still runs; cordoned, its server, peer and node kept); the rerun
// with --stop-at-deadline stops it (killed, reason node_drained, its record kept) and
// finishes the roundtrip.
func TestRoundtripDrainDeadline(t *testing.T) {
	rg := newRoundtripRig(t, "")
	var profile map[string]any
	data, _ := os.ReadFile(rg.profile)
	json.Unmarshal(data, &profile)
	profile["drain_deadline"] = "2s"
	data, _ = json.Marshal(profile)
	writeFile(t, rg.profile, string(data), 0o600)
	before := rg.baseline()
	rg.ok("up")
	up := rg.checkUp(before)
	ip := up.Cubes[0].PrivateIP
	long := rg.f.create("sh", map[string]any{"nodeSelector": map[string]string{"kubernetes.io/hostname": ip}}, "sleep", "600")
	testkit.WaitFor(t, 30*time.Second, "the long sandbox running", func() bool { return rg.f.get(long.ID).State == "running" })
	_, errOut, code := rg.run("", "down")
	if code != 1 || !strings.Contains(errOut, "still runs 1 sandbox ("+long.ID+") at the drain deadline") || !strings.Contains(errOut, "--stop-at-deadline") {
		t.Fatalf("down past the deadline: exit %d\n%s", code, errOut)
	}
	if v := rg.view(); len(v.Servers) != len(before.cloud.Servers)+1 {
		t.Errorf("the Cube was deleted at its drain deadline: %+v", v)
	}
	rg.waitNode(ip, func(v nodes.View) bool { return v.Cordoned })
	if peers, _ := os.ReadFile(rg.peers); !strings.Contains(string(peers), up.Cubes[0].PeerKey) {
		t.Errorf("the peer was removed from a Cube that stays: %q", peers)
	}
	if _, errOut, code := rg.run("", "down", "--stop-at-deadline"); code != 0 {
		t.Fatalf("down --stop-at-deadline: exit %d\n%s", code, errOut)
	}
	if s := rg.f.get(long.ID); s.State != "killed" {
		t.Errorf("the long sandbox: %s, want killed (node_drained)", s.State)
	}
	rg.checkDown(before, up)
}
