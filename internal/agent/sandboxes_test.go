package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestMain(m *testing.M) {
	process.MaybeRunSupervisor() // the agents of these tests run sandboxes through this binary
	os.Exit(m.Run())
}

const node = "127.0.0.1" // the node of testConfig

// sandboxNode is an agent of the process runtime reporting to a fake control plane, with its
// state and sandbox directories, which outlive a restart of the agent (restart).
type sandboxNode struct {
	t   *testing.T
	cp  *agenttest.FakeCP
	cfg *Config
	*running
}

// newSandboxNode starts an agent that runs sandboxes, joining cp with cfj_join1. Every sandbox
// left is stopped when the test ends.
func newSandboxNode(t *testing.T, cp *agenttest.FakeCP) *sandboxNode {
	t.Helper()
	cfg := testConfig(filepath.Join(t.TempDir(), "state"), "cfj_join1", cp.URL)
	cfg.SandboxDir, cfg.SandboxAllowOwnUser, cfg.SandboxOutputLimit, cfg.SandboxSpares = agenttest.SandboxDir(t), os.Geteuid() != 0, 1<<20, 1
	t.Cleanup(func() { // after the agent stopped: nothing of the test may outlive it
		d, err := cfg.ProcessDriver(nil, 0)
		if err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.StopAll(ctx); err != nil {
			t.Error(err)
		}
		d.Close()
	})
	n := &sandboxNode{t: t, cp: cp, cfg: cfg}
	n.running = startAgent(t, cfg)
	testkit.WaitFor(t, 10*time.Second, "the agent's first work request", func() bool { return len(cp.CallsTo("/work")) > 0 })
	return n
}

// restart stops the agent and starts a new one on the same directories.
func (n *sandboxNode) restart() {
	n.t.Helper()
	n.stop()
	cfg := *n.cfg
	n.cfg = &cfg
	n.running = startAgent(n.t, n.cfg)
}

func start(asg, id string, argv ...string) nodeapi.Assignment {
	return nodeapi.Assignment{ID: asg, Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{ID: id, TemplateID: "tpl_1", Argv: argv}}
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// waitStates waits until the control plane accepted events of sandbox id in want's states,
// in that order, and returns the last. An event delivered again (the same state at the same
// time: an agent stopped before it recorded the answer resends it) counts once.
func (n *sandboxNode) waitStates(id string, want ...nodeapi.SandboxState) nodeapi.SandboxEvent {
	n.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(n.delivered(id)) < len(want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			n.t.Fatalf("timed out after 30s waiting for the events %v of %s (got %v)\nlog:\n%s", want, id, n.cp.States(id), n.logs.String())
		}
	}
	evs := n.delivered(id)
	var got []nodeapi.SandboxState
	for _, e := range evs {
		got = append(got, e.State)
	}
	if !slices.Equal(got, want) {
		n.t.Fatalf("events of %s: %v, want %v\nlog:\n%s", id, got, want, n.logs.String())
	}
	return evs[len(evs)-1]
}

// delivered returns the events the control plane accepted about sandbox id, oldest first, an
// event repeated right after itself (same state, same time) once.
func (n *sandboxNode) delivered(id string) []nodeapi.SandboxEvent {
	var out []nodeapi.SandboxEvent
	for _, c := range n.cp.Events(id) {
		if k := len(out); k > 0 && out[k-1].State == c.Event.State && out[k-1].At.Equal(c.Event.At.Time) {
			continue
		}
		out = append(out, c.Event)
	}
	return out
}

// lastStatus returns the last status report the control plane received.
func (n *sandboxNode) lastStatus() map[string]any {
	calls := n.cp.CallsTo("/status")
	if len(calls) == 0 {
		return nil
	}
	return calls[len(calls)-1].Body
}

// reported returns the sandboxes and mvm_num of the last status report
// (-1 before the first report).
func (n *sandboxNode) reported() ([]string, int) {
	b := n.lastStatus()
	list, ok1 := b["sandboxes"].([]any)
	alloc, ok2 := b["allocated"].(map[string]any)
	if !ok1 || !ok2 {
		return nil, -1
	}
	var ids []string
	for _, id := range list {
		ids = append(ids, id.(string))
	}
	return ids, int(alloc["mvm_num"].(float64))
}

