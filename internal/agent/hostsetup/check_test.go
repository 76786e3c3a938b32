package hostsetup

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/server/servertest"
	"github.com/cubefleet/cubefleet/internal/testkit"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

func names(results []CheckResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.Name)
	}
	return out
}

func TestCheck(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	cfg := testConfig(t, t.TempDir(), "cfj_join1", "http://"+agenttest.ClosedAddr(t), cp.URL)
	cfg.Listen = agenttest.ClosedAddr(t)
	cfg.S3.Endpoint = "http://" + agenttest.Listen(t)
	startAgent(t, cfg)
	results, ok := Check(context.Background(), cfg, CheckOptions{Timeout: 10 * time.Second, Interval: 20 * time.Millisecond})
	if !ok {
		t.Fatalf("Check failed: %v", results)
	}
	if want := []string{CheckLocalAgent, CheckControlPlane, CheckNodeListed, CheckS3, CheckIsolation}; !reflect.DeepEqual(names(results), want) {
		t.Errorf("checks %v, want %v", names(results), want)
	}
	for _, r := range results {
		if r.Status != CheckOK {
			t.Errorf("%s", r)
		}
	}
	// The first endpoint refuses connections; the check names the one that answered.
	if !strings.Contains(results[1].Detail, cp.URL+nodeapi.PathReadyz+": ready") {
		t.Errorf("control plane: %s", results[1])
	}
	iso, _ := process.Expected(cfg.SandboxAllowOwnUser)
	if !iso.OwnUser {
		iso = iso.Probed("/proc/self/exe", process.DefaultFirstUID)
	}
	if want := "process runtime: " + iso.String(); results[4].Detail != want {
		t.Errorf("isolation: %s\nwant %s", results[4], want)
	}
}

// The isolation line says what the process runtime enforces, fails when it could not run
// sandboxes (not root, not allowed to run them as the agent's own user), and is skipped for the
// microvm runtime.
func TestCheckIsolation(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), "", "http://"+agenttest.ClosedAddr(t))
	cfg.SandboxAllowOwnUser = false
	r := checkIsolation(context.Background(), cfg)
	// As root, the line says what this host offers: the cgroup controllers of each version
	// (on a hybrid host, v1's limits beside a v2 hierarchy for tracking), and the rlimits
	// standing in for each limit controller it lacks.
	cg := cgroups.Detect("", 0)
	var want []string
	if cg.Tracks() {
		want = append(want, cg.String())
	}
	if !cg.Has(cgroups.Memory) {
		want = append(want, "memory via RLIMIT_AS")
	}
	if !cg.Has(cgroups.CPU) {
		want = append(want, "CPU not limited")
	}
	switch {
	case os.Geteuid() == 0 && (r.Status != CheckOK || !strings.HasPrefix(r.Detail, "process runtime: ") || !strings.Contains(r.Detail, "RLIMIT_NOFILE")):
		t.Errorf("as root: %s", r)
	case os.Geteuid() == 0:
		// The user namespace is named in force, or missing with why.
		if iso := process.Detect(); iso.UserNamespace() {
			want = append(want, "namespaces: pid, mount, ipc, uts, net, user (user: the leased uid")
		} else if len(iso.Namespaces) > 0 {
			want = append(want, iso.UserNamespaceNote)
		}
		for _, w := range want {
			if !strings.Contains(r.Detail, w) {
				t.Errorf("as root on a host with %s: %s\nwant it to say %q", cg, r, w)
			}
		}
	case os.Geteuid() != 0 && (r.Status != CheckFail || !strings.Contains(r.Detail, "CUBEFLEET_SANDBOX_ALLOW_OWN_USER=1")):
		t.Errorf("not root: %s", r)
	}
	// The microvm runtime's line is its probe's; without a guest kernel it fails naming the
	// setting (a real probe boots in the microvm package's and the end-to-end tests).
	cfg.Runtime, cfg.GuestKernel = agent.RuntimeMicroVM, ""
	if r := checkIsolation(context.Background(), cfg); r.Status != CheckFail || !strings.Contains(r.Detail, "CUBEFLEET_GUEST_KERNEL") {
		t.Errorf("microvm: %s", r)
	}
}

