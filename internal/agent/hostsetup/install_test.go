package hostsetup

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/envfile"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// installEnv is the .env of a compute node installed with the process runtime.
const installEnv = agenttest.ComputeEnv + "CUBEFLEET_JOIN_TOKEN=cfj_join1\nCUBEFLEET_RUNTIME=process\nONE_CLICK_RUN_QUICKCHECK=0\n"

func noSystemctl(t *testing.T) Systemctl {
	return func(_ context.Context, args ...string) error {
		t.Errorf("systemctl %v ran under --root", args)
		return nil
	}
}

func TestInstallRoot(t *testing.T) {
	cfg, err := loadTest(t, "compute", installEnv, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var out bytes.Buffer
	if err := Install(context.Background(), cfg, InstallOptions{Root: root, Binary: "/usr/local/bin/cubefleet", Out: &out, Systemctl: noSystemctl(t)}); err != nil {
		t.Fatalf("Install: %v\n%s", err, out.String())
	}
	env, err := os.ReadFile(filepath.Join(root, agent.InstalledEnvFile))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, UnitPath))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "install/agent.env.golden", env)
	testkit.Golden(t, "install/cubefleet-agent.service.golden", unit)
	testkit.Golden(t, "install/output.golden", []byte(strings.NewReplacer(root, "$ROOT", cfg.EnvFile, "$ENV").Replace(out.String())))
	for path, mode := range map[string]os.FileMode{agent.InstalledEnvFile: 0o600, UnitPath: 0o644, agent.DefaultStateDir: 0o700} {
		if fi, err := os.Stat(filepath.Join(root, path)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, want mode %04o", path, fi.Mode(), mode)
		}
	}

	// The agent reads the installed env file back to the same configuration.
	again, err := agent.Load(agent.Sources{Flags: map[string]string{"env-file": filepath.Join(root, agent.InstalledEnvFile)}, Host: testHost("compute")})
	if err != nil {
		t.Fatal(err)
	}
	again.EnvFile, again.Warnings, cfg.EnvFile, cfg.Warnings = "", nil, "", nil
	if again.JoinToken != cfg.JoinToken {
		t.Error("the join token did not survive the install")
	}
	again.PIDFile = ""
	if s1, s2 := dump(cfg), dump(again); s1 != s2 {
		t.Errorf("the installed env file reads back differently:\n got %s\nwant %s", s2, s1)
	}
}

// dump renders a config with its secrets, for comparisons.
func dump(c *agent.Config) string {
	var b bytes.Buffer
	envfile.Write(&b, EnvFileVars(c))
	return b.String()
}

