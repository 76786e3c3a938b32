// Package agent is the node agent of `cubefleet agent run` on every compute host: its
// configuration (Cube Sandbox's .env variables, CUBEFLEET_* equivalents and flags; see Load),
// the register and status loop that speaks a stock Cubelet's node-agent contract to the control
// plane (the register and status calls of Cube Sandbox's Cubelet,
// https://github.com/TencentCloud/CubeSandbox, with the same routes and fields) with a per-node
// credential kept in its state directory, the work loop that runs the sandboxes the control
// plane places on the node through a runtime driver (package driver) and reports every state
// they reach, and its local health endpoint. Setting a host up for it (install, check, down) is
// package hostsetup's job. See docs/agent.md.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Backoff of registration: the first retry waits RegisterBackoffMin, each next one twice as
// long, up to RegisterBackoffMax, forever (as Cubelet does).
const (
	RegisterBackoffMin = 100 * time.Millisecond
	RegisterBackoffMax = 7 * time.Second
)

// JoinTimeout is the HTTP timeout of a registration that sends a join token (at least the
// report period). Every other call times out after the report period, as Cubelet's do; a join
// token is single-use, so a reply lost to a short timeout would cost the node its credential.
const JoinTimeout = 10 * time.Second

// The labels the agent adds to Cubelet's to report its sandbox settings (label values allow
// only [A-Za-z0-9._-], so "/" in the network becomes "_": 192.168.0.0_18). The runtime's label is
// the node contract's, nodeapi.LabelRuntime, which placement reads.
const (
	LabelRole        = "cubefleet.io/role"         // control or compute
	LabelNetworkCIDR = "cubefleet.io/network-cidr" // CUBE_SANDBOX_NETWORK_CIDR, e.g. 192.168.0.0_18
	LabelS3Scheme    = "cubefleet.io/s3-scheme"    // CUBE_S3_ENDPOINT's scheme: http or https
	LabelS3Host      = "cubefleet.io/s3-host"      // CUBE_S3_ENDPOINT's host; left out when a label value cannot hold it (IPv6)
	LabelS3Port      = "cubefleet.io/s3-port"      // CUBE_S3_ENDPOINT's port (80/443 when absent)
	LabelS3Bucket    = "cubefleet.io/s3-bucket"    // CUBE_S3_BUCKET (a valid bucket name is a valid label value)
)

// Options are the agent's collaborators; the zero value of each is usable.
type Options struct {
	Log        *slog.Logger     // nil discards
	Now        func() time.Time // nil: time.Now
	HTTPClient *http.Client     // nil: redirects refused, connections as cfg.DialContext, TLS as cfg.TLSClientConfig (every call has its own deadline)
	// Driver runs the node's sandboxes; the caller closes it. Nil: Serve opens the driver of
	// the node's runtime (Config.ProcessDriver or Config.MicroVMDriver) and closes it when it
	// returns; a driver that cannot be opened leaves the node not Ready, with the reason.
	Driver driver.Driver
}

// Agent registers the node with the control plane and reports its status every period, like a
// Cubelet; see Run. Its methods are safe for concurrent use.
type Agent struct {
	cfg   *Config
	log   *slog.Logger
	now   func() time.Time
	wire  *wireClient
	facts hostinfo.Facts
	quota nodeapi.Quota
	ver   nodeapi.ComponentVersion
	// sleep waits between registration attempts; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	drv   driver.Driver // Options.Driver
	// run carries out the control plane's assignments; Serve sets it up before anything else
	// runs (nil before: no sandboxes).
	run *runner
	// runtimeErr says why the process runtime's driver could not be opened ("" when it was).
	runtimeErr string
	// interruptPoll ends the work request in flight (nil when none is).
	interruptPoll context.CancelFunc
	// registered is closed once the agent first registered (the events wait for it).
	registered     chan struct{}
	registeredOnce sync.Once

	mu         sync.Mutex
	state      State
	health     Health
	ready      bool
	transition time.Time // when the Ready condition last changed
}

// errRevoked means the control plane answered 401 to the node's credential.
var errRevoked = errors.New("the control plane refused this node's credential (HTTP 401): the node was deleted")