func TestCheckFails(t *testing.T) {
	cp := agenttest.NewFakeCP(t) // the node never registers
	cfg := testConfig(t, t.TempDir(), "", cp.URL)
	cfg.Listen = agenttest.ClosedAddr(t)
	cfg.S3.Endpoint = "http://" + agenttest.ClosedAddr(t)
	start := time.Now()
	results, ok := Check(context.Background(), cfg, CheckOptions{})
	if ok || time.Since(start) > 5*time.Second {
		t.Fatalf("Check = %v after %s, want a single failed round", ok, time.Since(start))
	}
	want := []struct{ status, detail string }{
		{CheckFail, "connect: connection refused (is the agent running? systemctl status cubefleet-agent.service)"},
		{CheckOK, "readyz: ready"},
		{CheckFail, nodeapi.NodePath("127.0.0.1") + ": HTTP 404: this node is not registered; see the agent's log (journalctl -u cubefleet-agent.service); a node joins with a join token: cubefleet nodes join-token create --pool <pool> --ip 127.0.0.1"},
		{CheckFail, "connection refused (allow TCP"},
	}
	for i, w := range want {
		if results[i].Status != w.status || !strings.Contains(results[i].Detail, w.detail) {
			t.Errorf("%s\nwant %s containing %q", results[i], w.status, w.detail)
		}
	}
	if s := results[0].String(); !strings.HasPrefix(s, "FAIL  local agent: http://") {
		t.Errorf("line %q", s)
	}
	// No control plane at all; no S3 configured.
	cfg.ControlPlane = []string{"http://" + agenttest.ClosedAddr(t)}
	cfg.S3.Endpoint = ""
	results, _ = Check(context.Background(), cfg, CheckOptions{})
	if results[1].Status != CheckFail || !strings.Contains(results[1].Detail, "(check the firewall: TCP ") || results[3].Status != CheckSkip {
		t.Errorf("results %v", results)
	}
}

// TestCheckWaits starts the check before the agent: it polls until the agent has registered.
func TestCheckWaits(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	cfg := testConfig(t, t.TempDir(), "cfj_join1", cp.URL)
	cfg.Listen = agenttest.ClosedAddr(t)
	cfg.S3.Endpoint = ""
	done := make(chan struct{})
	var results []CheckResult
	var ok bool
	var progress testkit.SyncBuffer // one line per round that failed and is followed by another
	lastLeft := time.Hour
	second := make(chan struct{}) // closed at the second round that failed: the agent starts then
	go func() {
		results, ok = Check(context.Background(), cfg, CheckOptions{Timeout: 20 * time.Second, Interval: 50 * time.Millisecond,
			Progress: func(r CheckRound) {
				if r.Left > lastLeft || r.Left > 20*time.Second {
					t.Errorf("attempt %d: %s left after %s", r.Attempt, r.Left, lastLeft)
				}
				lastLeft = r.Left
				fmt.Fprintln(&progress, r)
				if r.Attempt == 2 {
					close(second)
				}
			}})
		close(done)
	}()
	select {
	case <-second:
	case <-done:
		t.Fatalf("Check returned before the agent started: %v", results)
	case <-time.After(20 * time.Second):
		t.Fatal("no second round of the check")
	}
	if len(cp.CallsTo("/readyz")) == 0 {
		t.Error("the check has not probed the control plane yet")
	}
	r := startAgent(t, cfg)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Check did not return")
	}
	if !ok {
		t.Errorf("Check: %v", results)
	}
	if n := len(cp.CallsTo(nodeapi.NodePath("127.0.0.1"))); n < 2 {
		t.Errorf("%d probes of the node listing, want it to have polled", n)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	first := regexp.MustCompile(`^attempt 1: 2 of 4 checks pass \(1 skipped\); waiting for local agent, node listed \(again in 50ms; (1\d|20)s left\)$`)
	if len(lines) < 2 || !first.MatchString(lines[0]) || !strings.HasPrefix(lines[1], "attempt 2: ") {
		t.Errorf("progress lines:\n%s\nwant the first to match %s", progress.String(), first)
	}
	// A revoked agent fails the local check with its reason.
	cp.DeleteNode("127.0.0.1")
	testkit.WaitFor(t, 10*time.Second, "the revocation", func() bool { return r.a.Health().State == agent.StateRevoked })
	results, ok = Check(context.Background(), cfg, CheckOptions{Timeout: 5 * time.Second, Interval: 50 * time.Millisecond})
	if ok || !strings.Contains(results[0].Detail, "revoked: the control plane revoked this node's credential") {
		t.Errorf("Check after the deletion: %v", results)
	}
}

