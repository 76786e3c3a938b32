package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// Agent plays cubefleet agent on node ID (a loopback address such as 127.0.0.2): it joins with a
// join token, reports like the agent (Ready, its quota with MaxMVM slots, the sandboxes it runs,
// its local templates), holds the work API's long poll, checks the control plane's proof on
// every answer, and carries out what it is given without processes: a sandbox "runs" as Behave
// says. A sandbox id starts at most once. Its methods are safe for concurrent use.
type Agent struct {
	ID     string
	MaxMVM int64
	// Behave says what a started (or claimed) sandbox does; nil: it exits 0 after a
	// millisecond, having printed its command as JSON.
	Behave func(spec nodeapi.SandboxSpec) Run
	// InProgress is what its work requests list as in progress (WorkRequest.InProgress).
	InProgress []string

	t      testing.TB
	base   string // the control plane's node-agent URL
	client *http.Client
	cred   string

	mu        sync.Mutex
	running   map[string]*run
	specs     map[string]nodeapi.SandboxSpec // every spec received, by sandbox id (the last)
	starts    map[string]int                 // how often each sandbox id was started
	templates []string
	done      []string
	halt      func() // stops what Start started
	peak      int    // the most sandboxes it ran at once
}

// Run is what a sandbox does: it runs For (0: until it is stopped), then exits with Exit,
// having written Stdout and Stderr. FailStart makes it fail to start instead. IgnoreTerm makes a
// stop take Grace before it ends (as SIGKILL after an ignored SIGTERM).
type Run struct {
	Exit           int
	Stdout, Stderr []byte
	For            time.Duration
	FailStart      string
	IgnoreTerm     bool
	Grace          time.Duration
	// CPUMillis and PeakMemoryBytes are the usage an exit reports (0: none measured).
	CPUMillis, PeakMemoryBytes int64
}

type run struct {
	spec  nodeapi.SandboxSpec
	timer *time.Timer
	b     Run
	idle  bool // a warm sandbox not yet claimed
}

// NewAgent joins node id (a loopback address) to e's pool as cubefleet agent with maxMVM slots,
// and prepares the pool's templates on it (Service.Prepare, and the prepare assignments
// carried out and reported): the scheduler places a template's sandboxes only where it is
// local.
func (e *Env) NewAgent(id string, maxMVM int64) *Agent {
	e.T.Helper()
	a := e.NewBareAgent(id, maxMVM)
	ctx := context.Background()
	if err := e.Svc.Prepare(ctx); err != nil {
		e.T.Fatal(err)
	}
	asgs, err := a.Poll(ctx, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	a.Handle(ctx, asgs)
	a.Report()
	return a
}

// NewBareAgent joins node id as NewAgent does, without preparing any template.
func (e *Env) NewBareAgent(id string, maxMVM int64) *Agent {
	e.T.Helper()
	return Join(e.T, e.URL, e.JoinToken(nodes.JoinTokenInput{Pool: e.Pool, IP: id}), id, maxMVM)
}

// Join joins node id (a loopback address) with join token to the control plane whose node-agent
// routes are at base, as cubefleet agent with maxMVM slots, and reports once. The agent stops
// when the test ends.
func Join(t testing.TB, base, join, id string, maxMVM int64) *Agent {
	t.Helper()
	a := &Agent{ID: id, MaxMVM: maxMVM, t: t, base: base, client: nodetest.From(id), running: map[string]*run{},
		specs: map[string]nodeapi.SandboxSpec{}, starts: map[string]int{}}
	body := nodetest.Patch(t, nodetest.WithNode(id), "max_mvm_num", maxMVM)
	code, out := a.do("POST", nodeapi.PathRegister, join, body)
	if code != 200 {
		t.Fatalf("join %s: %d %s", id, code, out)
	}
	var joined nodeapi.RegisterResponse
	if err := json.Unmarshal(out, &joined); err != nil {
		t.Fatal(err)
	}
	a.cred = joined.NodeCredential
	a.Report()
	return a
}

// do sends a request with a bearer token.
func (a *Agent) do(method, path, token string, body []byte) (int, []byte) {
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// Credential returns the node credential the agent holds.
func (a *Agent) Credential() string { return a.cred }

// Report sends one status report (a failure fails the test).
func (a *Agent) Report() {
	a.t.Helper()
	if code, out := a.report(); code != 200 {
		a.t.Fatalf("report of %s: %d %s", a.ID, code, out)
	}
}

func (a *Agent) report() (int, []byte) {
	a.mu.Lock()
	ids := make([]string, 0, len(a.running))
	var cpu, mem int64
	for id, r := range a.running {
		ids = append(ids, id)
		cpu, mem = cpu+r.spec.CPUMillicores, mem+r.spec.MemoryMiB
	}
	slices.Sort(ids)
	tpls := []map[string]string{}
	for _, t := range a.templates {
		tpls = append(tpls, map[string]string{"template_id": t})
	}
	a.mu.Unlock()
	body := nodetest.Status()
	for path, v := range map[string]any{"sandboxes": ids, "local_templates": tpls, "quota.max_mvm_num": a.MaxMVM, "quota.create_concurrent_num": 0,
		"allocated.mvm_num": len(ids), "allocated.mvm_running_num": len(ids), "allocated.milli_cpu": cpu, "allocated.memory_mb": mem,
		"heartbeat_time": nil, "metric_time": nil} {
		body = nodetest.Patch(a.t, body, path, v)
	}
	return a.do("POST", nodeapi.StatusPath(a.ID), a.cred, body)
}

// nonce returns a fresh nonce.
func nonce() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// call makes one work-API call with the node credential and checks the answer's proof; it
// returns the status and body of a proven answer, and an error for one that is not proven.
func (a *Agent) call(ctx context.Context, path string, body any) (int, []byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	n := nonce()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.cred)
	req.Header.Set(nodeapi.NonceHeader, n)
	client := *a.client
	client.Timeout = 0 // the long poll
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if err := nodeapi.VerifyProof(nodeapi.CredentialKey(a.cred), n, a.ID, out, resp.Header.Get(nodeapi.ProofHeader)); err != nil {
		return resp.StatusCode, out, fmt.Errorf("answer %d %s: %w", resp.StatusCode, out, err)
	}
	return resp.StatusCode, out, nil
}

// Poll makes one work request, waiting up to wait, and returns the assignments of its answer.
func (a *Agent) Poll(ctx context.Context, wait time.Duration) ([]nodeapi.Assignment, error) {
	a.mu.Lock()
	req := nodeapi.WorkRequest{Running: []string{}, Done: a.done, InProgress: a.InProgress, WaitMS: int(wait.Milliseconds())}
	for id := range a.running {
		req.Running = append(req.Running, id)
	}
	a.mu.Unlock()
	code, out, err := a.call(ctx, nodeapi.WorkPath(a.ID), req)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("work: %d %s", code, out)
	}
	a.mu.Lock()
	a.done = slices.DeleteFunc(a.done, func(id string) bool { return slices.Contains(req.Done, id) })
	a.mu.Unlock()
	var resp nodeapi.WorkResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, err
	}
	return resp.Assignments, nil
}

