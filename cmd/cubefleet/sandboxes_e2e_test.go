package main_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// The sandboxes end to end: a `cubefleet server` process and `cubefleet agent run` processes on
// loopback addresses of their own, each running its sandboxes as processes (the process
// runtime), the fleet applied with `cubefleet fleet apply` and driven through the API and the CLI.

// e2eResultMax is the servers' --result-max-bytes: small, so output is cut.
const e2eResultMax = 4096

// e2eReport is the agents' report period, and e2eHeartbeat the servers' heartbeat timeout: a
// silent node is Down after two windows of max(e2eHeartbeat, 2 x its interval), 2 s here.
const (
	e2eReport    = 200 * time.Millisecond
	e2eHeartbeat = time.Second
)

// sandboxFleet is a server with a pool "lab" (disruption budget 0.2: one of 3 nodes may be out
// at once) of agents, flavor "tiny" (1 vCPU, 1 GiB), template "sh" and template "warm" (the same,
// with a warm pool of min 2, max 3), all of tenant root.
type sandboxFleet struct {
	t      testing.TB
	c      *cluster
	api    *client.Client
	agents []*sandboxAgent
	net    int // the third octet of the agents' loopback addresses
	// replicas are the servers of a replicated fleet (c is the first); nil for one server.
	replicas []*cluster
	// database and serverArgs are what a replica is started with again (restart).
	database   string
	serverArgs []string
}

// sandboxAgent is one `cubefleet agent run` child process on a loopback address.
type sandboxAgent struct {
	ip         string
	dir        string // its files: env file, join token, state directory, logs
	sandboxDir string
	envFile    string
	runs       int
	proc       *childProc
}

// e2eFleetDoc is the fleet the sandbox tests apply.
const e2eFleetDoc = `{"version": 1,
 "sites": [{"name": "lab", "kind": "shared", "region": "local"}],
 "pools": [{"name": "lab", "site": "lab", "class": "vps-host", "policy": {"disruptionBudget": 0.2}}],
 "flavors": [{"pool": "lab", "name": "tiny", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}],
 "sandboxTemplates": [
  {"name": "sh", "pool": "lab", "flavor": "tiny", "imageId": "ubuntu-24.04", "network": "private"},
  {"name": "warm", "pool": "lab", "flavor": "tiny", "imageId": "ubuntu-24.04", "network": "private", "warm": {"min": 2, "max": 3}}]}`