// New returns an agent for cfg. It reads the host's facts (cfg.Host) to compute the quota
// defaults: CPU 2000 millicores per logical CPU, memory ceil(1.25 x MemTotal) MiB, max_mvm_num
// memory/512 (at least 1). It errors when /proc/meminfo cannot be read.
func New(cfg *Config, opt Options) (*Agent, error) {
	facts, err := cfg.Host.Facts()
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: opt.Log, now: opt.Now, facts: facts, ver: BuildVersion(), sleep: sleepCtx, drv: opt.Driver, registered: make(chan struct{})}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	dial := cfg.DialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	hc := opt.HTTPClient
	if hc == nil {
		// Each call carries its own deadline (the report period, or JoinTimeout).
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = dial
		t.TLSClientConfig = cfg.TLSClientConfig()
		hc = &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	a.wire = newWireClient(cfg.ControlPlane, hc, &tlsDetector{dial: dial, config: cfg.TLSClientConfig()})
	a.quota = nodeapi.Quota{MilliCPU: cfg.QuotaCPU, MemMB: cfg.QuotaMemMB, MaxMVMNum: cfg.MaxMVMNum, CreateConcurrentNum: cfg.CreateConcurrentNum}
	if a.quota.MilliCPU == 0 {
		a.quota.MilliCPU = facts.CPUCount * 1000 * 2
	}
	if a.quota.MemMB == 0 {
		a.quota.MemMB = (facts.MemTotalKB*5 + 4*1024 - 1) / (4 * 1024) // ceil(MemTotal MiB x 5/4)
	}
	if a.quota.MaxMVMNum == 0 {
		a.quota.MaxMVMNum = max(1, a.quota.MemMB/512)
	}
	a.health = Health{State: StateRegistering, NodeID: cfg.NodeID(), Version: a.ver.Version}
	return a, nil
}

// Quota returns the quota the agent reports: CPU in millicores, memory in MiB.
func (a *Agent) Quota() nodeapi.Quota { return a.quota }

// Run listens on cfg.Listen and calls Serve.
func (a *Agent) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve the agent's health endpoint on %s (--listen, CUBEFLEET_AGENT_LISTEN): %w", a.cfg.Listen, err)
	}
	return a.Serve(ctx, ln)
}

// Serve serves GET /healthz on ln and reports to the control plane until ctx is done: it finds
// the sandboxes it ran before (its records and its driver's), registers (retrying with backoff
// from RegisterBackoffMin to RegisterBackoffMax, forever), then sends a status report every
// cfg.ReportPeriod (+ up to 4% jitter) and holds the work loop (see workLoop), while it sends
// the events of its sandboxes (sendEvents). A 404 to a status report registers again. A 401 to the node's credential means the node was deleted: the
// agent records the revocation in its state file, stops reporting, answers 503 on /healthz,
// and does not come back until it is given a new join token. Serve holds an exclusive lock on
// the state directory (LockFile) and writes cfg.PIDFile while it runs; another agent holding
// the lock is an error. It returns nil when ctx is done, or an error when the state directory, the state file,
// the PID file or the sandbox runtime cannot be used. Sandboxes outlive it: a new agent on the
// same state and sandbox directories takes them over.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	defer ln.Close()
	was, err := PrepareStateDir(a.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state directory (--state-dir, CUBEFLEET_AGENT_STATE_DIR): %w", err)
	}
	if was != 0 {
		a.log.Warn("the state directory holds the node credential and others could access it: its mode was changed to 0700",
			"state_dir", a.cfg.StateDir, "old_mode", fmt.Sprintf("%04o", was))
	}
	// One agent per state directory: a second one would replace the first's node credential.
	unlock, err := lockStateDir(a.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state directory (--state-dir, CUBEFLEET_AGENT_STATE_DIR): %w", err)
	}
	defer unlock()
	st, err := ReadState(a.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	if a.cfg.PIDFile != "" {
		if err := atomicfile.WriteFile(a.cfg.PIDFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("PID file (--pid-file, CUBEFLEET_AGENT_PID_FILE): %w", err)
		}
		defer os.Remove(a.cfg.PIDFile)
	}
	if st.NodeID != "" && st.NodeID != a.cfg.NodeID() {
		a.log.Warn("the state file belongs to another node ID; registering as a new node", "state_node_id", st.NodeID, "node_id", a.cfg.NodeID())
		st = State{}
	}
	a.mu.Lock()
	a.state = st
	a.mu.Unlock()

	drv, noDriver, closeDriver := a.openDriver()
	defer closeDriver()
	run, err := newRunner(a.cfg.StateDir, drv, noDriver, a.cfg.SandboxOutputLimit, a.log, a.now)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	run.drainChanged = a.interruptWork
	run.runtime, run.controlPlane = a.cfg.Runtime, newControlPlane(a.cfg.ControlPlane, a.now)
	defer run.close() // before the driver closes
	if err := run.recover(ctx); err != nil {
		return fmt.Errorf("recover the sandboxes: %w", err)
	}
	a.mu.Lock()
	a.run = run
	a.mu.Unlock()
	var events sync.WaitGroup
	events.Add(2)
	go func() { defer events.Done(); a.sendEvents(ctx) }()
	go func() { defer events.Done(); a.streamOutput(ctx) }()
	defer events.Wait()

	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	a.log.Info("agent started", "node_id", a.cfg.NodeID(), "role", a.cfg.Role, "control_plane", strings.Join(a.cfg.ControlPlane, ","),
		"health", "http://"+ln.Addr().String()+"/healthz", "version", a.ver.Version, "quota_cpu_millicores", a.quota.MilliCPU, "quota_mem_mb", a.quota.MemMB)
	// What `agent install` checks, for hosts it did not check (an image built with --root).
	for _, p := range Prerequisites(a.cfg, a.facts) {
		a.log.Warn("this host does not meet a prerequisite of the agent", "node_id", a.cfg.NodeID(), "problem", p)
	}

	a.report(ctx)

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	a.log.Info("agent stopped", "node_id", a.cfg.NodeID())
	return err
}

