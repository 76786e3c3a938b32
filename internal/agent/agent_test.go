package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

const testPeriod = 100 * time.Millisecond

// testConfig is a compute node on 127.0.0.1 (fake host "compute") reporting to endpoints every
// testPeriod, with its state in stateDir.
func testConfig(stateDir string, join string, endpoints ...string) *Config {
	return &Config{
		Role: RoleCompute, ControlPlane: endpoints, NodeIP: netip.MustParseAddr("127.0.0.1"), AllowLoopback: true,
		S3:          S3{Endpoint: "http://127.0.0.1:9000", Bucket: DefaultS3Bucket},
		NetworkCIDR: netip.MustParsePrefix(DefaultNetworkCIDR), JoinToken: Secret(join),
		Listen: "127.0.0.1:0", StateDir: stateDir, ReportPeriod: testPeriod, ClusterLabel: DefaultClusterLabel,
		Runtime: RuntimeProcess, Host: testHost("compute"),
	}
}

// running is an agent serving on 127.0.0.1 until the test ends (or stop is called).
type running struct {
	a      *Agent
	url    string // the health endpoint
	logs   *testkit.SyncBuffer
	stop   func()
	sleeps func() []time.Duration // the registration backoffs so far
}

// startAgent runs an agent for cfg; its registration backoff is recorded and shortened to 1 ms.
// A process runtime without a sandbox directory gets one of the test's.
func startAgent(t *testing.T, cfg *Config) *running {
	t.Helper()
	if cfg.Runtime == RuntimeProcess && cfg.SandboxDir == "" {
		cfg.SandboxDir, cfg.SandboxAllowOwnUser, cfg.SandboxOutputLimit = agenttest.SandboxDir(t), os.Geteuid() != 0, 1<<20
	}
	logs := &testkit.SyncBuffer{}
	a, err := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sleeps []time.Duration
	a.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		sleeps = append(sleeps, d)
		mu.Unlock()
		return sleepCtx(ctx, time.Millisecond)
	}
	addr, stop := agenttest.Serve(t, cfg.Listen, a.Serve)
	r := &running{a: a, url: "http://" + addr + "/healthz", logs: logs, stop: stop}
	r.sleeps = func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), sleeps...)
	}
	return r
}

func getHealth(t *testing.T, url string) (int, Health) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

// TestFirstStatusAtOnce: the first status report goes out as soon as the node registered, not
// a period later: with the longest period (a minute), a status arrives while the test waits
// half of it.
func TestFirstStatusAtOnce(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	cfg := testConfig(filepath.Join(t.TempDir(), "state"), "cfj_join1", cp.URL)
	cfg.ReportPeriod = MaxReportPeriod
	startAgent(t, cfg)
	testkit.WaitFor(t, MaxReportPeriod/2, "the first status report", func() bool { return len(cp.CallsTo("/status")) > 0 })
	if regs := cp.CallsTo("/register"); len(regs) != 1 {
		t.Errorf("registrations %+v, want one", regs)
	}
}

