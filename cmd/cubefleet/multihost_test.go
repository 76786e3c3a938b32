//go:build linux

package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// Timing of TestMultiHost: agents report every multiHostPeriod; the server calls a node
// Suspect after multiHostTimeout without a report, Down after two, Lost after multiHostLost.
// The health loop runs every second, so each of Suspect (1.5 s) and Down (2 s) lasts longer
// than one tick, and a live node would have to miss six reports in a row to look Suspect.
const (
	multiHostPeriod  = 250 * time.Millisecond
	multiHostTimeout = 1500 * time.Millisecond
	multiHostLost    = 5 * time.Second
)

// TestMultiHost is the "real multi-host" test on the built binary: four network
// namespaces joined to the host by veth pairs on a 10.254.x.0/24 test network of the test's own
// (one /30 per namespace). `cubefleet server` runs on the host with its node-agent routes on
// the host end of the first link (--internal-listen) and the public API on loopback. Three
// `cubefleet agent run` processes, one per namespace, join with join tokens bound to their
// addresses and are listed Ready with their own IPs; `agent check` passes inside a namespace.
// A stock-Cubelet-shaped client (plain HTTP, no Authorization) registers from the fourth
// namespace, the only network the server accepts unauthenticated calls from, and is refused
// from another. One agent is SIGKILLed and walks Ready -> Suspect -> Down -> Lost, then
// restarts with its state directory (its node credential; the join token is spent) and comes
// back Ready with a node.recovered event.
//
// It needs root and ip(8); without them it skips, except under CI=true, where it fails.
func TestMultiHost(t *testing.T) {
	start := time.Now()
	tn := newTestNet(t, 4)
	bin := binary(t)

	// A stand-in for the S3 store on the host side: agent check only needs TCP to answer.
	s3 := listenOn(t, tn.hostIP(1))
	go func() {
		for {
			conn, err := s3.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()

	internal := net.JoinHostPort(tn.hostIP(1).String(), strconv.Itoa(freePort(t, tn.hostIP(1))))
	stockNet := tn.subnet(4)
	c := startServerB(t, "", "--internal-listen", internal,
		"--node-heartbeat-timeout", multiHostTimeout.String(), "--node-lost-after", multiHostLost.String(),
		"--node-agent-allow-unauthenticated", stockNet.String())

	doc := filepath.Join(t.TempDir(), "fleet.json")
	writeFile(t, doc, `{"version": 1, "sites": [{"name": "lab", "kind": "shared", "region": "eu-central"}],
		"pools": [{"name": "cubes", "site": "lab", "class": "vps-host"}]}`, 0o644)
	c.ok("fleet", "apply", doc, "--tenant", "root", "--yes")

	// Three agents, each in its namespace with a join token bound to its address.
	cidr := sandboxCIDR(t)
	agents := make([]*agentNode, 3)
	for i := range agents {
		k := i + 1
		a := &agentNode{ns: tn.ns(k), ip: tn.nsIP(k), dir: t.TempDir()}
		token := strings.TrimSpace(c.ok("nodes", "join-token", "create", "--pool", "cubes", "--ip", a.ip.String(), "--ttl", "10m"))
		if !strings.HasPrefix(token, nodeapi.JoinTokenPrefix) {
			t.Fatalf("join-token create printed %q", token)
		}
		a.envFile = filepath.Join(a.dir, "agent.env")
		writeFile(t, filepath.Join(a.dir, "join.token"), token+"\n", 0o600)
		// The .env of Cube Sandbox's one-click bundle, as docs/agent.md has operators write it.
		writeFile(t, a.envFile, strings.Join([]string{
			"ONE_CLICK_DEPLOY_ROLE=compute",
			"CUBE_SANDBOX_NODE_IP=" + a.ip.String(),
			"ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR=" + internal,
			"CUBE_S3_ENDPOINT=http://" + s3.Addr().String(),
			"CUBE_S3_ACCESS_KEY_ID=multihost",
			"CUBE_S3_SECRET_ACCESS_KEY=multihost-secret",
			"CUBE_SANDBOX_NETWORK_CIDR=" + cidr.String(),
			"CUBEFLEET_JOIN_TOKEN_FILE=" + filepath.Join(a.dir, "join.token"),
			"CUBEFLEET_RUNTIME=process",
			"CUBEFLEET_AGENT_STATE_DIR=" + filepath.Join(a.dir, "state"),
			"CUBEFLEET_SANDBOX_DIR=" + agenttest.SandboxDir(t), // one per agent (an agent holds its own)
			"CUBEFLEET_REPORT_PERIOD=" + multiHostPeriod.String(),
			"",
		}, "\n"), 0o600)
		a.start(t, bin)
		agents[i] = a
	}

	// All three are listed Ready, each with its own IP, in the pool of its join token.
	list := waitNodes(t, c, 20*time.Second, "all three agents Ready", func(l multiHostList) bool {
		for _, a := range agents {
			if v, ok := l.node(a.ip.String()); !ok || v.State != nodes.StateReady {
				return false
			}
		}
		return true
	})
	if list.HeartbeatTimeout != multiHostTimeout.Milliseconds() || list.LostAfter != multiHostLost.Milliseconds() {
		t.Errorf("nodes list: heartbeatTimeoutMs %d, lostAfterMs %d; want %d, %d", list.HeartbeatTimeout, list.LostAfter,
			multiHostTimeout.Milliseconds(), multiHostLost.Milliseconds())
	}
	for _, a := range agents {
		v, _ := list.node(a.ip.String())
		if v.IP != a.ip.String() || v.Agent != nodes.AgentCubefleet || v.RegistryOnly || v.Pool != "cubes" || !v.Schedulable || v.Cordoned {
			t.Errorf("node %s: %+v", a.ip, v)
		}
		for k, want := range map[string]string{
			"cubefleet.io/role": "compute", "cubefleet.io/runtime": "process", "kubernetes.io/hostname": a.ip.String(),
			"cubefleet.io/s3-host": tn.hostIP(1).String(), "cubefleet.io/network-cidr": strings.ReplaceAll(cidr.String(), "/", "_"),
		} {
			if got := v.Labels[k]; got != want {
				t.Errorf("node %s: label %s = %q, want %q", a.ip, k, got, want)
			}
		}
	}
	if table := c.ok("nodes", "list"); !strings.Contains(table, agents[0].ip.String()) || strings.Count(table, "Ready") != 3 {
		t.Errorf("nodes list table:\n%s", table)
	}

	t.Run("agent check", func(t *testing.T) {
		a := agents[1]
		out, errOut, code := runIn(t, a.ns, bin, "agent", "check", "--env-file", a.envFile, "--timeout", "10s", "--output", "json")
		var results []struct{ Name, Status, Detail string }
		if err := json.Unmarshal([]byte(out), &results); err != nil || code != 0 || len(results) != 5 {
			t.Fatalf("agent check in %s: exit %d, %v\n%s%s", a.ns, code, err, out, errOut)
		}
		for _, r := range results {
			if r.Status != "ok" {
				t.Errorf("agent check: %+v", r)
			}
		}
	})

	t.Run("stock Cubelet", func(t *testing.T) {
		stockCubelet(t, c, tn, internal)
	})

	// SIGKILL the third agent and watch its node walk down; the others stay Ready.
	victim := agents[2]
	victim.kill(t)
	killed := time.Now()
	seen := watchStates(t, c, victim.ip.String(), multiHostLost+15*time.Second, func(s nodes.State) bool { return s == nodes.StateLost })
	t.Logf("after SIGKILL: %v (Lost after %s)", seen, time.Since(killed).Round(10*time.Millisecond))
	want := []nodes.State{nodes.StateReady, nodes.StateSuspect, nodes.StateDown, nodes.StateLost}
	if !slices.Equal(seen, want) && !slices.Equal(seen, want[1:]) {
		t.Errorf("states after SIGKILL: %v, want %v", seen, want)
	}
	// The last report left at most a period (+4% jitter) before the kill.
	if d := time.Since(killed); d < multiHostLost-2*multiHostPeriod {
		t.Errorf("Lost %s after the kill, before --node-lost-after %s", d, multiHostLost)
	}
	// Readers compute the state when asked; the event log records what the health loop sees
	// once a second. Wait for the loop to see Lost too: a report arriving before its next tick
	// leaves no node.lost event (the log goes from node.down to node.recovered) although
	// readers showed Lost.
	waitEvents(t, c, victim.ip.String(), 5*time.Second, nodes.EventLost)
	list = waitNodes(t, c, 5*time.Second, "the other agents Ready", func(l multiHostList) bool {
		for _, a := range agents[:2] {
			if v, ok := l.node(a.ip.String()); !ok || v.State != nodes.StateReady {
				return false
			}
		}
		return true
	})
	if v, _ := list.node(victim.ip.String()); v.State != nodes.StateLost || v.Healthy || v.Schedulable {
		t.Errorf("lost node in the list: %+v", v)
	}

	// Restart it: same state directory, so it registers with its node credential (its join
	// token is spent) and comes back Ready as the same node.
	victim.start(t, bin)
	watchStates(t, c, victim.ip.String(), 15*time.Second, func(s nodes.State) bool { return s == nodes.StateReady })
	types := waitEvents(t, c, victim.ip.String(), 10*time.Second, nodes.EventRecovered)
	wantTypes := []string{nodes.EventJoined, nodes.EventSuspect, nodes.EventDown, nodes.EventLost, nodes.EventRecovered}
	if !slices.Equal(types, wantTypes) {
		t.Errorf("events of %s: %v, want %v", victim.ip, types, wantTypes)
	}
	t.Logf("multi-host run took %s", time.Since(start).Round(10*time.Millisecond))
}

// stockCubelet drives a stock-Cubelet-shaped client: plain HTTP without Authorization from the
// fourth namespace (the server's --node-agent-allow-unauthenticated network) and from the first
// (outside it). Every answer it accepts passes Cubelet's rule (cubeletAccepts).
func stockCubelet(t *testing.T, c *cluster, tn *testNet, internal string) {
	base := "http://" + internal
	id := tn.nsIP(4).String()
	inside, outside := tn.client(4), tn.client(1)
	regBody, err := os.ReadFile(filepath.Join("..", "..", "internal", "nodes", "nodetest", "testdata", "register.json"))
	if err != nil {
		t.Fatal(err)
	}
	regBody = bytes.ReplaceAll(regBody, []byte("10.0.0.7"), []byte(id))
	regBody = bytes.ReplaceAll(regBody, []byte(`"default-cluster"`), []byte(`"cubes"`))
	statusBody, err := os.ReadFile(filepath.Join("..", "..", "internal", "nodes", "nodetest", "testdata", "status.json"))
	if err != nil {
		t.Fatal(err)
	}

	for _, p := range nodeapi.AgentPrefixes {
		code, body := nsCall(t, inside, "GET", base+p+"/readyz", nil)
		if err := cubeletAccepts(code, body); err != nil {
			t.Errorf("readyz on %s: %v", p, err)
		}
	}
	code, body := nsCall(t, inside, "POST", base+nodeapi.PathRegister, regBody)
	if err := cubeletAccepts(code, body); err != nil {
		t.Fatalf("register from the allowed network: %v", err)
	}
	if bytes.Contains(body, []byte("node_credential")) {
		t.Errorf("a stock Cubelet was given a node credential: %s", body)
	}
	code, body = nsCall(t, inside, "POST", base+nodeapi.StatusPath(id), statusBody)
	if err := cubeletAccepts(code, body); err != nil {
		t.Fatalf("status from the allowed network: %v", err)
	}
	for _, path := range []string{nodeapi.NodesPrefix, nodeapi.NodesPrefix + "?ids=" + id, nodeapi.NodePath(id)} {
		code, body = nsCall(t, inside, "GET", base+path, nil)
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"IP":"`+id+`"`)) {
			t.Errorf("GET %s from the allowed network: %d %s", path, code, body)
		}
	}
	out := c.ok("nodes", "get", id, "--output", "json")
	var v nodes.View
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("nodes get %s: %v\n%s", id, err, out)
	}
	if v.Agent != nodes.AgentCubelet || !v.RegistryOnly || v.Pool != "cubes" || v.Schedulable || v.IP != id {
		t.Errorf("stock Cubelet in nodes get: %+v", v)
	}
	if text := c.ok("nodes", "get", id); !strings.Contains(text, "stock Cubelet") {
		t.Errorf("nodes get does not say the node is a stock Cubelet:\n%s", text)
	}

	// Outside the allowed network: every call without credentials is refused.
	other := bytes.ReplaceAll(regBody, []byte(id), []byte(tn.nsIP(1).String()))
	code, body = nsCall(t, outside, "POST", base+nodeapi.PathRegister, other)
	if code != http.StatusUnauthorized || !bytes.Contains(body, []byte("--node-agent-allow-unauthenticated")) {
		t.Errorf("register without credentials from outside the allowed network: %d %s", code, body)
	}
	for _, call := range []struct{ method, path string }{
		{"POST", nodeapi.StatusPath(id)}, {"GET", nodeapi.NodesPrefix}, {"GET", nodeapi.NodePath(id)},
	} {
		var b []byte
		if call.method == "POST" {
			b = statusBody
		}
		if code, body := nsCall(t, outside, call.method, base+call.path, b); code != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials from outside the allowed network: %d %s", call.method, call.path, code, body)
		}
	}
	// The refusal is audited with the address it came from, as the registry saw it across the
	// veth link.
	from := "from " + tn.nsIP(1).String()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var page struct{ Items []audit.Entry }
		out := c.ok("audit", "list", "--tenant", "root", "--limit", "1000", "--output", "json")
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatalf("audit list: %v\n%s", err, out)
		}
		if slices.ContainsFunc(page.Items, func(e audit.Entry) bool {
			return e.Method == "node-agent.register" && e.Outcome == "unauthenticated" && strings.HasSuffix(e.Message, from)
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("no audit row of the refused registration %s", from)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Deleted: the stock Cubelet's heartbeat is 404 (it does not register again by itself).
	c.ok("nodes", "cordon", id)
	c.ok("nodes", "delete", id, "--force")
	if code, body := nsCall(t, inside, "POST", base+nodeapi.StatusPath(id), statusBody); code != http.StatusNotFound {
		t.Errorf("status after delete: %d %s", code, body)
	}
	if code, body := nsCall(t, inside, "GET", base+nodeapi.NodePath(id), nil); code != http.StatusNotFound {
		t.Errorf("GET node after delete: %d %s", code, body)
	}
}

// cubeletAccepts is a stock Cubelet's acceptance rule for a node-agent answer: a 2xx whose
// body decodes as a JSON object carrying no ret.ret_code other than 200.
func cubeletAccepts(code int, body []byte) error {
	if code < 200 || code > 299 {
		return fmt.Errorf("HTTP %d: %s", code, body)
	}
	if _, err := nodeapi.DecodeReply(body); err != nil {
		return fmt.Errorf("%v: %s", err, body)
	}
	return nil
}

// nsCall makes one plain HTTP call (no Authorization) with hc and returns the status and body.
func nsCall(t *testing.T, hc *http.Client, method, url string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// multiHostList is the output of `cubefleet nodes list --output json`.
type multiHostList struct {
	Items            []nodes.View `json:"items"`
	HeartbeatTimeout int64        `json:"heartbeatTimeoutMs"`
	LostAfter        int64        `json:"lostAfterMs"`
}

func (l multiHostList) node(id string) (nodes.View, bool) {
	for _, v := range l.Items {
		if v.ID == id {
			return v, true
		}
	}
	return nodes.View{}, false
}

// waitNodes polls `nodes list --output json` until done accepts it, or fails after d.
func waitNodes(t *testing.T, c *cluster, d time.Duration, what string, done func(multiHostList) bool) multiHostList {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var l multiHostList
		out := c.ok("nodes", "list", "--output", "json")
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("nodes list --output json: %v\n%s", err, out)
		}
		if done(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; nodes list:\n%s", what, d, c.ok("nodes", "list"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watchStates polls `nodes get id` until done accepts its state, or fails after d, and returns
// the states seen in order (each change once).
func watchStates(t *testing.T, c *cluster, id string, d time.Duration, done func(nodes.State) bool) []nodes.State {
	t.Helper()
	var seen []nodes.State
	deadline := time.Now().Add(d)
	for {
		out, errOut, code := c.run("", "", "nodes", "get", id, "--output", "json")
		var v nodes.View
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("nodes get %s: exit %d\n%s%s", id, code, out, errOut)
		}
		if len(seen) == 0 || seen[len(seen)-1] != v.State {
			seen = append(seen, v.State)
		}
		if done(v.State) {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: states %v in %s", id, seen, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitEvents polls `nodes events id` until an event of type last is listed, or fails after d,
// and returns the node's event types, oldest first.
func waitEvents(t *testing.T, c *cluster, id string, d time.Duration, last string) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		out := c.ok("nodes", "events", id, "--output", "json")
		var page struct{ Items []events.Event }
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatalf("nodes events: %v\n%s", err, out)
		}
		var types []string
		for _, e := range page.Items {
			if e.Subject != id {
				t.Errorf("nodes events %s lists an event of %s: %+v", id, e.Subject, e)
			}
			types = append(types, e.Type)
		}
		if slices.Contains(types, last) {
			return types
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: no %s event in %s; events: %v", id, last, d, types)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentNode is one `cubefleet agent run` in a namespace.
type agentNode struct {
	ns      string
	ip      netip.Addr
	dir     string // the agent's files: env file, join token, state directory, logs
	envFile string
	runs    int
	proc    *childProc
}

// start starts `cubefleet agent run` in the namespace (stopped at cleanup).
func (a *agentNode) start(t *testing.T, bin string) {
	t.Helper()
	a.runs++
	a.proc = startChild(t, fmt.Sprintf("agent %s (run %d)", a.ip, a.runs), filepath.Join(a.dir, fmt.Sprintf("agent-%d.log", a.runs)),
		"ip", "netns", "exec", a.ns, bin, "agent", "run", "--env-file", a.envFile, "--log-format", "json")
}

// kill SIGKILLs the agent and waits for it to be gone.
func (a *agentNode) kill(t *testing.T) {
	t.Helper()
	if err := a.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.proc.done
}

// childProc is a child process whose output goes to a log file, printed when the test fails.
type childProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	stop func()        // SIGTERM, then SIGKILL after 10 s; waits (also run at cleanup)
}

// startChild starts args[0] with args[1:] in a clean environment (no agent settings from the
// test's) with its output in logPath.
func startChild(t testing.TB, name, logPath string, args ...string) *childProc {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = cleanEnv()
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &childProc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-p.done
			}
		})
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			if len(out) > 8000 {
				out = append([]byte("...\n"), out[len(out)-8000:]...)
			}
			t.Logf("%s log:\n%s", name, out)
		}
	})
	return p
}

// cleanEnv is the test's environment without agent settings (CUBEFLEET_*, CUBE_*,
// ONE_CLICK_*), so that the children read only what the test gives them.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUBEFLEET_") && !strings.HasPrefix(kv, "CUBE_") && !strings.HasPrefix(kv, "ONE_CLICK_") {
			env = append(env, kv)
		}
	}
	return env
}

// runIn runs the binary with args in network namespace ns and returns stdout, stderr and the
// exit code.
func runIn(t *testing.T, ns, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	cmd.Env = append(cleanEnv(), "NO_COLOR=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee := new(exec.ExitError); errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// testNet is the test's own network: namespaces cf<pid>-n1..n<count>, each joined to the host
// by a veth pair (host end cf<pid>h<k>, namespace end eth0) on the /30 10.254.<b>.<4k>/30: the
// host end is .4k+1, the namespace end .4k+2, and each namespace routes the whole
// 10.254.<b>.0/24 through its host end. <b> is a /24 the host has no address or route in.
type testNet struct {
	prefix string // cf<pid>
	block  netip.Prefix
	count  int
}

// newTestNet creates the network, deleted at cleanup. When it cannot (not root, no ip(8),
// namespaces unavailable) the test skips, or fails under CI=true.
func newTestNet(t *testing.T, count int) *testNet {
	t.Helper()
	cannot := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("the multi-host test cannot run, and CI=true: %s", msg)
		}
		t.Skipf("needs root, ip(8) and network namespaces: %s", msg)
	}
	if os.Geteuid() != 0 {
		cannot("not root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		cannot("%v", err)
	}
	tn := &testNet{prefix: fmt.Sprintf("cf%d", os.Getpid()), count: count}
	block, err := freeBlock()
	if err != nil {
		cannot("%v", err)
	}
	tn.block = block
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	for k := 1; k <= count; k++ {
		ns, host := tn.ns(k), fmt.Sprintf("%sh%d", tn.prefix, k)
		if err := ip("netns", "add", ns); err != nil {
			cannot("%v", err)
		}
		// Deleting the namespace deletes its end of the pair, and so the pair; the host end is
		// deleted too in case the pair was made but not moved.
		t.Cleanup(func() {
			ip("link", "delete", host)
			if err := ip("netns", "delete", ns); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
		hostNet := netip.PrefixFrom(tn.hostIP(k), 30).String()
		nsNet := netip.PrefixFrom(tn.nsIP(k), 30).String()
		for _, args := range [][]string{
			{"link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"addr", "add", hostNet, "dev", host},
			{"link", "set", host, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "addr", "add", nsNet, "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "route", "add", tn.block.String(), "via", tn.hostIP(k).String()},
		} {
			if err := ip(args...); err != nil {
				if k == 1 && args[0] == "link" && args[1] == "add" {
					cannot("%v", err)
				}
				t.Fatal(err)
			}
		}
	}
	return tn
}

// freeBlock returns a 10.254.<b>.0/24 that overlaps no address or route of the host.
func freeBlock() (netip.Prefix, error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("ip addr: %v: %s", err, out)
	}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("ip route: %v: %s", err, routes)
	}
	var used []netip.Prefix
	for _, f := range strings.Fields(string(out) + " " + string(routes)) {
		if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is4() {
			used = append(used, p.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
			used = append(used, netip.PrefixFrom(a, 32))
		}
	}
	start := os.Getpid() % 250
	for i := range 250 {
		b := netip.MustParsePrefix(fmt.Sprintf("10.254.%d.0/24", 1+(start+i)%250))
		if !slices.ContainsFunc(used, func(p netip.Prefix) bool { return p.Bits() > 0 && p.Overlaps(b) }) {
			return b, nil
		}
	}
	return netip.Prefix{}, errors.New("no free /24 in 10.254.0.0/16")
}

func (tn *testNet) ns(k int) string { return fmt.Sprintf("%s-n%d", tn.prefix, k) }

func (tn *testNet) subnet(k int) netip.Prefix {
	b := tn.block.Addr().As4()
	b[3] = byte(4 * k)
	return netip.PrefixFrom(netip.AddrFrom4(b), 30)
}

func (tn *testNet) hostIP(k int) netip.Addr { return tn.subnet(k).Addr().Next() }

func (tn *testNet) nsIP(k int) netip.Addr { return tn.hostIP(k).Next() }

// client returns an HTTP client whose connections are made inside namespace k: each dial runs
// on an OS thread moved into the namespace (setns), which is thrown away afterwards.
func (tn *testNet) client(k int) *http.Client {
	path := filepath.Join("/var/run/netns", tn.ns(k))
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			conn net.Conn
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			// Never unlocked: the goroutine's thread ends with it, namespace and all.
			runtime.LockOSThread()
			f, err := os.Open(path)
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, fmt.Errorf("setns %s: %v", path, err)}
				return
			}
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			ch <- result{conn, err}
		}()
		r := <-ch
		return r.conn, r.err
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
	}
}

// sandboxCIDR returns a sandbox network for the agents that overlaps none of the host's
// nameservers (a namespace has its own addresses and routes but the host's resolv.conf).
func sandboxCIDR(t *testing.T) netip.Prefix {
	t.Helper()
	data, _ := os.ReadFile("/etc/resolv.conf")
	var servers []netip.Addr
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				servers = append(servers, a)
			}
		}
	}
	for _, s := range []string{"192.168.0.0/18", "172.29.0.0/16", "10.253.0.0/16"} {
		p := netip.MustParsePrefix(s)
		if !slices.ContainsFunc(servers, p.Contains) {
			return p
		}
	}
	t.Fatalf("every candidate sandbox network overlaps a nameserver of %v", servers)
	return netip.Prefix{}
}

// listenOn listens on a free TCP port of addr, closed at cleanup.
func listenOn(t *testing.T, addr netip.Addr) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// freePort returns a TCP port free on addr.
func freePort(t *testing.T, addr netip.Addr) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeFile(t testing.TB, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}