// held reports whether the driver still holds sandbox id (its directory exists).
func (n *sandboxNode) held(id string) bool {
	_, err := os.Stat(filepath.Join(n.cfg.SandboxDir, id))
	return err == nil
}

// A sandbox runs, reports running and its end with the result, is listed while it runs, and
// is removed from the driver once its end is accepted; a stop ends one with SIGTERM, a timeout
// another; output beyond the limit is cut with the driver's marker.
func TestWorkStartStopTimeout(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	cp.Assign(node, nodeapi.Assignment{ID: "asg_1", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{
		ID: "sbx_echo", TemplateID: "tpl_1", Argv: sh("echo out; echo err >&2; head -c 3000 /dev/zero | tr '\\0' a >&2; exit 3"),
		OutputLimitBytes: 1000, CPUMillicores: 500, MemoryMiB: 256,
	}})
	end := n.waitStates("sbx_echo", nodeapi.StateRunning, nodeapi.StateExited)
	if end.ExitCode == nil || *end.ExitCode != 3 || end.Reason != "exited" || string(end.Stdout) != "out\n" || end.StdoutTruncated {
		t.Errorf("exit event %+v (stdout %q)", end, end.Stdout)
	}
	if want := "err\n" + strings.Repeat("a", 996) + driver.TruncationMarker(1000); string(end.Stderr) != want || !end.StderrTruncated {
		t.Errorf("stderr %q, want the first 1000 bytes then the marker", end.Stderr)
	}
	if end.At.IsZero() || end.CPUMillis < 0 || end.PeakMemoryBytes <= 0 {
		t.Errorf("exit event without its time or peak memory: %+v", end)
	}
	testkit.WaitFor(t, 10*time.Second, "asg_1 done and the sandbox removed", func() bool { return cp.Done("asg_1") && !n.held("sbx_echo") })

	cp.Assign(node, start("asg_2", "sbx_long", "sleep", "30"))
	n.waitStates("sbx_long", nodeapi.StateRunning)
	testkit.WaitFor(t, 10*time.Second, "a status report listing sbx_long", func() bool {
		ids, mvm := n.reported()
		return slices.Equal(ids, []string{"sbx_long"}) && mvm == 1
	})
	cp.Assign(node, nodeapi.Assignment{ID: "asg_3", Kind: nodeapi.KindStop, SandboxID: "sbx_long"})
	end = n.waitStates("sbx_long", nodeapi.StateRunning, nodeapi.StateKilled)
	if end.Reason != "stopped" || end.Signal != "SIGTERM" || end.ExitCode != nil {
		t.Errorf("stop event %+v", end)
	}
	testkit.WaitFor(t, 10*time.Second, "asg_3 done, nothing listed", func() bool {
		ids, mvm := n.reported()
		return cp.Done("asg_3") && len(ids) == 0 && mvm == 0 && !n.held("sbx_long")
	})

	cp.Assign(node, nodeapi.Assignment{ID: "asg_4", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_slow", Argv: []string{"sleep", "30"}, TimeoutSeconds: 1}})
	end = n.waitStates("sbx_slow", nodeapi.StateRunning, nodeapi.StateKilled)
	if end.Reason != "timeout" || !strings.HasPrefix(end.Message, "timeout after 1s") {
		t.Errorf("timeout event %+v", end)
	}
	// A stop of a sandbox the node never held, and of one that ended, are done at once.
	cp.Assign(node, nodeapi.Assignment{ID: "asg_5", Kind: nodeapi.KindStop, SandboxID: "sbx_never"}, nodeapi.Assignment{ID: "asg_6", Kind: nodeapi.KindStop, SandboxID: "sbx_echo"})
	testkit.WaitFor(t, 10*time.Second, "the stops done", func() bool { return cp.Done("asg_5") && cp.Done("asg_6") })
	if got := cp.States("sbx_echo"); len(got) != 2 {
		t.Errorf("a stop of an ended sandbox sent events again: %v", got)
	}
}

// A sandbox id starts at most once: delivered again and again, under another assignment, and
// after the agent restarted, its command ran once.
func TestStartIdempotent(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	// The sandbox can write nowhere the test could read once it ended (its work directory goes
	// with it): its output says it ran, and a second run would show as running again below.
	argv := sh("echo ran; sleep 1")
	// Three assignments in one answer, two of them for the same sandbox, offered again on every
	// work request until they are done.
	cp.Assign(node, start("asg_a", "sbx_once", argv...), start("asg_b", "sbx_once", argv...), start("asg_c", "sbx_once", "true"))
	if end := n.waitStates("sbx_once", nodeapi.StateRunning, nodeapi.StateExited); string(end.Stdout) != "ran\n" {
		t.Errorf("the sandbox's output %q, want its command's, once", end.Stdout)
	}
	testkit.WaitFor(t, 10*time.Second, "the starts done", func() bool { return cp.Done("asg_a") && cp.Done("asg_b") && cp.Done("asg_c") })
	n.restart()
	cp.Assign(node, start("asg_d", "sbx_once", argv...))
	testkit.WaitFor(t, 10*time.Second, "the start after the restart done", func() bool { return cp.Done("asg_d") })
	// Events are delivered at least once (an event accepted just before the restart may be
	// sent again; the control plane keeps one per sandbox and state): a second start would
	// show as running again after exited.
	if got := slices.Compact(cp.States("sbx_once")); !slices.Equal(got, []nodeapi.SandboxState{nodeapi.StateRunning, nodeapi.StateExited}) {
		t.Errorf("events %v, want running then exited", cp.States("sbx_once"))
	}
}

// An answer the control plane did not prove (forged with another key, replayed from another
// request, altered, or without a proof) is dropped and logged: nothing of it is carried out.
func TestForgedOrReplayedAnswerIgnored(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	key := nodeapi.CredentialKey("cfn_node1_secret")
	forges := []struct {
		name  string
		proof func(nonce, lastNonce string, body []byte) string
		alter bool
	}{
		{"another key", func(nonce, _ string, b []byte) string {
			return nodeapi.Proof(nodeapi.CredentialKey("cfn_other"), nonce, node, b)
		}, false},
		{"replayed", func(_, lastNonce string, b []byte) string { return nodeapi.Proof(key, lastNonce, node, b) }, false},
		{"altered", func(nonce, _ string, b []byte) string { return nodeapi.Proof(key, nonce, node, b) }, true},
		{"no proof", func(string, string, []byte) string { return "" }, false},
	}
	var mu sync.Mutex
	served, lastNonce := 0, ""
	cp.SetRaw(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/work") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if served == len(forges) {
			return false
		}
		cp.Record(r, nil)
		f := forges[served]
		id := "sbx_" + strings.ReplaceAll(f.name, " ", "_")
		body, _ := json.Marshal(nodeapi.WorkResponse{Assignments: []nodeapi.Assignment{start("asg_"+id, id, "true")}})
		nonce := r.Header.Get(nodeapi.NonceHeader)
		w.Header().Set(nodeapi.ProofHeader, f.proof(nonce, lastNonce, body))
		if f.alter {
			body = bytes.Replace(body, []byte(`"true"`), []byte(`"yes!"`), 1)
		}
		w.Write(body)
		served, lastNonce = served+1, nonce
		return true
	})
	n := newSandboxNode(t, cp) // its first work requests get the forged answers
	testkit.WaitFor(t, 20*time.Second, "every forged answer dropped", func() bool {
		return strings.Count(n.logs.String(), "dropped a work answer that carries no valid control-plane proof") >= len(forges)
	})
	for _, f := range forges {
		if id := "sbx_" + strings.ReplaceAll(f.name, " ", "_"); n.held(id) || len(cp.States(id)) > 0 {
			t.Errorf("%s: the forged assignment was carried out", f.name)
		}
	}
	// The control plane is heard again.
	cp.Assign(node, start("asg_real", "sbx_real", "true"))
	n.waitStates("sbx_real", nodeapi.StateRunning, nodeapi.StateExited)
}