// Event sends an event of sandbox id and returns the answer's status.
func (a *Agent) Event(ctx context.Context, id string, ev nodeapi.SandboxEvent) (int, error) {
	code, out, err := a.call(ctx, nodeapi.SandboxEventPath(a.ID, id), ev)
	if err == nil && code != 200 && code != 404 {
		err = fmt.Errorf("event of %s: %d %s", id, code, out)
	}
	return code, err
}

// Handle carries out assignments: a start or warm starts the sandbox once (a second start of
// the same id does nothing), a claim gives a warm sandbox its command, a stop ends a sandbox
// (killed), a prepare adds the template to the local ones. Each is then done.
func (a *Agent) Handle(ctx context.Context, asgs []nodeapi.Assignment) {
	for _, as := range asgs {
		switch as.Kind {
		case nodeapi.KindStart, nodeapi.KindWarm:
			a.start(ctx, *as.Sandbox, as.Kind == nodeapi.KindWarm)
		case nodeapi.KindClaim:
			a.claim(ctx, *as.Sandbox)
		case nodeapi.KindStop:
			a.stop(ctx, as.SandboxID)
		case nodeapi.KindPrepare:
			a.mu.Lock()
			if !slices.Contains(a.templates, as.Template.ID) {
				a.templates = append(a.templates, as.Template.ID)
			}
			a.mu.Unlock()
		}
		a.mu.Lock()
		a.done = append(a.done, as.ID)
		a.mu.Unlock()
	}
}

func (a *Agent) behave(sp nodeapi.SandboxSpec) Run {
	if a.Behave != nil {
		return a.Behave(sp)
	}
	out, _ := json.Marshal(sp.Argv)
	return Run{Stdout: out, For: time.Millisecond}
}

func (a *Agent) start(ctx context.Context, sp nodeapi.SandboxSpec, warm bool) {
	a.mu.Lock()
	a.specs[sp.ID] = sp
	a.starts[sp.ID]++
	if a.starts[sp.ID] > 1 {
		a.mu.Unlock()
		return // a sandbox id starts at most once
	}
	a.mu.Unlock()
	if warm {
		a.mu.Lock()
		a.running[sp.ID] = &run{spec: sp, idle: true}
		a.peak = max(a.peak, len(a.running))
		a.mu.Unlock()
		a.Event(ctx, sp.ID, nodeapi.SandboxEvent{State: nodeapi.StateRunning})
		return
	}
	a.launch(ctx, sp)
}