func TestReportLoop(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	dir := filepath.Join(t.TempDir(), "state")
	cfg := testConfig(dir, "cfj_join1", cp.URL)
	r := startAgent(t, cfg)
	testkit.WaitFor(t, 10*time.Second, "4 status reports", func() bool { return len(cp.CallsTo("/status")) >= 4 })

	regs := cp.CallsTo("/register")
	if len(regs) != 1 || regs[0].Auth != "Bearer cfj_join1" {
		t.Fatalf("registrations %+v, want one with the join token", regs)
	}
	statuses := cp.CallsTo("/status")
	for i, s := range statuses {
		if s.Path != nodeapi.StatusPath("127.0.0.1") || s.Auth != "Bearer cfn_node1_secret" {
			t.Errorf("status %d: %s with %q, want the node credential", i, s.Path, s.Auth)
		}
		// The next report waits a period after the previous one answered, so never less (a
		// busy machine may make it more).
		if i > 0 {
			if gap := s.At.Sub(statuses[i-1].At); gap < testPeriod {
				t.Errorf("status %d came %s after the previous one, want at least %s", i, gap, testPeriod)
			}
		}
	}
	// The credential is stored 0600 in a 0700 directory.
	fi, err := os.Stat(filepath.Join(dir, StateFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v", fi, err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode %04o", di.Mode().Perm())
	}
	st, err := ReadState(dir)
	if err != nil || st.NodeID != "127.0.0.1" || st.NodeCredential != "cfn_node1_secret" || st.JoinTokenSHA256 != tokenHash("cfj_join1") || st.Revoked {
		t.Errorf("state %+v, %v", st, err)
	}
	testkit.WaitFor(t, 10*time.Second, "healthz reporting", func() bool {
		code, h := getHealth(t, r.url)
		return code == 200 && h.State == StateReporting && h.NodeID == "127.0.0.1" && h.LastReportAt != "" && h.RegisteredAt != ""
	})
	r.stop()

	// A restart registers with the stored credential; the join token was used up.
	r = startAgent(t, testConfig(dir, "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "registration after the restart", func() bool { return len(cp.CallsTo("/register")) >= 2 })
	testkit.WaitFor(t, 10*time.Second, "a status report after the restart", func() bool { return r.a.Health().State == StateReporting })
	if got := cp.CallsTo("/register")[1].Auth; got != "Bearer cfn_node1_secret" {
		t.Errorf("registration after a restart sent %q, want the node credential", got)
	}
	r.stop()
	for _, secret := range []string{"cfj_join1", "cfn_node1_secret"} {
		if strings.Contains(r.logs.String(), secret) {
			t.Errorf("the log shows a token:\n%s", r.logs.String())
		}
	}
}

func TestRegisterBackoff(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	var mu sync.Mutex
	fails := 10
	cp.SetHook(func(r *http.Request) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/register") && fails > 0 {
			fails--
			return http.StatusServiceUnavailable, `{"error":"starting"}`
		}
		return 0, ""
	})
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "a status report", func() bool { return len(cp.CallsTo("/status")) > 0 })
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 7000 * ms, 7000 * ms, 7000 * ms}
	if got := r.sleeps(); !reflect.DeepEqual(got, want) {
		t.Errorf("backoffs %v, want %v", got, want)
	}
	if n := len(cp.CallsTo("/register")); n != len(want)+1 {
		t.Errorf("%d registrations, want %d", n, len(want)+1)
	}
	if !strings.Contains(r.logs.String(), `"msg":"registration failed; retrying"`) {
		t.Errorf("no retry in the log:\n%s", r.logs.String())
	}
}

func TestFailoverTransportError(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", "http://"+agenttest.ClosedAddr(t), cp.URL))
	testkit.WaitFor(t, 10*time.Second, "3 status reports", func() bool { return len(cp.CallsTo("/status")) >= 3 })
	if n := len(cp.CallsTo("/register")); n != 1 {
		t.Errorf("%d registrations, want 1 (the refused endpoint failed over at once)", n)
	}
	if len(r.sleeps()) != 0 {
		t.Errorf("backoffs %v, want none", r.sleeps())
	}
}

func TestFailover5xx(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	a, b := cp.URL, cp.Replica()
	var mu sync.Mutex
	failing := strings.TrimPrefix(a, "http://")
	cp.SetHook(func(r *http.Request) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		if r.Host == failing {
			return http.StatusBadGateway, "<html>bad gateway</html>"
		}
		return 0, ""
	})
	hostCalls := countByHost(cp)
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", a, b))
	testkit.WaitFor(t, 10*time.Second, "3 status reports", func() bool { return len(cp.CallsTo("/status")) >= 3 })
	if got := hostCalls(a); got != 1 {
		t.Errorf("%d calls to the failing endpoint, want 1 (the agent stays on the one that answers)", got)
	}
	// Now the second one fails and the first recovers: the agent fails over back.
	mu.Lock()
	failing = strings.TrimPrefix(b, "http://")
	mu.Unlock()
	before := hostCalls(a)
	testkit.WaitFor(t, 10*time.Second, "status reports to the first endpoint", func() bool { return hostCalls(a) >= before+3 })
	if h := r.a.Health(); h.State != StateReporting {
		t.Errorf("health %+v, want reporting", h)
	}
}

