package hostsetup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// DefaultCheckInterval is how often Check probes again while a check fails (quickcheck's 2 s).
const DefaultCheckInterval = 2 * time.Second

// The checks' names, in the order Check runs and reports them.
const (
	CheckLocalAgent   = "local agent"   // GET http://<listen>/healthz answers 200 with state "reporting" and the node Ready
	CheckControlPlane = "control plane" // GET <endpoint>/internal/v1/node-agent/readyz answers ret_code 200
	CheckNodeListed   = "node listed"   // GET <endpoint>/internal/v1/nodes/<node id> contains "IP":"<node ip>"
	CheckS3           = "S3 endpoint"   // CUBE_S3_ENDPOINT accepts a TCP connection
	CheckIsolation    = "isolation"     // what the process runtime enforces on its sandboxes here (process.Expected)
)

// Outcomes of a check.
const (
	CheckOK   = "ok"
	CheckFail = "FAIL"
	CheckSkip = "skip"
)

// CheckOptions tune Check; the zero value is usable.
type CheckOptions struct {
	// Timeout is how long Check keeps probing until every check passes; 0 probes once. A
	// failure that retrying cannot fix (CheckResult.Final) ends it at once.
	Timeout time.Duration
	// Interval is the pause between rounds; 0 means DefaultCheckInterval.
	Interval time.Duration
	// HTTPClient makes the probes; nil: 5 s to connect (as cfg.DialContext), 10 s per request,
	// no redirects, TLS as cfg.TLSClientConfig.
	HTTPClient *http.Client
	// StateDir is where the node credential is read from (it is sent with the node listing
	// when present); "" means cfg.StateDir.
	StateDir string
	// Progress, when set, is called after each round that did not pass every check and is
	// followed by another (nil: Check is silent until it returns).
	Progress func(CheckRound)
}

// CheckRound is one round of Check that did not pass every check and is followed by another.
type CheckRound struct {
	Attempt int           // the round, from 1
	Results []CheckResult // every check's result so far (one that passed keeps its result)
	Next    time.Duration // the pause before the next round
	Left    time.Duration // the time left until the Timeout
}

// String renders r for people watching a check wait: "attempt 3: 2 of 4 checks pass; waiting
// for local agent, node listed (again in 2s; 1m54s left)".
func (r CheckRound) String() string {
	pass, skipped := 0, 0
	var waiting []string
	for _, c := range r.Results {
		switch c.Status {
		case CheckOK:
			pass++
		case CheckSkip:
			skipped++
		default:
			waiting = append(waiting, c.Name)
		}
	}
	s := fmt.Sprintf("attempt %d: %d of %d checks pass", r.Attempt, pass, len(r.Results)-skipped)
	if skipped > 0 {
		s += fmt.Sprintf(" (%d skipped)", skipped)
	}
	return s + fmt.Sprintf("; waiting for %s (again in %s; %s left)", strings.Join(waiting, ", "), r.Next, r.Left.Round(time.Second))
}

// CheckResult is the outcome of one check.
type CheckResult struct {
	Name   string `json:"name"`   // CheckLocalAgent, CheckControlPlane, CheckNodeListed or CheckS3
	Status string `json:"status"` // CheckOK, CheckFail or CheckSkip
	Detail string `json:"detail"` // what was probed and what answered, or how to fix it
	// Final marks a failure that probing again cannot fix (the agent decided it at its start,
	// or the settings name another node): it takes a change and a restart, so Check stops.
	Final bool `json:"final,omitempty"`
}

// String renders r as one line: "ok    local agent: http://10.0.0.5:9999/healthz: reporting".
func (r CheckResult) String() string {
	return fmt.Sprintf("%-5s %s: %s", r.Status, r.Name, r.Detail)
}