// TestCheckLocalState: only a reporting agent passes the local check; a registering or failing
// one fails it with its state and its last error.
func TestCheckLocalState(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	var mu sync.Mutex
	failing := false
	cp.SetHook(func(r *http.Request) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		if failing && strings.HasSuffix(r.URL.Path, "/status") {
			return http.StatusInternalServerError, `{"error":"store down"}`
		}
		return 0, ""
	})
	// Registering: its only endpoint refuses connections.
	cfg := testConfig(t, t.TempDir(), "cfj_join1", "http://"+agenttest.ClosedAddr(t))
	cfg.S3.Endpoint = ""
	r := startAgent(t, cfg)
	cfg.Listen = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/healthz")
	testkit.WaitFor(t, 10*time.Second, "a failed registration", func() bool { return r.a.Health().Error != "" })
	results, ok := Check(context.Background(), cfg, CheckOptions{})
	if ok || results[0].Status != CheckFail || !strings.Contains(results[0].Detail, "/healthz: registering: http://") ||
		!strings.Contains(results[0].Detail, "connection refused") {
		t.Errorf("a registering agent: %s", results[0])
	}
	r.stop()

	// Failing: registered, then its status reports fail.
	cfg = testConfig(t, t.TempDir(), "cfj_join1", cp.URL)
	cfg.S3.Endpoint = ""
	r = startAgent(t, cfg)
	cfg.Listen = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/healthz")
	testkit.WaitFor(t, 10*time.Second, "reporting", func() bool { return r.a.Health().LastReportAt != "" })
	if results, ok := Check(context.Background(), cfg, CheckOptions{}); !ok || results[0].Detail != r.url+": reporting" {
		t.Errorf("a reporting agent: %v", results)
	}
	mu.Lock()
	failing = true
	mu.Unlock()
	// Failing with the control plane's answer (a busy machine can also time a report out first).
	testkit.WaitFor(t, 20*time.Second, "failing with HTTP 500", func() bool {
		h := r.a.Health()
		return h.State == agent.StateFailing && strings.Contains(h.Error, "HTTP 500")
	})
	results, ok = Check(context.Background(), cfg, CheckOptions{})
	if want := r.url + ": failing: " + cp.URL + ": HTTP 500: store down"; ok || results[0].Status != CheckFail || results[0].Detail != want {
		t.Errorf("a failing agent: %s\nwant FAIL %s", results[0], want)
	}
}

// TestCheckNodeNotReady: an agent that reports but whose node says it is not Ready (here, run as
// root, its sandbox directory sits in a 0700 directory the sandboxes' users cannot reach, so the
// process runtime cannot open) fails the local check with the reason, instead of passing while nothing
// can be placed on the node, and at once: only a restart after the fix changes it.
func TestCheckNodeNotReady(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes run as users of their own only under root: needs root")
	}
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	cfg := testConfig(t, t.TempDir(), "cfj_join1", cp.URL)
	cfg.S3.Endpoint = ""
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.SandboxDir = filepath.Join(private, "sandboxes")
	cfg.SandboxAllowOwnUser = false
	r := startAgent(t, cfg)
	cfg.Listen = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/healthz")
	testkit.WaitFor(t, 10*time.Second, "reporting", func() bool { return r.a.Health().LastReportAt != "" })
	// Retrying cannot fix it (the agent decided at its start): the check stops at once rather
	// than at its timeout.
	start := time.Now()
	results, ok := Check(context.Background(), cfg, CheckOptions{Timeout: time.Minute, Interval: 50 * time.Millisecond})
	if ok || results[0].Status != CheckFail || !results[0].Final || !strings.Contains(results[0].Detail, "reporting, but the node reports itself not Ready (SandboxRuntimeUnavailable: ") {
		t.Errorf("an agent whose node is not Ready: %s (%+v)", results[0], r.a.Health())
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the check took %s of its 1m timeout on a failure retrying cannot fix", took)
	}
}