// report runs the register and status loop until ctx is done or the credential is revoked.
func (a *Agent) report(ctx context.Context) {
	a.mu.Lock()
	st := a.state
	a.mu.Unlock()
	if st.Revoked && (a.cfg.JoinToken == "" || tokenHash(a.cfg.JoinToken) == st.JoinTokenSHA256) {
		a.setRevoked(st.RevokedAt)
		<-ctx.Done()
		return
	}
	for {
		if err := a.registerLoop(ctx); err != nil {
			if errors.Is(err, errRevoked) {
				<-ctx.Done()
			}
			return
		}
		a.registeredOnce.Do(func() { close(a.registered) })
		switch err := a.registeredPhase(ctx); {
		case errors.Is(err, errRevoked):
			<-ctx.Done()
			return
		case ctx.Err() != nil:
			return
		}
		// Anything else: register again.
	}
}

// registeredPhase runs the status loop and the work loop until ctx is done (nil) or one of them
// ends with an error (the other is stopped): errRevoked, or another error to register again.
func (a *Agent) registeredPhase(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- a.statusLoop(ctx) }()
	go func() { errs <- a.workLoop(ctx) }()
	first := <-errs
	cancel()
	second := <-errs
	if first == nil || errors.Is(second, errRevoked) {
		return second
	}
	return first
}

// repeatLog is how often a registration error that has not changed is logged again.
const repeatLog = time.Minute

func (a *Agent) registerLoop(ctx context.Context) error {
	backoff := RegisterBackoffMin
	var lastErr string
	var lastLogged time.Time
	repeats := 0
	for attempt := 1; ; attempt++ {
		err := a.register(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errRevoked) {
			return err
		}
		msg := err.Error()
		a.setHealth(func(h *Health) { h.State, h.Error = StateRegistering, msg })
		// Logged when the error changes, and while it does not, once every repeatLog.
		if now := a.now(); msg != lastErr || now.Sub(lastLogged) >= repeatLog {
			args := []any{"node_id", a.cfg.NodeID(), "attempt", attempt, "retry_in", backoff.String(), "error", msg}
			if msg == lastErr && repeats > 0 {
				args = append(args, "same_error_since_last_logged", repeats)
			}
			a.log.Warn("registration failed; retrying", args...)
			lastErr, lastLogged, repeats = msg, now, 0
		} else {
			repeats++
		}
		if a.sleep(ctx, backoff) != nil {
			return ctx.Err()
		}
		backoff = min(2*backoff, RegisterBackoffMax)
	}
}

// credential returns the token for the next call and whether it is the node credential.
func (a *Agent) credential() (Secret, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state.NodeCredential != "" {
		return Secret(a.state.NodeCredential), true
	}
	return a.cfg.JoinToken, false
}