func TestReinstallStopsTheRunningAgent(t *testing.T) {
	cfg, err := loadTest(t, "compute", installEnv, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	opt := InstallOptions{Root: root, Binary: "/usr/local/bin/cubefleet", Systemctl: noSystemctl(t)}
	if err := Install(context.Background(), cfg, opt); err != nil {
		t.Fatal(err)
	}
	// A stand-in for the running agent: a process whose command line has "agent", with its PID
	// in root/run/cubefleet-agent.pid.
	proc := exec.Command("sh", "-c", `trap "exit 0" TERM; echo ready; while :; do sleep 0.05; done`, "agent")
	stdout, err := proc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil { // the trap is set
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	t.Cleanup(func() { proc.Process.Kill() })
	pidFile := filepath.Join(root, PIDFilePath)
	if err := atomicfile.WriteFile(pidFile, []byte(strconv.Itoa(proc.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opt.Out = &out
	if err := Install(context.Background(), cfg, opt); err != nil {
		t.Fatalf("reinstall: %v\n%s", err, out.String())
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the agent exited with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the running agent was not stopped")
	}
	for _, want := range []string{"Found an existing install: stopping it first (reinstall)", "Stopped the agent (process " + strconv.Itoa(proc.Process.Pid)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("the PID file is still there: %v", err)
	}
	// down with nothing running is not an error.
	out.Reset()
	if err := Down(context.Background(), DownOptions{Root: root, Out: &out}); err != nil || !strings.Contains(out.String(), "The agent is not running") {
		t.Errorf("Down: %v, %q", err, out.String())
	}
	// A stale PID file (a process that is not an agent) is removed, nothing is signalled.
	atomicfile.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644)
	out.Reset()
	if err := Down(context.Background(), DownOptions{Root: root, Out: &out}); err != nil || !strings.Contains(out.String(), "is not a cubefleet agent") {
		t.Errorf("Down with a stale PID file: %v, %q", err, out.String())
	}
}

func TestInstallRefuses(t *testing.T) {
	// Unmet prerequisites: every one reported, before anything is touched (on the real system:
	// as root, it would write to /etc). A virtual machine without /dev/kvm is none for microvm
	// (its guests run under TCG).
	cfg, err := loadTest(t, "vm", strings.Replace(installEnv, "10.0.0.5", "10.1.0.7", 1)+"CUBEFLEET_RUNTIME=microvm\n", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = Install(context.Background(), cfg, InstallOptions{Binary: "/usr/local/bin/cubefleet", Geteuid: func() int { return 0 },
		Systemctl: func(context.Context, ...string) error { t.Error("systemctl ran"); return nil }})
	for _, want := range []string{"prerequisites not met:", "\n  - no cgroup hierarchy offers the cpu controller", "\n  - this host has 4028000 kB of memory", "\n  - the microvm runtime boots its guests with a guest kernel and none is set"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Install on a small VM: %v\nwant it to contain %q", err, want)
		}
	}
	if err != nil && (strings.Contains(err.Error(), "KVM") || strings.Contains(err.Error(), "virtual machine")) {
		t.Errorf("Install on a VM without /dev/kvm: %v\nwant no KVM or bare-metal requirement (TCG runs its guests)", err)
	}
	// Under --root the files are for another host (an image): the build host's hardware is not
	// checked, and the install says so.
	root := t.TempDir()
	var out bytes.Buffer
	if err := Install(context.Background(), cfg, InstallOptions{Root: root, Binary: "/usr/local/bin/cubefleet", Out: &out, Systemctl: noSystemctl(t)}); err != nil {
		t.Errorf("Install --root on a small VM: %v", err)
	}
	if !strings.HasPrefix(out.String(), "Skipped the host prerequisite checks under --root (the files are for another host): the agent logs any unmet prerequisite when it starts there\n") {
		t.Errorf("output:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(root, agent.InstalledEnvFile)); err != nil {
		t.Errorf("Install --root wrote no env file: %v", err)
	}
	// On the real system, only root installs; checked before anything is touched.
	cfg, _ = loadTest(t, "compute", installEnv, nil, nil)
	err = Install(context.Background(), cfg, InstallOptions{Binary: "/usr/local/bin/cubefleet", Geteuid: func() int { return 1000 },
		Systemctl: func(context.Context, ...string) error { t.Error("systemctl ran"); return nil }})
	if err == nil || !strings.Contains(err.Error(), "run it as root (sudo cubefleet agent install), or pass --root DIR") {
		t.Errorf("Install as a user: %v", err)
	}
	if err := Install(context.Background(), cfg, InstallOptions{Root: t.TempDir(), Binary: "cubefleet"}); err == nil || !strings.Contains(err.Error(), "is not absolute") {
		t.Errorf("relative binary: %v", err)
	}
}

// TestInstallRootRunsNoCheck: under --root nothing was started on this host, so install does
// not probe it (the agent check's local agent, control plane and node listing), even with the
// check on: it says so and succeeds.
func TestInstallRootRunsNoCheck(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	cfg := testConfig(t, "/var/lib/cubefleet/agent", "cfj_join1", cp.URL)
	cfg.Listen = agenttest.ClosedAddr(t)
	cfg.RunCheck, cfg.CheckTimeout = true, 10*time.Second
	var out bytes.Buffer
	start := time.Now()
	err := Install(context.Background(), cfg, InstallOptions{Root: t.TempDir(), Binary: "/usr/local/bin/cubefleet", Out: &out, Systemctl: noSystemctl(t),
		Check: CheckOptions{Interval: 50 * time.Millisecond}})
	if err != nil {
		t.Fatalf("Install --root: %v\n%s", err, out.String())
	}
	if calls := cp.CallsTo(""); len(calls) != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("Install --root probed this host: %d calls to the control plane in %s", len(calls), time.Since(start))
	}
	if want := "Skipped agent check under --root: no agent was started on this host; run `cubefleet agent check` on the host the files are for\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("output:\n%s\nwant it to end with %q", out.String(), want)
	}
}

// TestInstallRunsTheCheck: the check that ends an install on its host probes the agent the
// install started, with the credential it stored, and fails the install when a check fails.
func TestInstallRunsTheCheck(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	s3 := agenttest.Listen(t)
	root := t.TempDir()
	cfg := testConfig(t, "/var/lib/cubefleet/agent", "cfj_join1", cp.URL)
	cfg.Listen = agenttest.ClosedAddr(t)
	cfg.S3.Endpoint = "http://" + s3
	cfg.RunCheck, cfg.CheckTimeout, cfg.MinMemoryKB = true, 10*time.Second, agent.DefaultMinMemoryKB
	// The agent "started by systemd": same node, same listen address, state under root.
	running := *cfg
	running.StateDir = filepath.Join(root, cfg.StateDir)
	r := startAgent(t, &running)
	testkit.WaitFor(t, 10*time.Second, "a status report (the credential is stored)", func() bool { return r.a.Health().LastReportAt != "" })
	var out bytes.Buffer
	if err := checkInstalled(context.Background(), cfg, CheckOptions{Interval: 50 * time.Millisecond, StateDir: running.StateDir}, &out); err != nil {
		t.Fatalf("the check after an install: %v\n%s", err, out.String())
	}
	for _, want := range []string{"Running agent check (up to 10s)", "ok    local agent: http://" + cfg.Listen + "/healthz: ",
		"ok    control plane: ", "ok    node listed: ", `lists "IP":"127.0.0.1"`, "ok    S3 endpoint: " + s3 + " answers on TCP"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The credential the check sent is the one the agent stored under root.
	if nodes := cp.CallsTo(nodeapi.NodePath("127.0.0.1")); len(nodes) == 0 || nodes[len(nodes)-1].Auth != "Bearer cfn_node1_secret" {
		t.Errorf("node listing calls %+v, want the node credential", nodes)
	}
	r.stop()
	out.Reset()
	cfg.CheckTimeout = 5 * time.Second // room for a second attempt even under the race detector on a loaded host (the first probes the namespaces)
	err := checkInstalled(context.Background(), cfg, CheckOptions{Interval: 50 * time.Millisecond, StateDir: running.StateDir}, &out)
	if err == nil || !strings.Contains(err.Error(), "agent check failed") || !strings.Contains(out.String(), "FAIL  local agent: ") {
		t.Errorf("the check after an install with the agent down: %v\n%s", err, out.String())
	}
	// While it waits, a line per attempt.
	if !strings.Contains(out.String(), "\nattempt 1: 4 of 5 checks pass; waiting for local agent (again in 50ms; ") {
		t.Errorf("no progress line:\n%s", out.String())
	}
}

// TestInstallTightensStateDir: install makes an existing state directory that others may
// access private, and says so.
func TestInstallTightensStateDir(t *testing.T) {
	cfg, err := loadTest(t, "compute", installEnv, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	stateDir := filepath.Join(root, cfg.StateDir)
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(stateDir, 0o755)
	var out bytes.Buffer
	if err := Install(context.Background(), cfg, InstallOptions{Root: root, Binary: "/usr/local/bin/cubefleet", Out: &out, Systemctl: noSystemctl(t)}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(stateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if want := "Changed the mode of " + stateDir + " from 0755 to 0700 (it holds the node credential)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

// TestEnvFileVarsTLS: install carries the TLS settings into the env file it writes, with the CA
// file's path made absolute by Load (the installed service runs elsewhere).
func TestEnvFileVarsTLS(t *testing.T) {
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	host := testHost("compute")
	host.Root, _ = filepath.Abs(host.Root)
	envFile := filepath.Join(dir, "compute.env")
	os.WriteFile(envFile, []byte(agenttest.ComputeEnv+"CUBEFLEET_CONTROL_PLANE_TLS=1\nCUBEFLEET_CA_FILE=ca.pem\n"), 0o600)
	t.Chdir(dir)
	cfg, err := agent.Load(agent.Sources{Flags: map[string]string{"env-file": envFile}, Host: host})
	if err != nil || cfg.CAFile != files.CA {
		t.Fatalf("relative CA file: %v %v", cfg, err)
	}
	vars := envfile.Map(EnvFileVars(cfg))
	if vars["CUBEFLEET_CA_FILE"].Value != files.CA || vars["CUBEFLEET_CONTROL_PLANE_TLS"].Value != "1" ||
		vars["ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR"].Value != "https://10.0.0.1:3010" {
		t.Errorf("installed env file: %+v", vars)
	}
}