// newSandboxFleet starts a server on database (with extra flags) and n agents, applies the
// fleet and waits until every agent is Ready with both templates prepared.
func newSandboxFleet(t testing.TB, database string, n int, extra ...string) *sandboxFleet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the process runtime runs each sandbox as a user of its own, which needs root")
	}
	args := append([]string{"--result-max-bytes", strconv.Itoa(e2eResultMax), "--node-heartbeat-timeout", e2eHeartbeat.String(),
		"--node-lost-after", "10s"}, extra...)
	c := startServerB(t, database, args...)
	token, err := os.ReadFile(filepath.Join(c.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	f := &sandboxFleet{t: t, c: c, api: client.New(c.url, strings.TrimSpace(string(token)), nil), net: 100 + os.Getpid()%100}
	f.applyAndJoin(n)
	return f
}

// applyAndJoin applies the fleet through f.c and joins n agents, waiting until every agent is
// Ready with both templates prepared.
func (f *sandboxFleet) applyAndJoin(n int) { f.t.Helper(); f.applyDocAndJoin(e2eFleetDoc, n) }

// applyDocAndJoin is applyAndJoin with the fleet document fleetDoc, which must have pool
// "lab" with two sandbox templates.
func (f *sandboxFleet) applyDocAndJoin(fleetDoc string, n int) {
	f.t.Helper()
	doc := filepath.Join(f.t.TempDir(), "fleet.json")
	writeFile(f.t, doc, fleetDoc, 0o600)
	f.c.ok("fleet", "apply", doc, "--tenant", "root", "--yes")
	for range n {
		f.addAgent()
	}
	f.waitPrepared(f.agents...)
}

// addAgent joins and starts one more agent.
func (f *sandboxFleet) addAgent() *sandboxAgent {
	t := f.t
	t.Helper()
	a := &sandboxAgent{ip: fmt.Sprintf("127.77.%d.%d", f.net, 10+len(f.agents)), dir: t.TempDir(), sandboxDir: agenttest.SandboxDir(t)}
	token := strings.TrimSpace(f.c.ok("nodes", "join-token", "create", "--pool", "lab", "--ip", a.ip))
	writeFile(t, filepath.Join(a.dir, "join.token"), token+"\n", 0o600)
	server := strings.TrimPrefix(f.c.url, "http://")
	planes := []string{server}
	for _, r := range f.replicas[min(1, len(f.replicas)):] {
		planes = append(planes, strings.TrimPrefix(r.url, "http://"))
	}
	a.envFile = filepath.Join(a.dir, "agent.env")
	writeFile(t, a.envFile, strings.Join([]string{
		"ONE_CLICK_DEPLOY_ROLE=compute",
		"CUBEFLEET_CONTROL_PLANE=" + strings.Join(planes, ","),
		"CUBE_SANDBOX_NODE_IP=" + a.ip,
		"CUBEFLEET_ALLOW_LOOPBACK=1",
		"CUBE_S3_ENDPOINT=http://" + server, // any listening port: the agent only validates it
		"CUBEFLEET_JOIN_TOKEN_FILE=" + filepath.Join(a.dir, "join.token"),
		"CUBEFLEET_AGENT_STATE_DIR=" + filepath.Join(a.dir, "state"),
		"CUBEFLEET_AGENT_LISTEN=" + freeAddrOn(t, a.ip),
		"CUBEFLEET_REPORT_PERIOD=" + e2eReport.String(),
		"CUBEFLEET_RUNTIME=process",
		"CUBEFLEET_SANDBOX_DIR=" + a.sandboxDir,
		"CUBEFLEET_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1",
		"CUBEFLEET_QUOTA_CPU=64000",
		"CUBEFLEET_QUOTA_MEM_MB=131072",
		"CUBEFLEET_MAX_MVM_NUM=64",
	}, "\n")+"\n", 0o600)
	a.start(t, f.c.bin)
	f.agents = append(f.agents, a)
	t.Cleanup(func() { a.down(t) })
	return a
}

// start starts the agent (again).
func (a *sandboxAgent) start(t testing.TB, bin string) {
	t.Helper()
	a.runs++
	a.proc = startChild(t, fmt.Sprintf("agent %s (run %d)", a.ip, a.runs), filepath.Join(a.dir, fmt.Sprintf("agent-%d.log", a.runs)),
		bin, "agent", "run", "--env-file", a.envFile, "--log-format", "json")
}

// down stops the agent, then every sandbox it left through the process driver on its sandbox
// directory (`cubefleet agent down`'s job for an installed agent): nothing a test started
// outlives it.
func (a *sandboxAgent) down(t testing.TB) {
	a.proc.stop()
	d, err := process.New(process.Config{Dir: a.sandboxDir, Spares: -1})
	if err != nil {
		t.Errorf("open the sandboxes of %s to stop them: %v", a.ip, err)
		return
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.StopAll(ctx); err != nil {
		t.Errorf("stop the sandboxes of %s: %v", a.ip, err)
	}
}

// killSandboxes SIGKILLs every process of the agent's sandboxes: their supervisors and main
// processes, as the records of its sandbox directory name them.
func (a *sandboxAgent) killSandboxes() {
	ents, _ := os.ReadDir(a.sandboxDir)
	for _, e := range ents {
		for _, name := range []string{"supervisor.json", "state.json", "warm.json"} {
			var rec struct {
				PID     int
				Process struct{ PID int }
			}
			if data, err := os.ReadFile(filepath.Join(a.sandboxDir, e.Name(), name)); err == nil && json.Unmarshal(data, &rec) == nil {
				for _, pid := range []int{rec.PID, rec.Process.PID} {
					if pid > 1 {
						syscall.Kill(-pid, syscall.SIGKILL) // its process group, when it leads one
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
	}
}

// logs returns everything the agent logged, over all its runs.
func (a *sandboxAgent) logs() string {
	var b strings.Builder
	for i := 1; i <= a.runs; i++ {
		data, _ := os.ReadFile(filepath.Join(a.dir, fmt.Sprintf("agent-%d.log", i)))
		b.Write(data)
	}
	return b.String()
}

// freeAddrOn returns host:port with a port free on ip.
func freeAddrOn(t testing.TB, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// node reads node id.
func (f *sandboxFleet) node(id string) nodes.View {
	f.t.Helper()
	var v nodes.View
	if err := f.api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": id}, &v); err != nil {
		f.t.Fatalf("nodes.get %s: %v", id, err)
	}
	return v
}

// waitPrepared waits until agents are Ready with the pool's two templates prepared.
func (f *sandboxFleet) waitPrepared(agents ...*sandboxAgent) {
	f.t.Helper()
	for _, a := range agents {
		testkit.WaitFor(f.t, 60*time.Second, "node "+a.ip+" Ready with its templates prepared", func() bool {
			var v nodes.View
			if f.api.Call(context.Background(), "nodes.get", map[string]any{"nodeId": a.ip}, &v) != nil {
				return false
			}
			return v.State == nodes.StateReady && len(v.LocalTemplates) == 2
		})
	}
}

// create creates a sandbox of template tpl running argv (async) and returns it.
func (f *sandboxFleet) create(tpl string, in map[string]any, argv ...string) sandboxes.Sandbox {
	f.t.Helper()
	body := map[string]any{"tenantId": "root", "template": tpl, "command": argv, "async": true}
	for k, v := range in {
		body[k] = v
	}
	var s sandboxes.Sandbox
	if err := f.api.Call(context.Background(), "sandboxes.create", body, &s); err != nil {
		f.t.Fatalf("sandboxes.create %v: %v", argv, err)
	}
	return s
}

// get reads sandbox id.
func (f *sandboxFleet) get(id string) sandboxes.Sandbox {
	f.t.Helper()
	var s sandboxes.Sandbox
	if err := f.api.Call(context.Background(), "sandboxes.get", map[string]any{"tenantId": "root", "id": id}, &s); err != nil {
		f.t.Fatalf("sandboxes.get %s: %v", id, err)
	}
	return s
}

// wait waits (sandboxes.wait, long polls) until sandbox id ended, at most within.
func (f *sandboxFleet) wait(id string, within time.Duration) sandboxes.Sandbox {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var out struct {
			sandboxes.Sandbox
			Done bool `json:"done"`
		}
		if err := f.api.Call(context.Background(), "sandboxes.wait", map[string]any{"tenantId": "root", "id": id, "timeoutSeconds": 5}, &out); err != nil {
			f.t.Fatalf("sandboxes.wait %s: %v", id, err)
		}
		if out.Done {
			return out.Sandbox
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("sandbox %s has not ended within %s: %+v", id, within, out.Sandbox)
		}
	}
}

// sandboxLogs is the answer of sandboxes.logs (text encoding).
type sandboxLogs struct {
	State           sandboxes.State `json:"state"`
	Final           bool            `json:"final"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdoutTruncated"`
	StderrTruncated bool            `json:"stderrTruncated"`
	ExitCode        *int            `json:"exitCode"`
}

func (f *sandboxFleet) logs(id string) sandboxLogs {
	f.t.Helper()
	var l sandboxLogs
	if err := f.api.Call(context.Background(), "sandboxes.logs", map[string]any{"tenantId": "root", "id": id}, &l); err != nil {
		f.t.Fatalf("sandboxes.logs %s: %v", id, err)
	}
	return l
}

// agent returns the agent of node id.
func (f *sandboxFleet) agent(id string) *sandboxAgent {
	for _, a := range f.agents {
		if a.ip == id {
			return a
		}
	}
	f.t.Fatalf("no agent %s", id)
	return nil
}

// TestSandboxesOnAgents runs real commands on three agents through the API and the CLI: 50
// sandboxes spread over the agents, every result retrievable and output cut at
// --result-max-bytes with the marker; a secret:// value reaches the sandbox and nothing else;
// a warm pool is claimed from and refills; then a node is killed (the agent and its sandboxes,
// SIGKILL): its sandboxes are lost with a reason within the heartbeat window (a disconnect
// grace of 1 s, shorter than the window), nothing more is
// placed there, and the warm pool refills on the others. On both databases (the results, the
// secret's absence and the lost sandboxes are the database's).
func TestSandboxesOnAgents(t *testing.T) {
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			database := dsn(t)
			f := newSandboxFleet(t, database, 3, "--disconnect-grace", "1s") // lost as soon as the node is Down
			ctx := context.Background()

			// 50 sandboxes, each a real command: every fifth writes more than the limit on
			// both streams, every seventh exits 3.
			type job struct {
				id   string
				big  bool
				exit int
			}
			jobs := make([]job, 50)
			var wg sync.WaitGroup
			for i := range jobs {
				j := job{big: i%5 == 0}
				if i%7 == 0 {
					j.exit = 3
				}
				script := fmt.Sprintf(`echo "sandbox %d in $PWD"; echo "to stderr %d" >&2; exit %d`, i, i, j.exit)
				if j.big {
					script = fmt.Sprintf(`head -c 10000 /dev/zero | tr '\0' o; head -c 9000 /dev/zero | tr '\0' e >&2; exit %d`, j.exit)
				}
				jobs[i] = j
				wg.Go(func() {
					jobs[i].id = f.create("sh", nil, "/bin/sh", "-c", script).ID
				})
			}
			wg.Wait()
			perNode := map[string]int{}
			marker := fmt.Sprintf("[cubefleet: output truncated after %d bytes]", e2eResultMax)
			for i, j := range jobs {
				s := f.wait(j.id, 60*time.Second)
				perNode[s.NodeID]++
				if s.State != sandboxes.StateExited || s.Result == nil || s.Result.ExitCode == nil || *s.Result.ExitCode != j.exit {
					sup, _ := os.ReadFile(filepath.Join(f.agent(s.NodeID).sandboxDir, s.ID, "supervisor.log"))
					t.Fatalf("sandbox %d: %+v (result %+v), want exited %d; its supervisor's log:\n%s", i, s, s.Result, j.exit, sup)
				}
				l := f.logs(j.id)
				switch {
				case j.big:
					if !l.StdoutTruncated || !l.StderrTruncated || !strings.HasPrefix(l.Stdout, strings.Repeat("o", e2eResultMax)) ||
						!strings.Contains(l.Stdout, marker) || !strings.Contains(l.Stderr, marker) ||
						len(l.Stdout) > e2eResultMax+len(marker)+2 || strings.Count(l.Stderr, "e") < e2eResultMax {
						t.Errorf("sandbox %d's output is not cut at %d bytes with the marker: stdout %d bytes (truncated %v), stderr %d bytes (truncated %v), ends %q",
							i, e2eResultMax, len(l.Stdout), l.StdoutTruncated, len(l.Stderr), l.StderrTruncated, l.Stdout[max(0, len(l.Stdout)-60):])
					}
				default:
					if !strings.HasPrefix(l.Stdout, fmt.Sprintf("sandbox %d in /", i)) || l.Stderr != fmt.Sprintf("to stderr %d\n", i) || l.StdoutTruncated {
						t.Errorf("sandbox %d's output: %q, %q", i, l.Stdout, l.Stderr)
					}
				}
			}
			if len(perNode) != 3 {
				t.Errorf("the 50 sandboxes ran on %v, want all 3 nodes", perNode)
			}
			// The CLI's create --wait runs one like a local command.
			out, errOut, code := f.c.run("", "", "sandboxes", "create", "--tenant", "root", "--template", "sh", "--wait", "--", "/bin/sh", "-c", "echo hello; echo oops >&2; exit 4")
			if out != "hello\n" || errOut != "oops\n" || code != 4 {
				t.Errorf("sandboxes create --wait: %q, %q, exit %d", out, errOut, code)
			}
			// A kill by its --timeout exits as a shell's would (128+15) and says why on stderr, the
			// reason and the signal once each.
			out, errOut, code = f.c.run("", "", "sandboxes", "create", "--tenant", "root", "--template", "sh", "--timeout", "1s", "--wait", "--", "/bin/sh", "-c", "exec sleep 60")
			if code != 143 || out != "" || !regexp.MustCompile(`^sandbox sbx_\w+ killed: timeout after 1s: killed by SIGTERM\n$`).MatchString(errOut) {
				t.Errorf("sandboxes create --wait killed by its timeout: %q, %q, exit %d", out, errOut, code)
			}

			t.Run("secret", func(t *testing.T) {
				const value = "e2e-s3cr3t-8d1f0c2a9b"
				if out, errOut, code := f.c.run("", value+"\n", "secrets", "create", "api-token", "--tenant", "root"); code != 0 {
					t.Fatalf("secrets create: exit %d: %s%s", code, out, errOut)
				}
				sum := sha256.Sum256([]byte(value))
				s := f.create("sh", map[string]any{"env": map[string]string{"API_TOKEN": "secret://api-token"}},
					"/bin/sh", "-c", `printf %s "$API_TOKEN" | sha256sum`)
				s = f.wait(s.ID, 30*time.Second)
				if l := f.logs(s.ID); !strings.HasPrefix(l.Stdout, hex.EncodeToString(sum[:])) {
					t.Fatalf("the sandbox did not get the secret's value: %q (%+v)", l.Stdout, s)
				}
				// No API answer, log, database row or agent file holds it.
				var answers []string
				for _, m := range []struct {
					method string
					in     map[string]any
				}{
					{"sandboxes.get", map[string]any{"tenantId": "root", "id": s.ID}},
					{"sandboxes.list", map[string]any{"tenantId": "root"}},
					{"sandboxes.logs", map[string]any{"tenantId": "root", "id": s.ID}},
					{"sandboxes.logs", map[string]any{"tenantId": "root", "id": s.ID, "encoding": "base64"}},
				} {
					var raw json.RawMessage
					if err := f.api.Call(ctx, m.method, m.in, &raw); err != nil {
						t.Fatal(err)
					}
					answers = append(answers, string(raw))
				}
				if a := strings.Join(answers, "\n"); strings.Contains(a, value) || !strings.Contains(a, "secret://api-token") {
					t.Errorf("the API's answers hold the value, or not the reference:\n%s", a)
				}
				where := map[string]string{"the server's log": f.c.logs.String()}
				for _, a := range f.agents {
					where["agent "+a.ip+"'s log"] = a.logs()
					for _, dir := range []string{a.dir, a.sandboxDir} {
						filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
							if err == nil && d.Type().IsRegular() {
								data, _ := os.ReadFile(path)
								where[path] = string(data)
							}
							return nil
						})
					}
				}
				for what, text := range where {
					if strings.Contains(text, value) {
						t.Errorf("%s holds the secret's value", what)
					}
				}
				if rows := databaseHolding(t, database, f.c.dataDir, value); len(rows) > 0 {
					t.Errorf("the database holds the secret's value: %v", rows)
				}
				// The search sees what the database does hold: the sandbox's output, its hash.
				if rows := databaseHolding(t, database, f.c.dataDir, hex.EncodeToString(sum[:])); len(rows) == 0 {
					t.Errorf("the database search does not find the sandbox's output: it could not find the value either")
				}
			})

			t.Run("warm pool", func(t *testing.T) {
				idle := f.waitWarm(2, nil)
				out, errOut, code := f.c.run("", "", "sandboxes", "create", "--tenant", "root", "--template", "warm", "--", "/bin/sh", "-c", "sleep 60")
				if code != 0 || !strings.Contains(out, "from a warm sandbox") {
					t.Fatalf("create of a warm template: exit %d: %s%s", code, out, errOut)
				}
				claimed := strings.Fields(out)[2]
				claimed = strings.TrimSuffix(claimed, ":")
				if !slices.Contains(idle, claimed) {
					t.Errorf("claimed %s, not one of the idle %v", claimed, idle)
				}
				if s := f.get(claimed); !s.Warm || s.ClaimedAt == 0 || s.State != sandboxes.StateRunning {
					t.Errorf("the claimed sandbox: %+v", s)
				}
				f.waitWarm(2, func(ids []string) bool { return !slices.Contains(ids, claimed) })
			})

			t.Run("node killed", func(t *testing.T) {
				// Work on every node, the victim included: long sleepers.
				var sleepers []sandboxes.Sandbox
				for range 9 {
					sleepers = append(sleepers, f.create("sh", nil, "sleep", "300"))
				}
				testkit.WaitFor(t, 30*time.Second, "the sleepers running", func() bool {
					for _, s := range sleepers {
						if f.get(s.ID).State != sandboxes.StateRunning {
							return false
						}
					}
					return true
				})
				// The victim: the node with the most warm sandboxes and sleepers.
				count := map[string]int{}
				for _, s := range sleepers {
					count[f.get(s.ID).NodeID]++
				}
				for _, id := range f.warmIDs() {
					count[f.get(id).NodeID]++
				}
				victim := f.agents[0]
				for _, a := range f.agents {
					if count[a.ip] > count[victim.ip] {
						victim = a
					}
				}
				var onVictim []string
				for _, s := range sleepers {
					if f.get(s.ID).NodeID == victim.ip {
						onVictim = append(onVictim, s.ID)
					}
				}
				for _, id := range f.warmIDs() {
					if f.get(id).NodeID == victim.ip {
						onVictim = append(onVictim, id)
					}
				}
				if len(onVictim) == 0 {
					t.Fatalf("nothing runs on %s: %v", victim.ip, count)
				}
				killed := time.Now()
				victim.proc.cmd.Process.Signal(syscall.SIGKILL)
				<-victim.proc.done
				victim.killSandboxes()
				// Lost within the heartbeat window: Down two windows (2 s) after its last
				// report, and the lease holder's check runs every second.
				bound := 4*e2eHeartbeat + time.Second
				testkit.WaitFor(t, 30*time.Second, "the victim's sandboxes lost", func() bool {
					for _, id := range onVictim {
						if f.get(id).State != sandboxes.StateLost {
							return false
						}
					}
					return true
				})
				took := time.Since(killed)
				t.Logf("node %s killed: its %d sandboxes were lost %s later", victim.ip, len(onVictim), took.Round(time.Millisecond))
				if took > bound+5*time.Second { // a busy machine's slack
					t.Errorf("lost %s after the kill, want within the heartbeat window (about %s)", took, bound)
				}
				for _, id := range onVictim {
					s := f.get(id)
					if s.Reason != sandboxes.ReasonNodeDown || !strings.Contains(s.Message, "Down") {
						t.Errorf("lost sandbox %s: reason %q, message %q", id, s.Reason, s.Message)
					}
				}
				if v := f.node(victim.ip); v.State != nodes.StateDown && v.State != nodes.StateLost {
					t.Errorf("node %s is %s", victim.ip, v.State)
				}
				// Nothing more is placed there, and the warm pool refills elsewhere.
				for range 6 {
					if s := f.create("sh", nil, "true"); s.NodeID == victim.ip {
						t.Errorf("sandbox %s placed on the dead node", s.ID)
					}
				}
				f.waitWarm(2, func(ids []string) bool {
					for _, id := range ids {
						if f.get(id).NodeID == victim.ip {
							return false
						}
					}
					return true
				})
			})
		})
	}
}