// Events the control plane does not accept (an outage) are retried until it does, and survive
// a restart of the agent meanwhile; the sandbox stays with the driver until its end is accepted.
func TestEventsRetriedAfterOutage(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	outage := func(on bool) {
		if !on {
			cp.SetHook(nil)
			return
		}
		cp.SetHook(func(r *http.Request) (int, string) {
			if strings.HasSuffix(r.URL.Path, "/events") {
				return http.StatusServiceUnavailable, `{"error":"down for maintenance"}`
			}
			return 0, ""
		})
	}
	outage(true)
	cp.Assign(node, start("asg_1", "sbx_out", sh("echo result")...))
	testkit.WaitFor(t, 20*time.Second, "the sandbox's two events queued, and refused", func() bool {
		queued, _ := os.ReadDir(filepath.Join(n.cfg.StateDir, EventsDir))
		return len(queued) == 2 && len(cp.CallsTo("/sbx_out/events")) >= 3
	})
	if !n.held("sbx_out") || cp.Done("asg_1") {
		t.Fatalf("during the outage: held %v, done %v; want held, not done", n.held("sbx_out"), cp.Done("asg_1"))
	}
	before := len(cp.CallsTo("/sbx_out/events"))
	n.restart()
	// The restarted agent's own refused sends (the first agent may have made any number of
	// them before it stopped), so its log says it retries.
	testkit.WaitFor(t, 10*time.Second, "refused events after the restart", func() bool { return len(cp.CallsTo("/sbx_out/events")) >= before+2 })
	outage(false)
	end := n.waitStates("sbx_out", nodeapi.StateRunning, nodeapi.StateExited)
	if string(end.Stdout) != "result\n" {
		t.Errorf("the result after the outage: %q", end.Stdout)
	}
	testkit.WaitFor(t, 10*time.Second, "the sandbox removed, the events gone", func() bool {
		left, _ := os.ReadDir(filepath.Join(n.cfg.StateDir, EventsDir))
		return !n.held("sbx_out") && len(left) == 0
	})
	if !strings.Contains(n.logs.String(), "a sandbox event was not accepted; retrying") {
		t.Errorf("the outage is not in the log:\n%s", n.logs.String())
	}
}