// register makes one registration attempt (with failover across the endpoints).
func (a *Agent) register(ctx context.Context) error {
	token, isCredential := a.credential()
	if !isCredential && token == "" {
		a.log.Warn("no join token: registering without credentials, which the control plane accepts only from the CIDRs it lists in --node-agent-allow-unauthenticated", "node_id", a.cfg.NodeID())
	}
	timeout := a.cfg.ReportPeriod
	if !isCredential && token != "" {
		timeout = max(timeout, JoinTimeout)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reply, err := a.wire.post(cctx, nodeapi.PathRegister, token, a.RegisterRequest())
	if err != nil {
		if statusCode(err) == http.StatusUnauthorized {
			if isCredential {
				return a.revoke(err)
			}
			if token != "" {
				if msg := addressRefusal(err); msg != "" {
					return fmt.Errorf("%w (%s)", err, msg)
				}
				return fmt.Errorf("%w (the join token was refused: it may be used, expired, bound to another IP or mistyped; create a new one with `cubefleet nodes join-token create`)", err)
			}
		}
		return err
	}
	var cred string
	if raw, ok := reply["node_credential"]; ok {
		_ = json.Unmarshal(raw, &cred)
	}
	a.mu.Lock()
	st := a.state
	st.NodeID = a.cfg.NodeID()
	if cred != "" {
		st.NodeCredential = cred
	}
	if !isCredential {
		st.JoinTokenSHA256, st.Revoked, st.RevokedAt = tokenHash(token), false, ""
	}
	changed := st != a.state
	a.state = st
	a.mu.Unlock()
	if changed {
		if err := WriteState(a.cfg.StateDir, st); err != nil {
			// Keep going with the credential in memory: the join token may be single-use.
			a.log.Error("cannot store the node credential; it is kept in memory only, so a restart will need a new join token", "error", err.Error())
		}
	}
	if !isCredential && token != "" && cred == "" {
		a.log.Warn("the control plane issued no node credential; reporting without one", "node_id", a.cfg.NodeID())
	}
	now := a.now().UTC().Format(time.RFC3339)
	a.setHealth(func(h *Health) { h.State, h.RegisteredAt, h.Error = StateReporting, now, "" })
	a.log.Info("registered", "node_id", a.cfg.NodeID(), "credential", cred != "" || isCredential)
	return nil
}

// refusedFrom matches the address a refusal says a call came from ("...; from 10.0.0.5").
var refusedFrom = regexp.MustCompile(`\bfrom \[?([0-9A-Fa-f.:]+)\]?`)

// addressRefusal explains a refusal of the join token because it is bound to another address
// than the one the registration came from, naming that address: the one the control plane's
// message gives, else the local address of the connection (what the control plane sees unless
// a NAT is in between). It returns "" for any other error.
func addressRefusal(err error) string {
	var se *StatusError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "bound to another address") {
		return ""
	}
	from := ""
	if m := refusedFrom.FindStringSubmatch(se.Message); m != nil {
		from = "the control plane saw it come from " + m[1]
	} else if host, _, err := net.SplitHostPort(se.Local); err == nil {
		from = "this agent registered from " + host + " (the address the control plane sees, unless a NAT is in between)"
	}
	if from == "" {
		return "the join token is bound to another address than the one this registration came from: create one with --ip set to the address the control plane sees this node from"
	}
	return "the join token is bound to another address than the one this registration came from: " + from + "; create a join token with --ip set to that address (cubefleet nodes join-token create --pool <pool> --ip <address>), or, on a single-host demo, check CUBE_SANDBOX_NODE_IP"
}

// revoke records that the control plane refused the node credential.
func (a *Agent) revoke(cause error) error {
	now := a.now().UTC().Format(time.RFC3339)
	a.mu.Lock()
	a.state.NodeCredential, a.state.Revoked, a.state.RevokedAt = "", true, now
	st := a.state
	a.mu.Unlock()
	if err := WriteState(a.cfg.StateDir, st); err != nil {
		a.log.Error("cannot record the revocation in the state file", "error", err.Error())
	}
	a.setRevoked(now)
	a.log.Error("the control plane refused this node's credential: the node was deleted. The agent stopped reporting and will not register again until it is given a new join token (cubefleet nodes join-token create, then CUBEFLEET_JOIN_TOKEN or --join-token-file, and restart the agent)",
		"node_id", a.cfg.NodeID(), "error", cause.Error())
	return errRevoked
}

func ifNotEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// statusLoop reports every period until ctx is done (nil), the node is unknown (404: an error
// to register again) or the credential is revoked (errRevoked).
func (a *Agent) statusLoop(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		err := a.sendStatus(ctx)
		switch code := statusCode(err); {
		case err == nil:
			now := a.now().UTC().Format(time.RFC3339)
			a.setHealth(func(h *Health) { h.State, h.LastReportAt, h.Error = StateReporting, now, "" })
			if lastErr != "" {
				a.log.Info("status reports succeed again", "node_id", a.cfg.NodeID())
				lastErr = ""
			}
		case ctx.Err() != nil:
			return nil
		case code == http.StatusNotFound:
			a.log.Warn("the control plane does not know this node (HTTP 404); registering again", "node_id", a.cfg.NodeID())
			a.setHealth(func(h *Health) { h.State, h.Error = StateRegistering, err.Error() })
			return err
		case code == http.StatusUnauthorized:
			if _, isCredential := a.credential(); isCredential {
				return a.revoke(err)
			}
			a.log.Warn("the control plane refused an unauthenticated status report (HTTP 401); registering again", "node_id", a.cfg.NodeID())
			return err
		default:
			a.setHealth(func(h *Health) { h.State, h.Error = StateFailing, err.Error() })
			if msg := err.Error(); msg != lastErr {
				a.log.Warn("status report failed", "node_id", a.cfg.NodeID(), "error", msg)
				lastErr = msg
			}
		}
		timer.Reset(a.cfg.ReportPeriod + rand.N(a.cfg.ReportPeriod/25+1))
	}
}

// sendStatus sends a status report, and learns from the answer whether the node drains (its
// "draining" member, nodeapi.NodeSnapshot.Draining).
func (a *Agent) sendStatus(ctx context.Context) error {
	token, _ := a.credential()
	cctx, cancel := context.WithTimeout(ctx, a.cfg.ReportPeriod)
	defer cancel()
	reply, err := a.wire.post(cctx, nodeapi.StatusPath(a.cfg.NodeID()), token, a.StatusRequest())
	if err != nil {
		return err
	}
	var draining bool
	if raw, ok := reply["draining"]; ok {
		_ = json.Unmarshal(raw, &draining)
	}
	if run := a.runner(); run != nil {
		run.setDraining(draining)
	}
	return nil
}

// runner returns the agent's runner (nil before Serve set it up).
func (a *Agent) runner() *runner {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run
}

