package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/hostsetup"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// agentCP is a minimal control plane for the agent commands: a join token, the credential it
// issues, status reports, and the node listing. See internal/agent's fake for the full one.
type agentCP struct {
	url   string
	mu    sync.Mutex
	calls map[string]int    // path -> count
	auth  map[string]string // path -> last Authorization
	node  string            // the registered node, "" before
}

func newAgentCP(t *testing.T) *agentCP {
	cp := &agentCP{calls: map[string]int{}, auth: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.calls[r.URL.Path]++
		cp.auth[r.URL.Path] = r.Header.Get("Authorization")
		auth := r.Header.Get("Authorization")
		switch {
		case r.URL.Path == nodeapi.PathReadyz:
			fmt.Fprint(w, `{"ret":{"ret_code":200,"ret_msg":"ok"}}`)
		case r.URL.Path == nodeapi.PathRegister && (auth == "Bearer cfj_clitest" || auth == "Bearer cfn_clitest"):
			var body struct {
				NodeID string `json:"node_id"`
			}
			json.NewDecoder(r.Body).Decode(&body)
			cp.node = body.NodeID
			fmt.Fprintf(w, `{"node_id":%q,"healthy":true,"node_credential":"cfn_clitest"}`, body.NodeID)
		case cp.node != "" && r.URL.Path == nodeapi.StatusPath(cp.node) && auth == "Bearer cfn_clitest":
			fmt.Fprint(w, `{"healthy":true}`)
		case cp.node != "" && r.URL.Path == nodeapi.NodePath(cp.node):
			fmt.Fprintf(w, `{"InstanceID":%q,"IP":%q,"Healthy":true}`, cp.node, cp.node)
		case strings.HasPrefix(r.URL.Path, nodeapi.AgentPrefix+"/"):
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"unauthenticated"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	cp.url = srv.URL
	return cp
}

func (cp *agentCP) lastAuth(path string) string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.auth[path]
}

func (cp *agentCP) count(path string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.calls[path]
}

// buildCubefleet builds the cubefleet binary into a temporary directory.
func buildCubefleet(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cubefleet")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/cubefleet/cubefleet/cmd/cubefleet").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// agentArgs are the settings of a loopback compute node reporting to cp every 200 ms (its
// sandboxes in a directory of the test).
func agentArgs(t *testing.T, dir, cpURL, listen string) []string {
	t.Helper()
	envFile := filepath.Join(dir, "empty.env")
	tokenFile := filepath.Join(dir, "join.token")
	os.WriteFile(envFile, nil, 0o600)
	os.WriteFile(tokenFile, []byte("cfj_clitest\n"), 0o600)
	return []string{"--env-file", envFile, "--role", "compute", "--control-plane", strings.TrimPrefix(cpURL, "http://"),
		"--node-ip", "127.0.0.1", "--allow-loopback", "--s3-endpoint", "http://" + listen, "--runtime", "process",
		"--skip-cidr-conflict-check", "--state-dir", filepath.Join(dir, "state"), "--listen", listen,
		"--report-period", "200ms", "--join-token-file", tokenFile,
		"--sandbox-dir", agenttest.SandboxDir(t), fmt.Sprintf("--sandbox-allow-own-user=%v", os.Geteuid() != 0)}
}

// startAgentProcess runs `cubefleet agent run args...` as a child process.
func startAgentProcess(t *testing.T, bin, dir string, args ...string) (*exec.Cmd, *testkit.SyncBuffer, chan error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"agent", "run", "--log-format", "json"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	logs := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, logs, done
}

func wantExit0(t *testing.T, done chan error, logs *testkit.SyncBuffer) {
	t.Helper()
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Fatalf("agent exit: %v\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent did not stop within 10 s\n%s", logs.String())
	}
}