// TestCheckNodeNotRegistered runs the check against a real control plane that does not know
// the node: without a credential the control plane answers 401 (it lists a node only to its
// own credential or an API key), which the check explains as "no credential yet" with what to
// do, instead of relaying the API-key advice meant for people.
func TestCheckNodeNotRegistered(t *testing.T) {
	cp := servertest.StartControlPlane(t, server.Config{}, "")
	dir := t.TempDir()
	cfg := testConfig(t, dir, "", cp.Server.InternalURL())
	for _, tc := range []struct {
		name  string
		state *agent.State
		want  string
	}{
		{"no state file", nil, "HTTP 401: this node has no node credential in " + filepath.Join(dir, agent.StateFile) + " (the agent has not registered with a join token yet), so the control plane does not show it to this check; see the agent's log (journalctl -u cubefleet-agent.service); a node joins with a join token: cubefleet nodes join-token create --pool <pool> --ip 127.0.0.1"},
		{"revoked", &agent.State{NodeID: "127.0.0.1", Revoked: true, RevokedAt: "2026-05-04T03:02:01Z"}, "(its credential was revoked (the node was deleted at 2026-05-04T03:02:01Z))"},
		{"a credential the control plane does not know", &agent.State{NodeID: "127.0.0.1", NodeCredential: "cfn_unknown"},
			"HTTP 401: the control plane does not accept this node's credential (unknown or revoked node credential (a deleted node needs a new join token)): the node is not registered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, agent.StateFile))
			if tc.state != nil {
				if err := agent.WriteState(dir, *tc.state); err != nil {
					t.Fatal(err)
				}
			}
			results, ok := Check(context.Background(), cfg, CheckOptions{})
			if r := results[2]; ok || r.Status != CheckFail || !strings.Contains(r.Detail, tc.want) || strings.Contains(r.Detail, "API key") {
				t.Errorf("%s\nwant FAIL containing %q", r, tc.want)
			}
		})
	}
}

// TestCheckHints: the firewall hint goes only with errors that mean "not reachable"; an HTTP
// answer or a TLS failure gets its own advice.
func TestCheckHints(t *testing.T) {
	const firewall = "check the firewall"
	const hintHTTPS = "the control plane speaks HTTPS: set CUBEFLEET_CONTROL_PLANE_TLS=1 (and CUBEFLEET_CA_FILE, unless the system trusts its CA), or write https:// in the address"
	refused := "http://" + agenttest.ClosedAddr(t)
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"starting"}`)
	}))
	t.Cleanup(unavailable.Close)
	ready := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"ret":{"ret_code":200}}`) })
	good, trust := agenttest.TLSServer(t, "", ready)
	// A certificate for 127.0.0.1 served on 127.0.0.3: it does not name the address used.
	other, _ := agenttest.TLSServer(t, "127.0.0.3:0", ready)
	for _, tc := range []struct {
		name     string
		endpoint string
		trust    bool
		want     []string
		not      []string
	}{
		{"connection refused", refused, false, []string{"connection refused", firewall}, nil},
		{"an HTTP answer", unavailable.URL, false, []string{"HTTP 503 starting"}, []string{firewall}},
		{"plain HTTP to HTTPS", "http://" + good.Listener.Addr().String(), true, []string{hintHTTPS}, []string{firewall}},
		{"unknown CA", good.URL, false, []string{"certificate signed by unknown authority", "set CUBEFLEET_CA_FILE"}, []string{firewall}},
		{"name mismatch", strings.Replace(other.URL, "127.0.0.1", "127.0.0.3", 1), true,
			[]string{"x509: certificate is valid for 127.0.0.1, not 127.0.0.3", "the control plane's TLS certificate does not name the address used, 127.0.0.3: reissue it"},
			[]string{firewall, "CUBEFLEET_CA_FILE"}},
		{"ok", good.URL, true, []string{"ready"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir(), "", tc.endpoint)
			if tc.trust {
				cfg.RootCAs = trust
			}
			results, _ := Check(context.Background(), cfg, CheckOptions{})
			d := results[1].Detail
			for _, w := range tc.want {
				if !strings.Contains(d, w) {
					t.Errorf("%s\nwant it to contain %q", results[1], w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(d, w) {
					t.Errorf("%s\nwant it not to contain %q", results[1], w)
				}
			}
		})
	}
}