// launch runs sp as behave says.
func (a *Agent) launch(ctx context.Context, sp nodeapi.SandboxSpec) {
	b := a.behave(sp)
	if b.FailStart != "" {
		a.mu.Lock()
		delete(a.running, sp.ID)
		a.mu.Unlock()
		a.Event(ctx, sp.ID, nodeapi.SandboxEvent{State: nodeapi.StateFailed, Reason: "failed", Message: b.FailStart})
		return
	}
	r := &run{spec: sp, b: b}
	a.mu.Lock()
	a.running[sp.ID] = r
	a.peak = max(a.peak, len(a.running))
	a.mu.Unlock()
	a.Event(ctx, sp.ID, nodeapi.SandboxEvent{State: nodeapi.StateRunning})
	if b.For > 0 {
		r.timer = time.AfterFunc(b.For, func() { a.end(context.WithoutCancel(ctx), sp.ID, b) })
	}
}

// end ends sandbox id as b says, unless it ended.
func (a *Agent) end(ctx context.Context, id string, b Run) {
	a.mu.Lock()
	_, ok := a.running[id]
	delete(a.running, id)
	a.mu.Unlock()
	if !ok {
		return
	}
	code := b.Exit
	ev := nodeapi.SandboxEvent{State: nodeapi.StateExited, Reason: "exited", ExitCode: &code, Stdout: b.Stdout, Stderr: b.Stderr,
		CPUMillis: b.CPUMillis, PeakMemoryBytes: b.PeakMemoryBytes}
	limit := a.specLimit(id)
	ev.Stdout, ev.StdoutTruncated = cutAt(b.Stdout, limit)
	ev.Stderr, ev.StderrTruncated = cutAt(b.Stderr, limit)
	a.Event(ctx, id, ev)
}

func (a *Agent) specLimit(id string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.specs[id].OutputLimitBytes
}

// cutAt cuts b after limit bytes with the marker, as the driver does.
func cutAt(b []byte, limit int64) ([]byte, bool) {
	if limit <= 0 || int64(len(b)) <= limit {
		return b, false
	}
	return append(append([]byte{}, b[:limit]...), nodeapi.TruncationMarker(limit)...), true
}

func (a *Agent) claim(ctx context.Context, sp nodeapi.SandboxSpec) {
	a.mu.Lock()
	r, ok := a.running[sp.ID]
	a.specs[sp.ID] = sp
	a.mu.Unlock()
	if !ok || !r.idle {
		return
	}
	a.launch(ctx, sp)
}

func (a *Agent) stop(ctx context.Context, id string) {
	a.mu.Lock()
	r, ok := a.running[id]
	a.mu.Unlock()
	if !ok {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	kill := func() {
		a.mu.Lock()
		_, ok := a.running[id]
		delete(a.running, id)
		a.mu.Unlock()
		if ok {
			a.Event(context.WithoutCancel(ctx), id, nodeapi.SandboxEvent{State: nodeapi.StateKilled, Reason: "stopped", Signal: "SIGTERM"})
		}
	}
	if r.b.IgnoreTerm {
		time.AfterFunc(r.b.Grace, kill)
		return
	}
	kill()
}

// Starts returns how often sandbox id was started on the node.
func (a *Agent) Starts(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.starts[id]
}

// Spec returns the last spec the node received for sandbox id.
func (a *Agent) Spec(id string) (nodeapi.SandboxSpec, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sp, ok := a.specs[id]
	return sp, ok
}

// Peak returns the most sandboxes the agent ran at once.
func (a *Agent) Peak() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}

// Running returns the ids the agent runs.
func (a *Agent) Running() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id := range a.running {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Exit ends running sandbox id now as exited with code (a sandbox that runs until it is told).
func (a *Agent) Exit(id string, code int) {
	a.mu.Lock()
	r, ok := a.running[id]
	if ok && r.timer != nil {
		r.timer.Stop()
	}
	a.mu.Unlock()
	if ok {
		a.end(context.Background(), id, Run{Exit: code})
	}
}

// Forget drops sandbox id without an event (its process vanished unnoticed).
func (a *Agent) Forget(id string) {
	a.mu.Lock()
	if r, ok := a.running[id]; ok && r.timer != nil {
		r.timer.Stop()
	}
	delete(a.running, id)
	a.mu.Unlock()
}

// Start runs the agent until the test ends or Stop: it polls for work (waiting up to a
// second) and carries it out, and reports every report period.
func (a *Agent) Start(report time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			asgs, err := a.Poll(ctx, time.Second)
			if err != nil {
				if ctx.Err() == nil {
					time.Sleep(50 * time.Millisecond)
				}
				continue
			}
			a.Handle(ctx, asgs)
		}
	})
	wg.Go(func() {
		t := time.NewTicker(report)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				a.report()
			}
		}
	})
	stop := func() {
		cancel()
		wg.Wait()
	}
	a.mu.Lock()
	a.halt = stop
	a.mu.Unlock()
	a.t.Cleanup(stop)
}

// Stop stops a started agent: no more polls or reports (a node that died).
func (a *Agent) Stop() {
	a.mu.Lock()
	halt := a.halt
	a.mu.Unlock()
	if halt != nil {
		halt()
	}
}