// TestAgentProcess runs the built binary's `agent run` against a fake control plane: it
// registers and reports, `agent check` passes, SIGTERM stops it with exit 0, and
// `agent down --root` stops it through its PID file.
func TestAgentProcess(t *testing.T) {
	bin := buildCubefleet(t)
	cp := newAgentCP(t)
	dir := t.TempDir()
	listen := freeLoopback(t)
	args := agentArgs(t, dir, cp.url, listen)
	cmd, logs, done := startAgentProcess(t, bin, dir, args...)
	status := nodeapi.StatusPath("127.0.0.1")
	testkit.WaitFor(t, 20*time.Second, "2 status reports", func() bool { return cp.count(status) >= 2 })

	// agent check, in process, with the same settings.
	var out, errOut bytes.Buffer
	code := Run(context.Background(), append([]string{"agent", "check", "--timeout", "10s"}, args...), IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != 0 {
		t.Fatalf("agent check: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "ok    local agent: http://"+listen+"/healthz: ") ||
		!strings.HasPrefix(lines[2], "ok    node listed: ") || !strings.HasPrefix(lines[3], "ok    S3 endpoint: "+listen) ||
		!strings.HasPrefix(lines[4], "ok    isolation: process runtime: ") {
		t.Errorf("agent check output:\n%s", out.String())
	}
	out.Reset()
	if code := Run(context.Background(), append([]string{"agent", "check", "--timeout", "0", "-o", "json"}, args...), IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("agent check -o json: exit %d", code)
	}
	var results []hostsetup.CheckResult
	if err := json.Unmarshal(out.Bytes(), &results); err != nil || len(results) != 5 || results[0].Status != hostsetup.CheckOK {
		t.Errorf("agent check -o json: %v\n%s", err, out.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantExit0(t, done, logs)
	for _, want := range []string{`"msg":"agent started"`, `"msg":"registered"`, `"msg":"agent stopped"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	for _, secret := range []string{"cfj_clitest", "cfn_clitest"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log shows a token:\n%s", logs.String())
		}
	}
	if cp.lastAuth(nodeapi.PathRegister) != "Bearer cfj_clitest" || cp.lastAuth(status) != "Bearer cfn_clitest" {
		t.Errorf("authorization: register %q, status %q", cp.lastAuth(nodeapi.PathRegister), cp.lastAuth(status))
	}

	// Again, with a PID file under a root, stopped by `agent down --root`.
	root := t.TempDir()
	pidFile := filepath.Join(root, hostsetup.PIDFilePath)
	_, logs, done = startAgentProcess(t, bin, dir, append(args, "--pid-file", pidFile)...)
	before := cp.count(status)
	testkit.WaitFor(t, 20*time.Second, "status reports after the restart", func() bool { return cp.count(status) >= before+2 })
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("PID file: %v", err)
	}
	if cp.lastAuth(nodeapi.PathRegister) != "Bearer cfn_clitest" {
		t.Errorf("the restarted agent registered with %q, want its stored credential", cp.lastAuth(nodeapi.PathRegister))
	}
	out.Reset()
	if code := Run(context.Background(), []string{"agent", "down", "--root", root}, IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("agent down: exit %d\n%s", code, errOut.String())
	}
	wantExit0(t, done, logs)
	if !strings.Contains(out.String(), "Stopped the agent (process ") {
		t.Errorf("agent down output: %q", out.String())
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the PID file is still there: %v", err)
	}
}

func TestAgentCommandErrors(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, "empty.env")
	os.WriteFile(env, nil, 0o600)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"agent", "run", "--env-file", env, "--role", "bogus"}, 1, `error: INVALID_INPUT: --role: "bogus" is not a role; set it to compute`},
		{[]string{"agent", "--env-file", env, "--role", "compute", "--control-plane-ip", "10.0.0.1"}, 1, "error: INVALID_INPUT: CUBE_S3_ENDPOINT: is not set; the sandbox volume plugin depends on S3"},
		{[]string{"agent", "check", "--env-file", env, "--node-ip", "127.0.0.1"}, 1, "error: INVALID_INPUT: --node-ip: 127.0.0.1 is a loopback address"},
		{[]string{"agent", "frobnicate"}, 2, `error: unknown command "frobnicate" for "cubefleet agent"`},
		{[]string{"agent", "run", "--log-format", "xml", "--env-file", env}, 2, "error: --log-format"},
		{[]string{"agent", "install", "--env-file", filepath.Join(dir, "missing.env")}, 1, "error: INVALID_INPUT: --env-file: env file"},
		// A switch's value goes after "=": pflag takes "--run-check" alone as 1 and "0" as an argument.
		{[]string{"agent", "install", "--run-check", "0", "--env-file", env}, 2, `error: "0" is not a command: a switch takes its value after "=": write --run-check=0 (--run-check alone means 1)`},
		{[]string{"agent", "--allow-loopback", "0", "--env-file", env}, 2, `write --allow-loopback=0`},
		{[]string{"agent", "check", "--control-plane-tls", "false", "--env-file", env}, 2, `write --control-plane-tls=false`},
		{[]string{"agent", "run", "--skip-cidr-conflict-check", "1", "--env-file", env}, 2, `write --skip-cidr-conflict-check=1`},
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), tc.args, IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
	}
}

func TestAgentInstallRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	envFile := filepath.Join(dir, ".env")
	os.WriteFile(envFile, []byte("ONE_CLICK_DEPLOY_ROLE=compute\nONE_CLICK_CONTROL_PLANE_IP=10.0.0.1\nCUBE_S3_ENDPOINT=http://10.0.0.1:9000\nCUBE_S3_SECRET_ACCESS_KEY=secret\nONE_CLICK_RUN_QUICKCHECK=0\n"), 0o600)
	hostRoot, _ := filepath.Abs("../agent/hostinfo/testdata/host/compute")
	var out, errOut bytes.Buffer
	tok := filepath.Join(dir, "join.token")
	os.WriteFile(tok, []byte("cfj_fromfile\n"), 0o600)
	args := []string{"agent", "install", "--root", root, "--join-token-file", tok, "--binary", "/usr/local/bin/cubefleet", "--env-file", envFile, "--host-root", hostRoot, "--runtime", "process"}
	if code := Run(context.Background(), args, IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("agent install --root: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	env, err := os.ReadFile(filepath.Join(root, agent.InstalledEnvFile))
	if !strings.Contains(string(env), "CUBEFLEET_JOIN_TOKEN=cfj_fromfile\n") {
		t.Errorf("the installed env file lacks the join token's value (it came from a file the operator may delete)")
	}
	if err != nil || !strings.Contains(string(env), "CUBE_SANDBOX_NODE_IP=10.0.0.5\n") || !strings.Contains(string(env), "CUBEFLEET_RUNTIME=process\n") {
		t.Errorf("env file: %v\n%s", err, env)
	}
	// The node IP was detected from the host's default route, and said so.
	if !strings.Contains(errOut.String(), "warning: CUBE_SANDBOX_NODE_IP is not set: using 10.0.0.5 from the default route") {
		t.Errorf("stderr: %q", errOut.String())
	}
	if !strings.Contains(out.String(), "Skipped systemctl under --root") {
		t.Errorf("output: %s", out.String())
	}
}

// TestAgentCheckNotRegistered: agent check for a node the control plane does not list says
// what to do, and its JSON keeps the command's <pool> as written (not \u003cpool\u003e).
func TestAgentCheckNotRegistered(t *testing.T) {
	cp := newAgentCP(t) // no node registered
	dir := t.TempDir()
	args := agentArgs(t, dir, cp.url, freeLoopback(t))
	var out, errOut bytes.Buffer
	code := Run(context.Background(), append([]string{"agent", "check", "--timeout", "0", "-o", "json"}, args...), IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != 1 {
		t.Fatalf("agent check: exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	var failed struct { // a failed command's --output json: its result and the error
		Result []hostsetup.CheckResult `json:"result"`
		Error  struct{ Code string }   `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &failed); err != nil || len(failed.Result) != 5 || failed.Error.Code == "" {
		t.Fatalf("agent check -o json: %v\n%s", err, out.String())
	}
	results := failed.Result
	want := "HTTP 404: this node is not registered; see the agent's log (journalctl -u cubefleet-agent.service); a node joins with a join token: cubefleet nodes join-token create --pool <pool> --ip 127.0.0.1"
	if r := results[2]; r.Status != hostsetup.CheckFail || !strings.Contains(r.Detail, want) {
		t.Errorf("node listed: %+v\nwant FAIL containing %q", r, want)
	}
	if !strings.Contains(out.String(), "--pool <pool>") || strings.Contains(out.String(), `\u003c`) {
		t.Errorf("the JSON escapes < and >:\n%s", out.String())
	}
}

// TestAgentInstallRootSkipsHostChecks: install --root writes files for another host (an
// image): it does not fail on the build host's hardware (here a cgroup v1 virtual machine with
// 4 GB), and says the checks were skipped.
func TestAgentInstallRootSkipsHostChecks(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	os.WriteFile(envFile, []byte("ONE_CLICK_DEPLOY_ROLE=compute\nCUBE_SANDBOX_NODE_IP=10.0.0.7\nONE_CLICK_CONTROL_PLANE_IP=10.0.0.1\nCUBE_S3_ENDPOINT=http://10.0.0.1:9000\n"), 0o600)
	hostRoot, _ := filepath.Abs("../agent/hostinfo/testdata/host/vm")
	var out, errOut bytes.Buffer
	args := []string{"agent", "install", "--root", filepath.Join(dir, "root"), "--run-check=0", "--binary", "/usr/local/bin/cubefleet", "--env-file", envFile, "--host-root", hostRoot}
	if code := Run(context.Background(), args, IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("agent install --root on a VM: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "Skipped the host prerequisite checks under --root") || strings.Contains(out.String(), "cgroup") {
		t.Errorf("output:\n%s", out.String())
	}
	// Nor on the build host's network: its addresses and routes are not the target's.
	hostRoot, _ = filepath.Abs("../agent/hostinfo/testdata/host/conflicts")
	args[len(args)-1] = hostRoot
	out.Reset()
	errOut.Reset()
	if code := Run(context.Background(), args, IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("agent install --root on a host whose network overlaps the sandbox network: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestAgentRunStateDirLocked runs two `agent run` processes on one state directory: the
// second refuses to start (exit 1), naming the directory, the first one's process ID and the
// fix, and the first one keeps its credential and keeps reporting.
func TestAgentRunStateDirLocked(t *testing.T) {
	bin := buildCubefleet(t)
	cp := newAgentCP(t)
	dir := t.TempDir()
	args := agentArgs(t, dir, cp.url, freeLoopback(t))
	first, logs, done := startAgentProcess(t, bin, dir, args...)
	status := nodeapi.StatusPath("127.0.0.1")
	testkit.WaitFor(t, 20*time.Second, "2 status reports", func() bool { return cp.count(status) >= 2 })
	stateDir := filepath.Join(dir, "state")
	before, err := os.ReadFile(filepath.Join(stateDir, agent.StateFile))
	if err != nil {
		t.Fatal(err)
	}

	// Another node (127.0.0.2, its own listen address), the same state directory.
	second := append(append([]string(nil), args...), "--node-ip", "127.0.0.2", "--listen", "127.0.0.2:"+strings.Split(freeLoopback(t), ":")[1])
	_, logs2, done2 := startAgentProcess(t, bin, dir, second...)
	var exit error
	select {
	case exit = <-done2:
		done2 <- exit
	case <-time.After(10 * time.Second):
		t.Fatalf("the second agent did not refuse to start:\n%s", logs2.String())
	}
	var ee *exec.ExitError
	if !errors.As(exit, &ee) || ee.ExitCode() != 1 {
		t.Errorf("second agent: %v, want exit 1", exit)
	}
	for _, want := range []string{stateDir + " is in use by another agent (process " + fmt.Sprint(first.Process.Pid) + ")",
		"give each agent its own CUBEFLEET_AGENT_STATE_DIR"} {
		if !strings.Contains(logs2.String(), want) {
			t.Errorf("the second agent's output lacks %q:\n%s", want, logs2.String())
		}
	}
	if after, _ := os.ReadFile(filepath.Join(stateDir, agent.StateFile)); !bytes.Equal(after, before) {
		t.Errorf("the state file changed:\n%s\nwant\n%s", after, before)
	}
	n := cp.count(status)
	testkit.WaitFor(t, 20*time.Second, "the first agent still reporting", func() bool { return cp.count(status) >= n+2 })
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantExit0(t, done, logs)
}

// TestAgentInstallSkippedCheckSource: when install skips the check, it names what turned it
// off: the flag, the variable in the environment, or the variable in the env file.
func TestAgentInstallSkippedCheckSource(t *testing.T) {
	hostRoot, _ := filepath.Abs("../agent/hostinfo/testdata/host/compute")
	const base = "ONE_CLICK_DEPLOY_ROLE=compute\nCUBE_SANDBOX_NODE_IP=10.0.0.5\nONE_CLICK_CONTROL_PLANE_IP=10.0.0.1\nCUBE_S3_ENDPOINT=http://10.0.0.1:9000\n"
	for _, tc := range []struct {
		name string
		file string
		env  map[string]string
		args []string
		want string // $ENV is the env file
	}{
		{"flag", base, nil, []string{"--run-check=0"}, "Skipped agent check (--run-check=0)"},
		{"flag beats the env file", base + "ONE_CLICK_RUN_QUICKCHECK=1\n", nil, []string{"--run-check=false"}, "Skipped agent check (--run-check=false)"},
		{"flag beats the environment", base, map[string]string{"CUBEFLEET_RUN_CHECK": "1"}, []string{"--run-check=0"}, "Skipped agent check (--run-check=0)"},
		{"environment", base, map[string]string{"ONE_CLICK_RUN_QUICKCHECK": "0"}, nil, "Skipped agent check (ONE_CLICK_RUN_QUICKCHECK=0 in the environment)"},
		{"cubefleet variable in the environment", base, map[string]string{"CUBEFLEET_RUN_CHECK": "0"}, nil, "Skipped agent check (CUBEFLEET_RUN_CHECK=0 in the environment)"},
		{"env file", base + "ONE_CLICK_RUN_QUICKCHECK=0\n", nil, nil, "Skipped agent check (ONE_CLICK_RUN_QUICKCHECK=0 in the env file $ENV)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			envFile := filepath.Join(dir, "agent.env")
			os.WriteFile(envFile, []byte(tc.file), 0o600)
			args := append([]string{"agent", "install", "--root", filepath.Join(dir, "root"), "--binary", "/usr/local/bin/cubefleet",
				"--env-file", envFile, "--host-root", hostRoot, "--runtime", "process"}, tc.args...)
			var out, errOut bytes.Buffer
			if code := Run(context.Background(), args, IO{Out: &out, Err: &errOut, Getenv: func(k string) string { return tc.env[k] }}); code != 0 {
				t.Fatalf("agent install: exit %d\n%s%s", code, out.String(), errOut.String())
			}
			want := strings.ReplaceAll(tc.want, "$ENV", envFile) + "\n"
			if !strings.HasSuffix(out.String(), want) {
				t.Errorf("output:\n%s\nwant it to end with %q", out.String(), want)
			}
		})
	}
}

// TestAgentCheckShowsProgress: while agent check waits for its checks to pass, it prints a line
// per attempt on stderr (stdout keeps the results, or the JSON).
func TestAgentCheckShowsProgress(t *testing.T) {
	cp := newAgentCP(t) // no node registered: the check waits until --timeout
	dir := t.TempDir()
	args := agentArgs(t, dir, cp.url, freeLoopback(t))
	var out, errOut bytes.Buffer
	code := Run(context.Background(), append([]string{"agent", "check", "--timeout", "3s", "-o", "json"}, args...), IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != 1 {
		t.Fatalf("agent check: exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	progress := regexp.MustCompile(`(?m)^attempt 1: 2 of 5 checks pass; waiting for local agent, node listed, S3 endpoint \(again in 2s; [123]s left\)$`)
	if !progress.MatchString(errOut.String()) {
		t.Errorf("stderr:\n%s\nwant a line matching %s", errOut.String(), progress)
	}
	if !json.Valid(out.Bytes()) {
		t.Errorf("stdout is not one JSON value:\n%s", out.String())
	}
}