// Labels returns the labels the agent registers with: a Cubelet's (hostname and metadata name
// = the node IP, instance type, OS and architecture) plus cubefleet's (role, runtime, sandbox
// network and S3 store; see the Label* constants).
func (a *Agent) Labels() map[string]string {
	ip := a.cfg.NodeID()
	arch := map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[a.facts.Arch]
	if arch == "" {
		arch = labelValue(a.facts.Arch)
	}
	l := map[string]string{
		"kubernetes.io/hostname":                    ip,
		"kubernetes.io/metadata.name":               ip,
		"cube.cloud.tencentcloud.com/instance-type": nodeapi.InstanceType,
		"beta.kubernetes.io/instance-type":          nodeapi.InstanceType,
		"kubernetes.io/os":                          "linux",
		"beta.kubernetes.io/os":                     "linux",
		"kubernetes.io/arch":                        arch,
		"beta.kubernetes.io/arch":                   arch,
		LabelRole:                                   string(a.cfg.Role),
		nodeapi.LabelRuntime:                        string(a.cfg.Runtime),
		LabelNetworkCIDR:                            labelValue(a.cfg.NetworkCIDR.String()),
	}
	if hp := a.cfg.S3.HostPort(); hp != "" {
		host, port, _ := net.SplitHostPort(hp)
		l[LabelS3Scheme] = strings.SplitN(a.cfg.S3.Endpoint, ":", 2)[0]
		l[LabelS3Port] = port
		// Values are reported as they are or not at all: a host a label value cannot hold
		// (an IPv6 address, a name longer than 63 characters) is left out, not mangled.
		if validLabelValue(host) {
			l[LabelS3Host] = host
		}
		if validLabelValue(a.cfg.S3.Bucket) {
			l[LabelS3Bucket] = a.cfg.S3.Bucket
		}
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}

// RegisterRequest returns the body of the next registration.
func (a *Agent) RegisterRequest() *nodeapi.RegisterRequest {
	res := nodeapi.Resources{MilliCPU: a.quota.MilliCPU, MemoryMB: a.quota.MemMB}
	return &nodeapi.RegisterRequest{
		RequestID:           newRequestID(),
		NodeID:              a.cfg.NodeID(),
		HostIP:              a.cfg.NodeID(),
		Labels:              a.Labels(),
		Capacity:            res,
		Allocatable:         res,
		InstanceType:        nodeapi.InstanceType,
		ClusterLabel:        a.cfg.ClusterLabel,
		QuotaCPU:            a.quota.MilliCPU,
		QuotaMemMB:          a.quota.MemMB,
		CreateConcurrentNum: a.quota.CreateConcurrentNum,
		MaxMVMNum:           a.quota.MaxMVMNum,
		Versions:            []nodeapi.ComponentVersion{a.ver},
		HostFacts:           a.hostFacts(),
	}
}

func (a *Agent) hostFacts() *nodeapi.HostFacts {
	f := a.facts
	return &nodeapi.HostFacts{
		CPUVendor:             f.CPUVendor,
		CPUModel:              f.CPUModel,
		CPUIDHash:             f.CPUIDHash(),
		HostKernelRelease:     f.KernelRelease,
		HostKernelFingerprint: f.KernelFingerprint(),
		KVMAPIVersion:         int64(f.KVMAPIVersion),
		CPUCount:              f.CPUCount,
		MemTotalMB:            f.MemTotalMiB(),
	}
}

// readiness returns the Ready condition's status, reason and message: not ready when the
// runtime's driver could not be opened (SandboxRuntimeUnavailable, with why: for microvm, e.g.
// no accelerator boots a guest; a host without /dev/kvm runs its guests under TCG).
func (a *Agent) readiness() (bool, string, string) {
	a.mu.Lock()
	broken := a.runtimeErr
	a.mu.Unlock()
	if broken != "" {
		return false, "SandboxRuntimeUnavailable", broken
	}
	return true, "AgentReady", "cubefleet agent is posting ready status"
}

// StatusRequest returns the body of the next status report: one Ready condition, the templates
// prepared on the node (local_templates, [] when none), what its sandboxes hold (allocated:
// their CPU and memory limits, mvm_num the sandboxes it holds, mvm_running_num those running a
// command, the rest being warm), the ids of those sandboxes (sandboxes, [] when none), the disk
// usage of the state directory's file system (data and storage) and of the root file system
// (sys), the quota, versions and host facts.
func (a *Agent) StatusRequest() *nodeapi.StatusRequest {
	now := a.now().UTC()
	ts := now.Format(time.RFC3339)
	ready, reason, msg := a.readiness()
	a.mu.Lock()
	if a.transition.IsZero() || ready != a.ready {
		a.ready, a.transition = ready, now
	}
	transition := a.transition.Format(time.RFC3339)
	a.mu.Unlock()
	status := "False"
	if ready {
		status = "True"
	}
	quota := a.quota
	templates, allocated, sandboxes := []nodeapi.LocalTemplate{}, nodeapi.Allocated{}, []string{}
	if run := a.runner(); run != nil {
		templates, allocated, sandboxes = run.localTemplates(), run.allocated(), run.live()
	}
	req := &nodeapi.StatusRequest{
		RequestID:      newRequestID(),
		Conditions:     []nodeapi.Condition{{Type: "Ready", Status: status, LastHeartbeatTime: ts, LastTransitionTime: transition, Reason: reason, Message: msg}},
		LocalTemplates: nodeapi.RawOf(templates),
		HeartbeatTime:  nodeapi.WireTime{Time: now.Truncate(time.Second)},
		Allocated:      &allocated,
		MetricTime:     nodeapi.WireTime{Time: now.Truncate(time.Second)},
		Quota:          &quota,
		Versions:       nodeapi.RawOf([]nodeapi.ComponentVersion{a.ver}),
		HostFacts:      nodeapi.RawOf(*a.hostFacts()),
		Sandboxes:      sandboxes,
	}
	data, err1 := diskUsedPercent(a.cfg.StateDir)
	sys, err2 := diskUsedPercent(a.cfg.Host.Path("/"))
	if err1 == nil && err2 == nil {
		req.DiskUsage = &nodeapi.DiskUsage{DataDiskUsagePer: data, StorageDiskUsagePer: data, SysDiskUsagePer: sys}
	}
	return req
}

// labelValue makes s a valid label value: characters other than [A-Za-z0-9._-] become "_",
// leading and trailing non-alphanumerics are dropped, and it is cut to 63 characters.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.TrimFunc(string(b), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}

// validLabelValue reports whether s is a valid label value (at most 63 characters of
// [A-Za-z0-9._-], starting and ending with a letter or digit).
func validLabelValue(s string) bool { return s == "" || labelValue(s) == s }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