// A restarted agent finds its sandboxes before it asks for work: one still running is listed
// and its end reported by the new agent, one that ended while no agent ran gets its end
// reported, and one that vanished is reported lost.
func TestRestartFindsSandboxes(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	// sbx_runs runs until the test releases it (a file in its work directory, made once the new
	// agent reported it), however long the restart takes on a loaded host.
	cp.Assign(node, start("asg_1", "sbx_runs", sh("until [ -e release ]; do sleep 0.05; done; echo still here")...), start("asg_2", "sbx_ends", sh("sleep 0.5; echo ended")...),
		start("asg_3", "sbx_gone", "sleep", "30"))
	for _, id := range []string{"sbx_runs", "sbx_ends", "sbx_gone"} {
		n.waitStates(id, nodeapi.StateRunning)
	}
	n.stop()
	// While no agent runs: sbx_ends ends, sbx_gone vanishes (its supervisor killed, its
	// directory removed).
	var sup struct{ PID int }
	data, _ := os.ReadFile(filepath.Join(n.cfg.SandboxDir, "sbx_gone", "supervisor.json"))
	json.Unmarshal(data, &sup)
	if sup.PID <= 0 {
		t.Fatalf("supervisor of sbx_gone: %s", data)
	}
	if err := syscall.Kill(sup.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "sbx_ends to end", func() bool {
		_, err := os.Stat(filepath.Join(n.cfg.SandboxDir, "sbx_ends", "result.json"))
		return err == nil
	})
	time.Sleep(200 * time.Millisecond)
	if err := os.RemoveAll(filepath.Join(n.cfg.SandboxDir, "sbx_gone")); err != nil {
		t.Fatal(err)
	}
	requests, statuses := len(cp.WorkRequests()), len(cp.CallsTo("/status"))
	cfg := *n.cfg
	n.cfg = &cfg
	n.running = startAgent(t, n.cfg)
	testkit.WaitFor(t, 10*time.Second, "the new agent's work request", func() bool { return len(cp.WorkRequests()) > requests })
	if first := cp.WorkRequests()[requests]; !slices.Equal(first.Running, []string{"sbx_runs"}) {
		t.Errorf("the new agent's first work request lists %v, want sbx_runs", first.Running)
	}
	if ended := n.waitStates("sbx_ends", nodeapi.StateRunning, nodeapi.StateExited); string(ended.Stdout) != "ended\n" {
		t.Errorf("sbx_ends: %+v", ended)
	}
	if lost := n.waitStates("sbx_gone", nodeapi.StateRunning, nodeapi.StateLost); !strings.Contains(lost.Message, "vanished") {
		t.Errorf("sbx_gone: %+v", lost)
	}
	// The new agent's first status report (not the last one of the agent before it, which
	// listed all three) lists only the sandbox that still runs.
	testkit.WaitFor(t, 10*time.Second, "the new agent's first status report", func() bool { return len(cp.CallsTo("/status")) > statuses })
	var ids []string
	list, _ := cp.CallsTo("/status")[statuses].Body["sandboxes"].([]any)
	for _, id := range list {
		ids = append(ids, id.(string))
	}
	if !slices.Equal(ids, []string{"sbx_runs"}) {
		t.Errorf("the new agent's first status report lists %v, want sbx_runs", ids)
	}
	if err := os.WriteFile(filepath.Join(n.cfg.SandboxDir, "sbx_runs", "work", "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if end := n.waitStates("sbx_runs", nodeapi.StateRunning, nodeapi.StateExited); string(end.Stdout) != "still here\n" {
		t.Errorf("sbx_runs: %+v", end)
	}
}

// A warm sandbox is ready without a command (running once ready, its assignment done, listed,
// not counted as running a command), runs its claim's command (running again, then its end); a
// claim of a sandbox the node does not hold reports it lost; a prepared template is listed in
// every status report from then on.
func TestWarmClaimAndPrepare(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	cp.Assign(node,
		nodeapi.Assignment{ID: "asg_p", Kind: nodeapi.KindPrepare, Template: &nodeapi.TemplateSpec{ID: "tpl_py", Name: "python"}},
		nodeapi.Assignment{ID: "asg_w", Kind: nodeapi.KindWarm, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_warm", TemplateID: "tpl_py", MemoryMiB: 128}})
	testkit.WaitFor(t, 10*time.Second, "the warm sandbox listed, not running", func() bool {
		b := n.lastStatus()
		ids, mvm := n.reported()
		alloc, _ := b["allocated"].(map[string]any)
		tpls, _ := json.Marshal(b["local_templates"])
		return mvm >= 0 && cp.Done("asg_w") && cp.Done("asg_p") && slices.Equal(ids, []string{"sbx_warm"}) && mvm == 1 &&
			alloc["mvm_running_num"].(float64) == 0 && alloc["memory_mb"].(float64) == 128 && string(tpls) == `[{"template_id":"tpl_py"}]`
	})
	if ready := n.waitStates("sbx_warm", nodeapi.StateRunning); ready.Message != "warm: ready for a claim" {
		t.Errorf("a warm sandbox's event: %+v", ready)
	}
	cp.Assign(node, nodeapi.Assignment{ID: "asg_c", Kind: nodeapi.KindClaim, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_warm", TemplateID: "tpl_py", Argv: sh(`echo "claimed $WHO"`), Env: []string{"WHO=tenant"}}},
		nodeapi.Assignment{ID: "asg_x", Kind: nodeapi.KindClaim, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_nowhere", Argv: []string{"true"}}})
	if end := n.waitStates("sbx_warm", nodeapi.StateRunning, nodeapi.StateRunning, nodeapi.StateExited); string(end.Stdout) != "claimed tenant\n" {
		t.Errorf("claimed: %+v", end)
	}
	if claimed := cp.Events("sbx_warm")[1].Event; claimed.Message != "claimed: its command runs" || claimed.At.IsZero() {
		t.Errorf("the claim's running event: %+v", claimed)
	}
	if lost := n.waitStates("sbx_nowhere", nodeapi.StateLost); !strings.Contains(lost.Message, "no warm sandbox sbx_nowhere") {
		t.Errorf("claim of a sandbox the node does not hold: %+v", lost)
	}
	n.restart()
	testkit.WaitFor(t, 10*time.Second, "the template listed after the restart", func() bool {
		tpls, _ := json.Marshal(n.lastStatus()["local_templates"])
		return n.a.Health().State == StateReporting && string(tpls) == `[{"template_id":"tpl_py"}]`
	})
}

// A draining node (its status answers say so) says so in its work requests, stops its idle
// warm sandboxes, refuses new ones, and counts a sandbox that ignores SIGTERM as running until
// the driver says it ended: 20 s after its stop (its grace), not when it was told to stop.
func TestDrainWithStubbornSandbox(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	const grace = 20 * time.Second
	cp.Assign(node,
		nodeapi.Assignment{ID: "asg_1", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_stubborn", Argv: sh(`trap "" TERM; echo trapped; exec sleep 300`), GraceSeconds: int64(grace / time.Second)}},
		nodeapi.Assignment{ID: "asg_2", Kind: nodeapi.KindWarm, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_idle"}})
	n.waitStates("sbx_stubborn", nodeapi.StateRunning)
	testkit.WaitFor(t, 10*time.Second, "two sandboxes listed", func() bool { _, mvm := n.reported(); return mvm == 2 })
	testkit.WaitFor(t, 10*time.Second, "the trap set", func() bool {
		out, _ := os.ReadFile(filepath.Join(n.cfg.SandboxDir, "sbx_stubborn", "stdout"))
		return string(out) == "trapped\n"
	})

	cp.SetDraining(node, true)
	testkit.WaitFor(t, 10*time.Second, "a work request saying the node drains", func() bool {
		reqs := cp.WorkRequests()
		return reqs[len(reqs)-1].Draining
	})
	if end := n.waitStates("sbx_idle", nodeapi.StateRunning, nodeapi.StateKilled); !strings.Contains(end.Message, "warm") {
		t.Errorf("the idle warm sandbox: %+v", end)
	}
	cp.Assign(node, start("asg_3", "sbx_late", "true"))
	if refused := n.waitStates("sbx_late", nodeapi.StateFailed); !strings.Contains(refused.Message, "drains") {
		t.Errorf("a start on a draining node: %+v", refused)
	}

	cp.Assign(node, nodeapi.Assignment{ID: "asg_4", Kind: nodeapi.KindStop, SandboxID: "sbx_stubborn"})
	stopped := time.Now()
	// Until the grace has passed the sandbox runs, and every report counts it.
	for time.Since(stopped) < grace-2*time.Second {
		time.Sleep(500 * time.Millisecond)
		if ids, mvm := n.reported(); mvm != 1 || !slices.Equal(ids, []string{"sbx_stubborn"}) {
			t.Fatalf("%s after its stop, the report counts %d sandboxes (%v): the one ignoring SIGTERM still runs", time.Since(stopped).Round(time.Second), mvm, ids)
		}
	}
	end := n.waitStates("sbx_stubborn", nodeapi.StateRunning, nodeapi.StateKilled)
	if end.Signal != "SIGKILL" || !strings.Contains(end.Message, "ignoring SIGTERM for 20s") {
		t.Errorf("the stubborn sandbox's end: %+v", end)
	}
	testkit.WaitFor(t, 10*time.Second, "a report of none", func() bool { _, mvm := n.reported(); return mvm == 0 })
	if took := time.Since(stopped); took < grace {
		t.Errorf("the count reached 0 %s after the stop, before the %s grace", took, grace)
	}
}

// A sandbox cannot read the agent's node credential (a 0600 file in its 0700 state directory),
// list or read the rest of the agent's state (its sandbox records and queued events), read its
// own records beside its working directory, or read another sandbox's environment (which holds
// that sandbox's secrets) or output.
func TestSandboxCannotReadCredential(t *testing.T) {
	requireRootSandboxes(t)
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	const secret = "s3cret-of-the-other-sandbox"
	cp.Assign(node, nodeapi.Assignment{ID: "asg_0", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{
		ID: "sbx_other", Argv: sh("echo other output; exec sleep 300"), Env: []string{"API_TOKEN=" + secret},
	}})
	n.waitStates("sbx_other", nodeapi.StateRunning)
	var other struct{ Process struct{ PID int } }
	data, _ := os.ReadFile(filepath.Join(n.cfg.SandboxDir, "sbx_other", "state.json"))
	if json.Unmarshal(data, &other); other.Process.PID <= 0 {
		t.Fatalf("the other sandbox's pid: %s", data)
	}
	cred := filepath.Join(n.cfg.StateDir, StateFile)
	targets := []string{
		cred,
		filepath.Join(n.cfg.StateDir, SandboxesDir, "sbx_other.json"),
		filepath.Join(n.cfg.SandboxDir, "sbx_other", "sandbox.json"),
		filepath.Join(n.cfg.SandboxDir, "sbx_other", "stdout"),
		fmt.Sprintf("/proc/%d/environ", other.Process.PID),
		fmt.Sprintf("/proc/%d/environ", os.Getpid()), // the agent's
	}
	// The agent records the sandbox once its running event is queued: wait for the record.
	testkit.WaitFor(t, 10*time.Second, "every target file (the test needs them to exist)", func() bool {
		for _, f := range targets {
			if _, err := os.Stat(f); err != nil {
				return false
			}
		}
		return true
	})
	script := `for f in "$@"; do if cat "$f" >/dev/null 2>&1; then echo "read $f"; fi; done
for d in "$STATE" "$STATE/sandboxes" "$STATE/events"; do if ls "$d" >/dev/null 2>&1; then echo "listed $d"; fi; done
echo checked`
	cp.Assign(node, nodeapi.Assignment{ID: "asg_1", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{
		// ../sandbox.json: its own records; /etc/passwd: readable, so the loop is seen to work.
		ID: "sbx_thief", Argv: append([]string{"/bin/sh", "-c", script, "thief"}, append(targets, "../sandbox.json", "/etc/passwd")...), Env: []string{"STATE=" + n.cfg.StateDir},
	}})
	end := n.waitStates("sbx_thief", nodeapi.StateRunning, nodeapi.StateExited)
	if string(end.Stdout) != "read /etc/passwd\nchecked\n" {
		t.Errorf("a sandbox reached the agent's files or another sandbox's:\n%s", end.Stdout)
	}
	cp.Assign(node, start("asg_2", "sbx_cat", "cat", cred))
	if end := n.waitStates("sbx_cat", nodeapi.StateRunning, nodeapi.StateExited); *end.ExitCode == 0 || bytes.Contains(end.Stdout, []byte("cfn_")) ||
		!bytes.Contains(end.Stderr, []byte("Permission denied")) && !bytes.Contains(end.Stderr, []byte("No such file or directory")) {
		t.Errorf("cat %s from a sandbox: %+v, stdout %q, stderr %q; want Permission denied (or, behind its mount namespace, No such file)", cred, end, end.Stdout, end.Stderr)
	}
}

// An environment value is handed to the sandbox and nowhere else: no log line, no file of the
// state or sandbox directory, no event (the names may appear).
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	const secret = "hunter2-4f1c9a7b"
	cp.Assign(node, nodeapi.Assignment{ID: "asg_1", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{
		ID: "sbx_secret", Argv: sh(`printf %s "$API_TOKEN" | sha256sum; sleep 1`), Env: []string{"API_TOKEN=" + secret, "PATH=/usr/bin:/bin"},
	}}, nodeapi.Assignment{ID: "asg_2", Kind: nodeapi.KindWarm, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_warm"}})
	testkit.WaitFor(t, 10*time.Second, "the warm sandbox", func() bool { return cp.Done("asg_2") })
	cp.Assign(node, nodeapi.Assignment{ID: "asg_3", Kind: nodeapi.KindClaim, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_warm", Argv: []string{"sleep", "1"}, Env: []string{"API_TOKEN=" + secret}}})
	n.waitStates("sbx_secret", nodeapi.StateRunning)
	n.waitStates("sbx_warm", nodeapi.StateRunning, nodeapi.StateRunning)
	scan := func(when string) {
		for _, dir := range []string{n.cfg.StateDir, n.cfg.SandboxDir} {
			filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.Type().IsRegular() {
					if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
						t.Errorf("%s: %s holds the secret", when, p)
					}
				}
				return nil
			})
		}
	}
	scan("while the sandboxes run")
	end := n.waitStates("sbx_secret", nodeapi.StateRunning, nodeapi.StateExited)
	n.waitStates("sbx_warm", nodeapi.StateRunning, nodeapi.StateRunning, nodeapi.StateExited)
	if sum := sha256.Sum256([]byte(secret)); string(end.Stdout) != hex.EncodeToString(sum[:])+"  -\n" {
		t.Errorf("the sandbox did not get its secret: %q", end.Stdout)
	}
	scan("after they ended")
	for _, e := range cp.Events("") {
		if b, _ := json.Marshal(e.Event); bytes.Contains(b, []byte(secret)) {
			t.Errorf("an event holds the secret: %s", b)
		}
	}
	if logs := n.logs.String(); strings.Contains(logs, secret) || !strings.Contains(logs, "API_TOKEN") {
		t.Errorf("the log holds the secret, or does not name the variable:\n%s", logs)
	}
}

// A control plane without the work API (404 to the work route while status reports are
// accepted) is asked again later, and the node keeps reporting without registering again.
func TestNoWorkAPI(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	cp.SetHook(func(r *http.Request) (int, string) {
		if strings.HasSuffix(r.URL.Path, "/work") {
			return http.StatusNotFound, "404 page not found"
		}
		return 0, ""
	})
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "a refused work request and 10 reports", func() bool {
		return len(cp.CallsTo("/work")) > 0 && len(cp.CallsTo("/status")) >= 10
	})
	if regs, works := len(cp.CallsTo("/register")), len(cp.CallsTo("/work")); regs != 1 || works != 1 {
		t.Errorf("%d registrations and %d work requests, want 1 and 1 (asked again in %s)", regs, works, noWorkAPIRetry)
	}
	if !strings.Contains(r.logs.String(), "has no work API") {
		t.Errorf("the log does not say why:\n%s", r.logs.String())
	}
}

func requireRootSandboxes(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI runs the tests as root; this one needs it")
	}
	t.Skip("needs root: sandboxes run as users of their own")
}

// An event the control plane refuses for good in a proven answer (it runs no such sandbox on
// this node) is dropped, and the sandbox is removed all the same; an unproven refusal is not
// believed.
func TestEventRefusedForGood(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	var mu sync.Mutex
	unproven := 0
	cp.SetRaw(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/sbx_stranger/events") {
			return false
		}
		cp.Record(r, nil)
		body := []byte(`{"error":"node 127.0.0.1 runs no sandbox sbx_stranger of this control plane","code":"NOT_FOUND"}`)
		mu.Lock()
		defer mu.Unlock()
		if unproven < 3 { // first a 404 anybody could have sent: retried
			unproven++
		} else {
			w.Header().Set(nodeapi.ProofHeader, nodeapi.Proof(nodeapi.CredentialKey("cfn_node1_secret"), r.Header.Get(nodeapi.NonceHeader), node, body))
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write(body)
		return true
	})
	cp.Assign(node, start("asg_1", "sbx_stranger", "true"))
	testkit.WaitFor(t, 20*time.Second, "the events dropped and the sandbox removed", func() bool {
		left, _ := os.ReadDir(filepath.Join(n.cfg.StateDir, EventsDir))
		return len(left) == 0 && !n.held("sbx_stranger") && cp.Done("asg_1")
	})
	if calls := len(cp.CallsTo("/sbx_stranger/events")); calls < 5 {
		t.Errorf("%d event calls: the unproven 404s were not retried", calls)
	}
	if !strings.Contains(n.logs.String(), "the control plane refused a sandbox event for good: it is dropped") {
		t.Errorf("the drop is not logged:\n%s", n.logs.String())
	}
}