// TestCheckTakesNoLock: agent check only reads the state directory of the agent running beside
// it (the agent holds the directory's lock; see agent's TestStateDirLock).
func TestCheckTakesNoLock(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	dir := filepath.Join(t.TempDir(), "state")
	first := startAgent(t, testConfig(t, dir, "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "reporting", func() bool { return first.a.Health().LastReportAt != "" })

	// Checking while the agent runs takes no lock.
	checkCfg := testConfig(t, dir, "", cp.URL)
	checkCfg.Listen = strings.TrimSuffix(strings.TrimPrefix(first.url, "http://"), "/healthz")
	if results, _ := Check(context.Background(), checkCfg, CheckOptions{StateDir: dir}); results[0].Status != CheckOK || results[2].Status != CheckOK {
		t.Errorf("check beside the running agent: %+v", results)
	}
}

// TestCheckLoopbackNode: agent check of the single-host demo's node 127.0.0.11 (see agent's
// TestLoopbackNodeJoins) passes against a real control plane: it connects from the node's
// address, as the agent does.
func TestCheckLoopbackNode(t *testing.T) {
	cp := servertest.StartControlPlane(t, server.Config{}, "")
	cfg := testConfig(t, t.TempDir(), cp.JoinToken(t, "127.0.0.11"), cp.Server.InternalURL())
	cfg.NodeIP, cfg.Listen, cfg.S3.Endpoint = netip.MustParseAddr("127.0.0.11"), "127.0.0.11:0", ""
	r := startAgent(t, cfg)
	testkit.WaitFor(t, 10*time.Second, "a status report", func() bool { return r.a.Health().LastReportAt != "" })
	// agent check, from the same address.
	chk := *cfg
	chk.Listen = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/healthz")
	if results, ok := Check(context.Background(), &chk, CheckOptions{}); !ok {
		t.Errorf("Check: %v", results)
	}
}

// TestCheckOverTLS runs a real control plane whose node-agent routes are on an HTTPS
// --internal-listen and an agent that joined it over https:// (see agent's
// TestRegisterOverTLS): Check passes with the agent's settings; without the CA it fails saying
// to set CUBEFLEET_CA_FILE, and plain http:// to the HTTPS listener is refused and said so.
func TestCheckOverTLS(t *testing.T) {
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	ctx := context.Background()
	cp := servertest.StartControlPlane(t, server.Config{TLSCert: files.Cert, TLSKey: files.Key}, files.CA)
	srv := cp.Server
	roots, err := capool.Load(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, filepath.Join(dir, "state"), cp.JoinToken(t, "127.0.0.1"), srv.InternalURL())
	cfg.RootCAs, cfg.CAFile = roots, files.CA
	cfg.S3.Endpoint = ""
	r := startAgent(t, cfg)
	testkit.WaitFor(t, 10*time.Second, "a status report over TLS", func() bool {
		return r.a.Health().State == agent.StateReporting && r.a.Health().LastReportAt != ""
	})

	// agent check, with the same settings (a copy: the running agent reads cfg).
	chk := *cfg
	chk.Listen = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/healthz")
	results, ok := Check(ctx, &chk, CheckOptions{Timeout: 5 * time.Second, Interval: 20 * time.Millisecond})
	if !ok {
		t.Fatalf("Check over TLS failed: %v", results)
	}
	if want := srv.InternalURL() + nodeapi.PathReadyz + ": ready"; results[1].Detail != want {
		t.Errorf("control plane: %s, want %s", results[1], want)
	}
	if !strings.HasPrefix(results[2].Detail, srv.InternalURL()+nodeapi.NodePath("127.0.0.1")+" lists") {
		t.Errorf("node listed: %s", results[2])
	}

	// Without the CA: the control plane's certificate does not verify, and the check says
	// what to set.
	chk.RootCAs, chk.CAFile = nil, ""
	results, ok = Check(ctx, &chk, CheckOptions{})
	if ok || results[1].Status != CheckFail || !strings.Contains(results[1].Detail, "x509: certificate signed by unknown authority") ||
		!strings.Contains(results[1].Detail, "set CUBEFLEET_CA_FILE or --ca-file") {
		t.Errorf("Check without the CA: %v", results)
	}
	// Plain http:// to the HTTPS listener is refused, and said so.
	chk.ControlPlane = []string{"http://" + strings.TrimPrefix(srv.InternalURL(), "https://")}
	results, _ = Check(ctx, &chk, CheckOptions{})
	if results[1].Status != CheckFail || !strings.Contains(results[1].Detail, "HTTP 400 Client sent an HTTP request to an HTTPS server") {
		t.Errorf("Check over plain HTTP: %v", results)
	}
}