// TestFailoverHangingEndpoint: an endpoint that accepts and never answers costs one report
// period; the next report goes to the next endpoint.
func TestFailoverHangingEndpoint(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	a, b := cp.URL, cp.Replica()
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", a, b))
	testkit.WaitFor(t, 10*time.Second, "2 status reports", func() bool { return len(cp.CallsTo("/status")) >= 2 })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // runs before the servers close
	cp.SetHook(func(r *http.Request) (int, string) {
		if r.Host == strings.TrimPrefix(a, "http://") {
			io.Copy(io.Discard, r.Body) // the server notices a hang-up only after the body
			select {                    // hang until the agent gives up
			case <-r.Context().Done():
			case <-stop:
			}
			return http.StatusGatewayTimeout, ""
		}
		return 0, ""
	})
	before := countByHost(cp)(b)
	testkit.WaitFor(t, 10*time.Second, "3 status reports to the second endpoint", func() bool { return countByHost(cp)(b) >= before+3 })
	testkit.WaitFor(t, 10*time.Second, "reporting", func() bool { return r.a.Health().State == StateReporting })
}

// countByHost returns a function counting the fake's calls that reached the server at url.
func countByHost(cp *agenttest.FakeCP) func(url string) int {
	return func(url string) int {
		n := 0
		for _, c := range cp.Calls() {
			if c.Host == strings.TrimPrefix(url, "http://") {
				n++
			}
		}
		return n
	}
}

func TestNoFailoverOn4xx(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	a, b := cp.URL, cp.Replica()
	cp.SetHook(func(r *http.Request) (int, string) {
		if r.Host == strings.TrimPrefix(a, "http://") && strings.HasSuffix(r.URL.Path, "/register") {
			return http.StatusBadRequest, `{"error":"label kubernetes.io/hostname: invalid value"}`
		}
		return 0, ""
	})
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", a, b))
	testkit.WaitFor(t, 10*time.Second, "3 registration attempts", func() bool { return len(cp.CallsTo("/register")) >= 3 })
	if n := countByHost(cp)(b); n != 0 {
		t.Errorf("%d calls to the second endpoint after a 400, want none", n)
	}
	testkit.WaitFor(t, 10*time.Second, "the 400 in the health", func() bool {
		h := r.a.Health()
		return h.State == StateRegistering && strings.Contains(h.Error, "HTTP 400: label kubernetes.io/hostname: invalid value")
	})
}

// TestReplyAcceptance: a 2xx that breaks Cubelet's rule (nodeapi.DecodeReply, whose cases
// nodeapi's TestDecodeReply lists) is a failure, without failover.
func TestReplyAcceptance(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	a, b := cp.URL, cp.Replica()
	cp.SetHook(func(r *http.Request) (int, string) {
		if r.Host == strings.TrimPrefix(a, "http://") {
			return http.StatusOK, `{"ret":{"ret_code":500,"ret_msg":"store down"}}`
		}
		return 0, ""
	})
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", a, b))
	testkit.WaitFor(t, 10*time.Second, "2 registration attempts", func() bool { return len(cp.CallsTo("/register")) >= 2 })
	testkit.WaitFor(t, 10*time.Second, "the ret_code in the health", func() bool { return strings.Contains(r.a.Health().Error, "HTTP 200: ret_code 500: store down") })
	if n := countByHost(cp)(b); n != 0 {
		t.Errorf("%d calls to the second endpoint, want none", n)
	}
}