// warmIDs returns the ids of the live idle warm sandboxes.
func (f *sandboxFleet) warmIDs() []string {
	f.t.Helper()
	var l struct{ Items []sandboxes.Sandbox }
	if err := f.api.Call(context.Background(), "sandboxes.list", map[string]any{"tenantId": "root", "warm": true}, &l); err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, s := range l.Items {
		ids = append(ids, s.ID)
	}
	return ids
}

// waitWarm waits until n idle warm sandboxes are ready (running, warm_ready) and ok (nil: any)
// holds of their ids; it returns the ids.
func (f *sandboxFleet) waitWarm(n int, ok func(ids []string) bool) []string {
	f.t.Helper()
	var ids []string
	testkit.WaitFor(f.t, 30*time.Second, fmt.Sprintf("%d idle warm sandboxes ready", n), func() bool {
		var l struct{ Items []sandboxes.Sandbox }
		if f.api.Call(context.Background(), "sandboxes.list", map[string]any{"tenantId": "root", "warm": true, "state": "running"}, &l) != nil {
			return false
		}
		ids = ids[:0]
		for _, s := range l.Items {
			if s.Reason == sandboxes.ReasonWarmReady {
				ids = append(ids, s.ID)
			}
		}
		return len(ids) == n && (ok == nil || ok(ids))
	})
	return ids
}