// Check is `cubefleet agent check` (Cube's quickcheck.sh in compute mode): the local agent is
// healthy, the control plane is reachable, this node is listed under
// /internal/v1/nodes/{node_id} with "IP":"<node ip>", the S3 endpoint answers on TCP (skipped
// when none is configured), and which isolation the process runtime gives sandboxes on this
// host, run as this user (a failure when it cannot run them; skipped for the microvm runtime).
// It probes every Interval until all pass, Timeout passes, ctx is done or a check fails in a
// way that retrying cannot fix (Final: the agent reports its node not Ready for what it found at
// its start, its credential was revoked, it serves another node, or the process runtime cannot
// run sandboxes here), and returns the last result of each check and whether all passed.
func Check(ctx context.Context, cfg *agent.Config, opt CheckOptions) ([]CheckResult, bool) {
	if opt.Interval <= 0 {
		opt.Interval = DefaultCheckInterval
	}
	hc := opt.HTTPClient
	if hc == nil {
		hc = &http.Client{
			Timeout:       10 * time.Second,
			Transport:     &http.Transport{DialContext: cfg.DialContext(&net.Dialer{Timeout: 5 * time.Second}), TLSClientConfig: cfg.TLSClientConfig()},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		defer hc.CloseIdleConnections()
	}
	stateDir := opt.StateDir
	if stateDir == "" {
		stateDir = cfg.StateDir
	}
	prober := agent.NewProber(cfg, hc)
	probes := []func(context.Context) CheckResult{
		func(ctx context.Context) CheckResult { return checkLocal(ctx, prober, cfg) },
		func(ctx context.Context) CheckResult { return checkReady(ctx, prober, cfg) },
		func(ctx context.Context) CheckResult { return checkListed(ctx, prober, cfg, stateDir) },
		func(ctx context.Context) CheckResult { return checkS3(ctx, cfg) },
		func(ctx context.Context) CheckResult { return checkIsolation(ctx, cfg) },
	}
	results := make([]CheckResult, len(probes))
	deadline := time.Now().Add(opt.Timeout)
	for attempt := 1; ; attempt++ {
		all := true
		for i, p := range probes {
			if results[i].Status == CheckOK || results[i].Status == CheckSkip {
				continue
			}
			results[i] = p(ctx)
			if results[i].Status == CheckFail {
				all = false
			}
		}
		if all {
			return results, true
		}
		if slices.ContainsFunc(results, func(r CheckResult) bool { return r.Final }) {
			return results, false
		}
		left := time.Until(deadline)
		if left < opt.Interval {
			return results, false
		}
		if opt.Progress != nil {
			opt.Progress(CheckRound{Attempt: attempt, Results: slices.Clone(results), Next: opt.Interval, Left: left})
		}
		select {
		case <-ctx.Done():
			return results, false
		case <-time.After(opt.Interval):
		}
	}
}

// checkLocal is CheckLocalAgent: the agent's health endpoint answers 200, for this node, reporting.
func checkLocal(ctx context.Context, p *agent.Prober, cfg *agent.Config) CheckResult {
	r := CheckResult{Name: CheckLocalAgent, Status: CheckFail}
	url := cfg.HealthURL()
	code, body, err := p.Get(ctx, url, "")
	var h agent.Health
	switch {
	case err != nil:
		r.Detail = fmt.Sprintf("%s: %v (is the agent running? systemctl status %s)", url, err, UnitName)
	case json.Unmarshal(body, &h) != nil || h.State == "":
		r.Detail = fmt.Sprintf("%s: HTTP %d, not a cubefleet agent's health answer", url, code)
	case code != http.StatusOK:
		r.Detail = fmt.Sprintf("%s: %s: %s", url, h.State, h.Error)
		r.Final = h.State == agent.StateRevoked // a new join token and a restart
	case h.NodeID != cfg.NodeID():
		r.Detail = fmt.Sprintf("%s: the agent there reports node %s, not %s", url, h.NodeID, cfg.NodeID())
		r.Final = true
	case h.State != agent.StateReporting:
		// Registering (not registered yet, or again) or failing (its last report failed): the
		// agent runs, but the control plane does not hear from it.
		r.Detail = url + ": " + h.State + ifNotEmpty(": ", h.Error)
	case h.NotReady != "":
		// Reporting, but the node says it is not Ready: nothing will be placed on it.
		// The agent decides this at its start: only a restart after the fix changes it.
		r.Detail = url + ": reporting, but the node reports itself not Ready (" + h.NotReady + "); fix that and restart the agent"
		r.Final = true
	default:
		r.Status, r.Detail = CheckOK, url+": "+h.State
	}
	return r
}

// checkReady is CheckControlPlane: some endpoint's readyz answers a 2xx that Cubelet accepts.
func checkReady(ctx context.Context, p *agent.Prober, cfg *agent.Config) CheckResult {
	r := CheckResult{Name: CheckControlPlane, Status: CheckFail}
	var fails []string
	firewall := false // some endpoint could not be reached at all
	for _, ep := range cfg.ControlPlane {
		url := ep + nodeapi.PathReadyz
		code, body, err := p.Get(ctx, url, "")
		switch {
		case err != nil:
			err = p.Hint(ctx, ep, err)
			fails = append(fails, fmt.Sprintf("%s: %v", url, err))
			firewall = firewall || unreachable(err)
		case code < 200 || code >= 300:
			fails = append(fails, url+": "+agent.DescribeAnswer(ep, code, body))
		default:
			if err := agent.AcceptReply(body); err != nil {
				fails = append(fails, fmt.Sprintf("%s: %v", url, err))
				continue
			}
			r.Status, r.Detail = CheckOK, url+": ready"
			return r
		}
	}
	r.Detail = strings.Join(fails, "; ")
	if firewall {
		r.Detail += " (check the firewall: TCP " + portsOf(cfg.ControlPlane) + " to the control plane)"
	}
	return r
}

// unreachable reports whether err means the endpoint could not be reached at all (connection
// refused, a timeout, no route), which a firewall or a wrong address explains; an HTTP
// answer or a TLS failure is not that.
func unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// portsOf returns the distinct ports of the endpoints eps, comma-separated.
func portsOf(eps []string) string {
	seen := map[string]bool{}
	var ports []string
	for _, ep := range eps {
		if i := strings.LastIndex(ep, ":"); i >= 0 && !seen[ep[i+1:]] {
			seen[ep[i+1:]] = true
			ports = append(ports, ep[i+1:])
		}
	}
	return strings.Join(ports, ",")
}

// checkListed is CheckNodeListed: some endpoint lists this node, asked with the node credential
// from stateDir (none when the state file belongs to another node or cannot be read).
func checkListed(ctx context.Context, p *agent.Prober, cfg *agent.Config, stateDir string) CheckResult {
	r := CheckResult{Name: CheckNodeListed, Status: CheckFail}
	var token agent.Secret
	st, stErr := agent.ReadState(stateDir)
	if stErr == nil && st.NodeID == cfg.NodeID() {
		token = agent.Secret(st.NodeCredential)
	}
	// What to do about a node that is not registered: the agent's log says why it is not, and
	// a new node (or a deleted one) needs a join token.
	join := fmt.Sprintf("see the agent's log (journalctl -u %s); a node joins with a join token: cubefleet nodes join-token create --pool <pool> --ip %s on the control plane, then CUBEFLEET_JOIN_TOKEN_FILE and a restart of the agent", UnitName, cfg.NodeID())
	want := `"IP":"` + cfg.NodeID() + `"`
	var fails []string
	for _, ep := range cfg.ControlPlane {
		url := ep + nodeapi.NodePath(cfg.NodeID())
		code, body, err := p.Get(ctx, url, token)
		switch {
		case err != nil:
			fails = append(fails, fmt.Sprintf("%s: %v", url, p.Hint(ctx, ep, err)))
		case code == http.StatusNotFound:
			fails = append(fails, url+": HTTP 404: this node is not registered; "+join)
		case (code == http.StatusUnauthorized || code == http.StatusForbidden) && token == "":
			// The control plane lists a node to its own credential (or an API key), and the
			// agent has none: it has not registered (or its credential was revoked).
			why := "the agent has not registered with a join token yet"
			switch {
			case stErr != nil:
				why = "the state file cannot be read: " + stErr.Error()
			case st.NodeID == cfg.NodeID() && st.Revoked:
				why = "its credential was revoked (the node was deleted" + ifNotEmpty(" at ", st.RevokedAt) + ")"
			}
			fails = append(fails, fmt.Sprintf("%s: HTTP %d: this node has no node credential in %s (%s), so the control plane does not show it to this check; %s", url, code, filepath.Join(stateDir, agent.StateFile), why, join))
		case code == http.StatusUnauthorized:
			fails = append(fails, fmt.Sprintf("%s: HTTP 401: the control plane does not accept this node's credential (%s): the node is not registered (it was deleted, or the control plane lost it); %s", url, agent.ErrorMessage(body), join))
		case code != http.StatusOK:
			fails = append(fails, url+": "+agent.DescribeAnswer(ep, code, body))
		case !strings.Contains(string(body), want):
			fails = append(fails, fmt.Sprintf("%s: the answer does not contain %s", url, want))
		default:
			r.Status, r.Detail = CheckOK, url+" lists "+want
			return r
		}
	}
	r.Detail = strings.Join(fails, "; ")
	return r
}

// checkS3 is CheckS3: the S3 endpoint accepts a TCP connection; skipped without one.
func checkS3(ctx context.Context, cfg *agent.Config) CheckResult {
	r := CheckResult{Name: CheckS3, Status: CheckSkip, Detail: "CUBE_S3_ENDPOINT is not set"}
	hp := cfg.S3.HostPort()
	if hp == "" {
		return r
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", hp)
	if err != nil {
		r.Status, r.Detail = CheckFail, fmt.Sprintf("%s (%s): %v (allow TCP %s from this node to the S3 store)", cfg.S3.Endpoint, hp, err, hp)
		return r
	}
	conn.Close()
	r.Status, r.Detail = CheckOK, hp+" answers on TCP"
	return r
}

// checkIsolation is CheckIsolation: the process runtime's isolation on this host, as
// process.Expected describes it for this user (the agent's, when the check runs as the agent's
// user: root), with the namespaces its probes make here (Isolation.Probed, through this
// binary); a failure naming the fix when it cannot run sandboxes.
func checkIsolation(ctx context.Context, cfg *agent.Config) CheckResult {
	r := CheckResult{Name: CheckIsolation, Status: CheckSkip, Detail: "the " + string(cfg.Runtime) + " runtime runs no sandbox as a process"}
	if cfg.Runtime == agent.RuntimeMicroVM {
		return checkMicroVM(ctx, cfg)
	}
	if cfg.Runtime != agent.RuntimeProcess {
		return r
	}
	iso, err := process.Expected(cfg.SandboxAllowOwnUser)
	if err != nil {
		r.Status, r.Detail, r.Final = CheckFail, err.Error(), true // the host or the settings must change
		return r
	}
	if !iso.OwnUser {
		iso = iso.Probed("/proc/self/exe", process.DefaultFirstUID)
	}
	r.Status, r.Detail = CheckOK, "process runtime: "+iso.String()
	if missing := iso.Missing(); len(missing) > 0 {
		r.Detail += "; missing: " + strings.Join(missing, ", ")
		if cfg.RequireIsolation {
			r.Status = CheckFail
			r.Detail += " (required by CUBEFLEET_REQUIRE_ISOLATION: the agent runs no sandbox)"
		}
	}
	return r
}

// checkMicroVM boots the microvm runtime's probe guest under KVM and, when that does not boot,
// under TCG (microvm.ChooseAccel), prints which accelerator its sandboxes get and the probe's
// boot time and the cgroups its VMMs run in (microvm.DescribeCgroups), and records the choice
// for the agent (auto takes it); it fails when neither boots,
// or the guest kernel, init or QEMU is missing. A CUBEFLEET_MICROVM_ACCEL of kvm or tcg is
// probed alone.
func checkMicroVM(ctx context.Context, cfg *agent.Config) CheckResult {
	r := CheckResult{Name: CheckIsolation, Status: CheckFail}
	k, err := microvm.OpenKernel(cfg.GuestKernel)
	if err != nil {
		r.Detail = "microvm runtime: " + err.Error()
		return r
	}
	init := cfg.GuestInit
	if init == "" {
		init = "/proc/self/exe"
	}
	initrd, err := microvm.Initramfs(k, init, filepath.Join(cfg.SandboxDir, "initramfs"))
	if err != nil {
		r.Detail = "microvm runtime: " + err.Error()
		return r
	}
	var c microvm.Choice
	if cfg.MicroVMAccel == "" {
		c = microvm.ChooseAccel(ctx, microvm.QEMU{}, k.Path, initrd, microvm.MachinePC, microvm.DefaultBootTimeout)
		if err := microvm.SaveAccel(cfg.SandboxDir, initrd, c); err != nil {
			r.Detail = "microvm runtime: record the probe: " + err.Error()
			return r
		}
	} else {
		p := microvm.ProbeBoot(ctx, microvm.QEMU{}, microvm.Machine{Kernel: k.Path, Initramfs: initrd, Accel: cfg.MicroVMAccel}, microvm.DefaultBootTimeout)
		c.Probes = []microvm.Probe{p}
		if p.Booted {
			c.Accel = p.Accel
		}
	}
	if c.Accel == "" {
		r.Detail = "microvm runtime: no accelerator boots a guest, so this node refuses microvm sandboxes: " + c.String()
		return r
	}
	r.Status, r.Detail = CheckOK, fmt.Sprintf("microvm runtime: %s; sandboxes run under %s (guest kernel %s); %s; network: private no NIC, public a virtio NIC on a tap bridged to a veth with NAT to the internet only", c, strings.ToUpper(c.Accel), k.Release, microvm.DescribeCgroups(cgroups.Detect("", os.Geteuid())))
	return r
}

// ifNotEmpty returns prefix+s, or "" when s is empty.
func ifNotEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