func TestReregisterOn404(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "2 status reports", func() bool { return len(cp.CallsTo("/status")) >= 2 })
	cp.Forget("127.0.0.1")
	testkit.WaitFor(t, 10*time.Second, "a second registration", func() bool { return len(cp.CallsTo("/register")) >= 2 })
	n := len(cp.CallsTo("/status"))
	testkit.WaitFor(t, 10*time.Second, "status reports after it", func() bool { return len(cp.CallsTo("/status")) >= n+2 })
	if got := cp.CallsTo("/register")[1].Auth; got != "Bearer cfn_node1_secret" {
		t.Errorf("re-registration sent %q, want the node credential", got)
	}
	if !strings.Contains(r.logs.String(), "HTTP 404") {
		t.Errorf("the log does not mention the 404:\n%s", r.logs.String())
	}
}

func TestStopOn401AfterDeletion(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1", "cfj_join2")
	dir := t.TempDir()
	r := startAgent(t, testConfig(dir, "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "2 status reports", func() bool { return len(cp.CallsTo("/status")) >= 2 })
	cp.DeleteNode("127.0.0.1")
	testkit.WaitFor(t, 10*time.Second, "the revocation", func() bool { return r.a.Health().State == StateRevoked })
	calls := len(cp.CallsTo(""))
	time.Sleep(6 * testPeriod)
	if n := len(cp.CallsTo("")); n != calls {
		t.Errorf("%d calls after the revocation, want none", n-calls)
	}
	code, h := getHealth(t, r.url)
	if code != http.StatusServiceUnavailable || !strings.Contains(h.Error, "give the agent a new join token") {
		t.Errorf("healthz %d %+v", code, h)
	}
	st, err := ReadState(dir)
	if err != nil || !st.Revoked || st.NodeCredential != "" || st.RevokedAt == "" {
		t.Errorf("state %+v, %v", st, err)
	}
	if !strings.Contains(r.logs.String(), "will not register again until it is given a new join token") {
		t.Errorf("log:\n%s", r.logs.String())
	}
	r.stop()

	// Restarted with the same join token, it stays down without calling.
	r = startAgent(t, testConfig(dir, "cfj_join1", cp.URL))
	// It reads its revoked state at start (which takes longer under the race detector, while
	// the sandbox driver opens), then makes no call however long it runs.
	testkit.WaitFor(t, 10*time.Second, "the revoked state read at start", func() bool { return r.a.Health().State == StateRevoked })
	time.Sleep(6 * testPeriod)
	if n := len(cp.CallsTo("")); n != calls || r.a.Health().State != StateRevoked {
		t.Errorf("a restart with the old join token: %d calls, health %+v", n-calls, r.a.Health())
	}
	r.stop()

	// A new join token brings it back.
	r = startAgent(t, testConfig(dir, "cfj_join2", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "reporting again", func() bool { return r.a.Health().State == StateReporting })
	regs := cp.CallsTo("/register")
	if last := regs[len(regs)-1]; last.Auth != "Bearer cfj_join2" {
		t.Errorf("rejoin sent %q", last.Auth)
	}
	if st, _ := ReadState(dir); st.Revoked || st.NodeCredential != "cfn_node2_secret" {
		t.Errorf("state after rejoining %+v", st)
	}
	for _, secret := range []string{"cfj_join1", "cfj_join2", "cfn_node1_secret", "cfn_node2_secret"} {
		if strings.Contains(r.logs.String(), secret) {
			t.Errorf("the log shows a token")
		}
	}
}

func TestJoinTokenRefused(t *testing.T) {
	cp := agenttest.NewFakeCP(t) // knows no join token
	r := startAgent(t, testConfig(t.TempDir(), "cfj_unknown", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "3 registration attempts", func() bool { return len(cp.CallsTo("/register")) >= 3 })
	testkit.WaitFor(t, 10*time.Second, "the refusal in the health", func() bool {
		h := r.a.Health()
		return h.State == StateRegistering && strings.Contains(h.Error, "the join token was refused")
	})
}

func TestServeErrors(t *testing.T) {
	cp := agenttest.NewFakeCP(t)
	cfg := testConfig(t.TempDir(), "", cp.URL)
	cfg.Listen = agenttest.ClosedAddr(t) + "x"
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "(--listen, CUBEFLEET_AGENT_LISTEN)") {
		t.Errorf("Run with a bad listen address: %v", err)
	}
	// A state file others can read is refused.
	cfg = testConfig(t.TempDir(), "", cp.URL)
	os.WriteFile(filepath.Join(cfg.StateDir, StateFile), []byte(`{}`), 0o644)
	a, _ = New(cfg, Options{})
	// Run fails at once; the bound only ends a Run that would not.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Run(ctx); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("Run with a readable state file: %v", err)
	}
}

// TestPayloads compares the register and status bodies with golden files built from the
// upstream field lists, and checks that every key is one of them.
func TestPayloads(t *testing.T) {
	cfg := testConfig(t.TempDir(), "", "http://127.0.0.1:1")
	cfg.NodeIP = netip.MustParseAddr("10.0.0.5")
	cfg.S3.Endpoint = "https://s3.example.internal:9000"
	cfg.Runtime = RuntimeMicroVM
	now := time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)
	a, err := New(cfg, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	a.ver = nodeapi.ComponentVersion{Component: Component, Version: "v1.2.3", Commit: "abc123", BuildTime: "2026-05-01T00:00:00Z", Source: "binary"}
	if q := a.Quota(); q != (nodeapi.Quota{MilliCPU: 16000, MemMB: 20000, MaxMVMNum: 39}) {
		t.Errorf("quota %+v: want 2 x 8 cores, 1.25 x 16000 MiB, 20000/512", q)
	}
	reg := a.RegisterRequest()
	if len(reg.RequestID) != 32 {
		t.Errorf("requestID %q", reg.RequestID)
	}
	reg.RequestID = "REQUEST-ID"
	st := a.StatusRequest()
	st.RequestID = "REQUEST-ID"
	if st.DiskUsage == nil {
		t.Error("no disk usage")
	}
	st.DiskUsage = &nodeapi.DiskUsage{DataDiskUsagePer: 12.5, StorageDiskUsagePer: 12.5, SysDiskUsagePer: 40}
	testkit.GoldenJSON(t, "register.golden", reg)
	testkit.GoldenJSON(t, "status.golden", st)

	// Every key is one of the upstream fields (Cubelet's RegisterNodeRequest and
	// UpdateNodeStatusRequest), except the status report's sandboxes, cubefleet's own
	// (nodeapi.StatusRequest.Sandboxes), which a stock Cubelet never sends.
	upstream := map[string]string{
		"register":   "requestID node_id host_ip grpc_port labels capacity allocatable instance_type cluster_label quota_cpu quota_mem_mb create_concurrent_num max_mvm_num paused_release_ratio versions inventory_incomplete host_facts",
		"status":     "requestID conditions images local_templates heartbeat_time allocated disk_usage metric_time quota versions inventory_incomplete host_facts sandboxes",
		"host_facts": "cpu_vendor cpu_model cpuid_hash host_kernel_release host_kernel_fingerprint kvm_api_version kvm_module_fingerprint kvm_module_taint kvm_module_scanned cpu_count mem_total_mb",
		"allocated":  "milli_cpu memory_mb mvm_num mvm_running_num nic_queues data_disk_mb storage_disk_mb",
		"disk_usage": "data_disk_usage_per storage_disk_usage_per sys_disk_usage_per",
		"quota":      "milli_cpu mem_mb max_mvm_num create_concurrent_num paused_release_ratio",
		"conditions": "type status lastHeartbeatTime lastTransitionTime reason message",
		"versions":   "component version commit build_time source variant",
		"capacity":   "milli_cpu memory_mb",
	}
	var checkKeys func(kind string, v any)
	checkKeys = func(kind string, v any) {
		m := map[string]any{}
		b, _ := json.Marshal(v)
		json.Unmarshal(b, &m)
		allowed := strings.Fields(upstream[kind])
		for k, sub := range m {
			if !contains(allowed, k) {
				t.Errorf("%s: key %q is not an upstream field", kind, k)
			}
			switch s := sub.(type) {
			case map[string]any:
				if k == "allocatable" {
					k = "capacity"
				}
				if _, ok := upstream[k]; ok {
					checkKeys(k, s)
				}
			case []any:
				if _, ok := upstream[k]; ok && len(s) > 0 {
					checkKeys(k, s[0])
				}
			}
		}
	}
	checkKeys("register", reg)
	checkKeys("status", st)
	if b, _ := json.Marshal(st); !strings.Contains(string(b), `"local_templates":[]`) || !strings.Contains(string(b), `"sandboxes":[]`) {
		t.Errorf("local_templates and sandboxes must always be sent, [] when empty: %s", b)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestLabels(t *testing.T) {
	cfg := testConfig(t.TempDir(), "", "http://127.0.0.1:1")
	cfg.S3.Endpoint = "http://10.0.0.1:9000"
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := a.Labels()
	var keys []string
	for k, v := range l {
		keys = append(keys, k)
		if !validLabelValue(v) {
			t.Errorf("label %s=%q is not a valid value", k, v)
		}
	}
	sort.Strings(keys)
	if l[LabelNetworkCIDR] != "192.168.0.0_18" || l[LabelS3Host] != "10.0.0.1" || l[LabelS3Port] != "9000" || l[LabelS3Scheme] != "http" ||
		l[LabelS3Bucket] != "cube-volumes" || l[nodeapi.LabelRuntime] != "process" {
		t.Errorf("labels %v", l)
	}
	if _, ok := l["cube.cloud.tencentcloud.com/scheduling-disabled"]; ok {
		t.Error("the reserved label is sent")
	}
	// The S3 host as it is, or not at all: a label value cannot hold an IPv6 address.
	for _, tc := range []struct{ endpoint, host, port string }{
		{"http://[::1]:9000", "", "9000"},
		{"https://[fd00::9]", "", "443"},
		{"http://minio.internal", "minio.internal", "80"},
		{"http://" + strings.Repeat("a", 60) + ".example:9000", "", "9000"},
	} {
		cfg.S3.Endpoint = tc.endpoint
		l := a.Labels()
		host, ok := l[LabelS3Host]
		if host != tc.host || ok != (tc.host != "") || l[LabelS3Port] != tc.port {
			t.Errorf("%s: labels %s=%q (present %v), %s=%q; want %q, %q", tc.endpoint, LabelS3Host, host, ok, LabelS3Port, l[LabelS3Port], tc.host, tc.port)
		}
	}
	for in, want := range map[string]string{"a/b": "a_b", "-x-": "x", strings.Repeat("a", 70): strings.Repeat("a", 63), "": ""} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// A microvm node on a virtual machine without /dev/kvm is Ready: its guests run under TCG (a
// runtime whose driver cannot be opened is reported by SandboxRuntimeUnavailable instead).
func TestMicroVMWithoutKVMIsReady(t *testing.T) {
	cfg := testConfig(t.TempDir(), "", "http://127.0.0.1:1")
	cfg.Runtime, cfg.Host = RuntimeMicroVM, testHost("vm")
	if _, err := os.Stat(cfg.Host.Path("/dev/kvm")); err == nil {
		t.Fatal("the test host has /dev/kvm")
	}
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, reason, msg := a.readiness(); !ok || reason != "AgentReady" {
		t.Errorf("readiness without /dev/kvm: %v %s %q, want Ready (TCG)", ok, reason, msg)
	}
	a.mu.Lock()
	a.runtimeErr = "no accelerator boots a guest"
	a.mu.Unlock()
	if ok, reason, _ := a.readiness(); ok || reason != "SandboxRuntimeUnavailable" {
		t.Errorf("readiness with a driver that cannot open: %v %s", ok, reason)
	}
}