// databaseHolding returns where the database (SQLite in dataDir when database is "") holds
// value: the files of SQLite, or the rows of every PostgreSQL table as text.
func databaseHolding(t testing.TB, database, dataDir, value string) []string {
	t.Helper()
	var where []string
	if database == "" {
		files, _ := filepath.Glob(filepath.Join(dataDir, "*.db*"))
		if len(files) == 0 {
			t.Fatalf("no SQLite files in %s", dataDir)
		}
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), value) {
				where = append(where, p)
			}
		}
		return where
	}
	db, err := sql.Open("pgx", database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	for _, table := range tables {
		var n int
		q := fmt.Sprintf(`SELECT COUNT(*) FROM %q t WHERE position($1 in CAST(t AS TEXT)) > 0 OR position($2 in CAST(t AS TEXT)) > 0`, table)
		if err := db.QueryRowContext(ctx, q, value, hex.EncodeToString([]byte(value))).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n > 0 {
			where = append(where, fmt.Sprintf("%d rows of %s", n, table))
		}
	}
	if len(tables) < 10 {
		t.Fatalf("only %d tables: %v", len(tables), tables)
	}
	return where
}

// TestSandboxesDrainWithWork drains a node that runs sandboxes: the drain is refused for a
// second node of the pool (its disruption budget lets one of three drain at once), holds while
// the sandboxes run and while one that ignores SIGTERM waits out its grace after its timeout,
// and finishes only once the agent runs nothing; nothing is lost, and the results stay readable
// after the node is deleted. SQLite only: the drain is the registry's and the agent's.
func TestSandboxesDrainWithWork(t *testing.T) {
	f := newSandboxFleet(t, "", 3)
	ctx := context.Background()
	a, b := f.agents[0], f.agents[1]
	if err := f.api.Call(ctx, "nodes.label", map[string]any{"nodeId": a.ip, "set": map[string]string{"e2e-drain": "yes"}}, nil); err != nil {
		t.Fatal(err)
	}
	on := map[string]any{"nodeSelector": map[string]string{"e2e-drain": "yes"}}
	var work []sandboxes.Sandbox
	for i := range 3 {
		work = append(work, f.create("sh", on, "/bin/sh", "-c", fmt.Sprintf("sleep 2; echo done %d", i)))
	}
	// Its timeout (2 s) sends SIGTERM, which it ignores: SIGKILL ends it after the grace (10 s).
	on["timeoutSeconds"] = 2
	stubborn := f.create("sh", on, "/bin/sh", "-c", `trap "" TERM; echo stubborn; sleep 300 & exec sleep 300`)
	testkit.WaitFor(t, 30*time.Second, "the work running on "+a.ip, func() bool {
		for _, s := range append(work, stubborn) {
			if f.get(s.ID).State != sandboxes.StateRunning {
				return false
			}
		}
		return true
	})

	drain := f.c.start("nodes", "drain", a.ip, "--reason", "e2e", "--wait", "--poll", "200ms", "--timeout", "2m")
	testkit.WaitFor(t, 30*time.Second, "node "+a.ip+" draining", func() bool { return f.node(a.ip).Drain != nil })
	if out, errOut, code := f.c.run("", "", "nodes", "drain", b.ip); code == 0 || !strings.Contains(errOut, "disruption budget") {
		t.Errorf("a second drain in the pool: exit %d: %s%s", code, out, errOut)
	}
	code, stdout, stderr := drain.wait(t, 90*time.Second)
	drained := time.Now().UnixMilli()
	if code != 0 || !strings.HasPrefix(stdout, "Drained node "+a.ip) {
		t.Fatalf("nodes drain --wait: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "4 sandboxes left") || !strings.Contains(stderr, "1 sandbox left") {
		t.Errorf("the drain's progress did not count down from 4 to 1:\n%s", stderr)
	}
	s := f.get(stubborn.ID)
	if s.State != sandboxes.StateKilled || s.Reason != "timeout" || s.Result == nil || s.Result.Signal != "SIGKILL" {
		t.Errorf("the SIGTERM-ignoring sandbox: %+v (result %+v), want killed at its timeout by SIGKILL", s, s.Result)
	}
	if end := s.States[len(s.States)-1].At; end > drained {
		t.Errorf("the drain finished (%d) before the SIGTERM-ignoring sandbox ended (%d)", drained, end)
	}

	if out, errOut, code := f.c.run("", "", "nodes", "delete", a.ip); code != 0 {
		t.Fatalf("nodes delete: exit %d: %s%s", code, out, errOut)
	}
	for i, w := range work {
		s := f.get(w.ID)
		if l := f.logs(w.ID); s.State != sandboxes.StateExited || l.Stdout != fmt.Sprintf("done %d\n", i) {
			t.Errorf("after the node's deletion, sandbox %d: %s (%s), output %q", i, s.State, s.Reason, l.Stdout)
		}
	}
	if l := f.logs(stubborn.ID); l.Stdout != "stubborn\n" {
		t.Errorf("the stubborn sandbox's output after the node's deletion: %q", l.Stdout)
	}
	// The budget has room again: the node left the pool.
	if out, errOut, code := f.c.run("", "", "nodes", "drain", b.ip); code != 0 {
		t.Errorf("drain of %s once %s is deleted: exit %d: %s%s", b.ip, a.ip, code, out, errOut)
	}
}

// BenchmarkSandboxStartAgent measures sandboxes.create (synchronous: it answers once the
// sandbox's process runs) through a `cubefleet server` process to one `cubefleet agent run`
// process on loopback (the process runtime), one create at a time: cold (placed, handed to the
// agent, its process started) and warm (a warm sandbox of the template claimed), p50 and p99.
func BenchmarkSandboxStartAgent(b *testing.B) {
	for _, c := range []struct{ name, template string }{{"cold", "sh"}, {"warm", "warm"}} {
		b.Run(c.name, func(b *testing.B) {
			f := newSandboxFleet(b, "", 1)
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				if c.template == "warm" {
					b.StopTimer()
					f.waitWarm(2, nil)
					b.StartTimer()
				}
				start := time.Now()
				var s sandboxes.Sandbox
				if err := f.api.Call(ctx, "sandboxes.create", map[string]any{"tenantId": "root", "template": c.template, "command": []string{"sleep", "1"}}, &s); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if s.State != sandboxes.StateRunning || (c.template == "warm") != (s.ClaimedAt != 0) {
					b.Fatalf("created: %+v", s)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// cliProc is a CLI command running in the background.
type cliProc struct {
	cmd            *exec.Cmd
	stdout, stderr *testkit.SyncBuffer
	done           chan struct{}
}

// start starts the CLI with args against the server with the admin key, in the background.
func (c *cluster) start(args ...string) *cliProc {
	c.t.Helper()
	cmd := exec.Command(c.bin, append([]string{"--url", c.url, "--token-file", filepath.Join(c.dataDir, "admin.token")}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "XDG_CONFIG_HOME="+c.t.TempDir())
	p := &cliProc{cmd: cmd, stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() { cmd.Process.Kill(); <-p.done })
	return p
}

// wait waits for the command to exit, at most within, and returns its exit code and output.
func (p *cliProc) wait(t testing.TB, within time.Duration) (int, string, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%v still runs after %s:\n%s%s", p.cmd.Args, within, p.stdout.String(), p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.stdout.String(), p.stderr.String()
}
