package agent

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// installEnv is the .env of a compute node installed with the process runtime.
const installEnv = computeEnv + "CUBEFLEET_JOIN_TOKEN=cfj_join1\nCUBEFLEET_RUNTIME=process\nONE_CLICK_RUN_QUICKCHECK=0\n"

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
	env, err := os.ReadFile(filepath.Join(root, InstalledEnvFile))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, UnitPath))
	if err != nil {
		t.Fatal(err)
	}
	goldenBytes(t, "install/agent.env.golden", env)
	goldenBytes(t, "install/cubefleet-agent.service.golden", unit)
	goldenBytes(t, "install/output.golden", []byte(strings.NewReplacer(root, "$ROOT", cfg.EnvFile, "$ENV").Replace(out.String())))
	for path, mode := range map[string]os.FileMode{InstalledEnvFile: 0o600, UnitPath: 0o644, DefaultStateDir: 0o700} {
		if fi, err := os.Stat(filepath.Join(root, path)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, want mode %04o", path, fi.Mode(), mode)
		}
	}

	// The agent reads the installed env file back to the same configuration.
	again, err := Load(Sources{Flags: map[string]string{"env-file": filepath.Join(root, InstalledEnvFile)}, Host: testHost("compute")})
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
func dump(c *Config) string {
	var b bytes.Buffer
	WriteEnv(&b, EnvFileVars(c))
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
	if err := writeFileAtomic(pidFile, []byte(strconv.Itoa(proc.Process.Pid)+"\n"), 0o644); err != nil {
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
	writeFileAtomic(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644)
	out.Reset()
	if err := Down(context.Background(), DownOptions{Root: root, Out: &out}); err != nil || !strings.Contains(out.String(), "is not a cubefleet agent") {
		t.Errorf("Down with a stale PID file: %v, %q", err, out.String())
	}
}

func TestPrerequisites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    string
		edit    map[string]string // files to replace in a copy of the host ("" deletes)
		runtime Runtime
		minKB   int64
		want    []string
	}{
		{name: "bare metal, microvm", host: "compute", runtime: RuntimeMicroVM},
		{name: "bare metal, process", host: "compute", runtime: RuntimeProcess},
		{name: "virtual machine, microvm", host: "vm", runtime: RuntimeMicroVM,
			want: []string{"cgroup v2 is required", "4028000 kB of memory (MemTotal) and the floor is 7500000 kB", "/dev/kvm is missing", "this host is a virtual machine"}},
		{name: "virtual machine, process", host: "vm", runtime: RuntimeProcess,
			want: []string{"cgroup v2 is required", "the floor is 7500000 kB"}},
		{name: "architecture", host: "compute", runtime: RuntimeProcess, edit: map[string]string{"/proc/sys/kernel/arch": "riscv64\n"},
			want: []string{`architecture is "riscv64"; the agent runs on x86_64 or aarch64`}},
		{name: "aarch64", host: "compute", runtime: RuntimeProcess, edit: map[string]string{"/proc/sys/kernel/arch": "aarch64\n"}},
		{name: "no cpu controller", host: "compute", runtime: RuntimeProcess, edit: map[string]string{"/sys/fs/cgroup/cgroup.controllers": "memory pids\n"},
			want: []string{"the cgroup v2 cpu controller is not available"}},
		{name: "raised memory floor", host: "compute", runtime: RuntimeProcess, minKB: 20_000_000,
			want: []string{"16384000 kB of memory (MemTotal) and the floor is 20000000 kB"}},
		{name: "no kvm", host: "compute", runtime: RuntimeMicroVM, edit: map[string]string{"/dev/kvm": ""},
			want: []string{"/dev/kvm is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testHost(tc.host)
			if tc.edit != nil {
				h = copyHost(t, h)
				for p, content := range tc.edit {
					path := filepath.Join(h.Root, p)
					if content == "" {
						os.Remove(path)
						continue
					}
					os.WriteFile(path, []byte(content), 0o644)
				}
			}
			f, err := h.Facts()
			if err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Runtime: tc.runtime, MinMemoryKB: DefaultMinMemoryKB, Host: h}
			if tc.minKB != 0 {
				cfg.MinMemoryKB = tc.minKB
			}
			got := Prerequisites(cfg, f)
			if len(got) != len(tc.want) {
				t.Fatalf("Prerequisites = %q, want %d problems", got, len(tc.want))
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %d: %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestInstallRefuses(t *testing.T) {
	// Unmet prerequisites: every one reported, before anything is touched (on the real system:
	// as root, it would write to /etc).
	cfg, err := loadTest(t, "vm", strings.Replace(installEnv, "10.0.0.5", "10.1.0.7", 1)+"CUBEFLEET_RUNTIME=microvm\n", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = Install(context.Background(), cfg, InstallOptions{Binary: "/usr/local/bin/cubefleet", Geteuid: func() int { return 0 },
		Systemctl: func(context.Context, ...string) error { t.Error("systemctl ran"); return nil }})
	for _, want := range []string{"prerequisites not met:", "\n  - cgroup v2 is required", "\n  - this host has 4028000 kB of memory", "\n  - the microvm runtime needs KVM", "\n  - this host is a virtual machine"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Install on a small VM: %v\nwant it to contain %q", err, want)
		}
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
	if _, err := os.Stat(filepath.Join(root, InstalledEnvFile)); err != nil {
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

func TestInstallRunsTheCheck(t *testing.T) {
	cp := newFakeCP(t, "cfj_join1")
	s3 := listen(t)
	root := t.TempDir()
	cfg := testConfig("/var/lib/cubefleet/agent", "cfj_join1", cp.srv.URL)
	cfg.Listen = closedAddr(t)
	cfg.S3.Endpoint = "http://" + s3
	cfg.RunCheck, cfg.CheckTimeout, cfg.MinMemoryKB = true, 10*time.Second, DefaultMinMemoryKB
	// The agent "started by systemd": same node, same listen address, state under root.
	running := *cfg
	running.StateDir = filepath.Join(root, cfg.StateDir)
	r := startAgent(t, &running)
	waitFor(t, "a status report (the credential is stored)", func() bool { return r.a.Health().LastReportAt != "" })
	var out bytes.Buffer
	if err := Install(context.Background(), cfg, InstallOptions{Root: root, Binary: "/usr/local/bin/cubefleet", Out: &out, Systemctl: noSystemctl(t),
		Check: CheckOptions{Interval: 50 * time.Millisecond}}); err != nil {
		t.Fatalf("Install: %v\n%s", err, out.String())
	}
	for _, want := range []string{"Running agent check (up to 10s)", "ok    local agent: http://" + cfg.Listen + "/healthz: ",
		"ok    control plane: ", "ok    node listed: ", `lists "IP":"127.0.0.1"`, "ok    S3 endpoint: " + s3 + " answers on TCP"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The credential the check sent is the one the agent stored under root.
	if nodes := cp.callsTo(nodeapi.NodePath("127.0.0.1")); len(nodes) == 0 || nodes[len(nodes)-1].Auth != "Bearer cfn_node1_secret" {
		t.Errorf("node listing calls %+v, want the node credential", nodes)
	}
	r.stop()
	out.Reset()
	cfg.CheckTimeout = 0
	err := Install(context.Background(), cfg, InstallOptions{Root: root, Binary: "/usr/local/bin/cubefleet", Out: &out, Systemctl: noSystemctl(t)})
	if err == nil || !strings.Contains(err.Error(), "agent check failed") || !strings.Contains(out.String(), "FAIL  local agent: ") {
		t.Errorf("Install with the agent down: %v\n%s", err, out.String())
	}
}

// copyHost copies a fake host tree into a temporary directory.
func copyHost(t *testing.T, h Host) Host {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(h.Root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.Root, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return Host{Root: dst}
}

// listen returns the address of a TCP listener on 127.0.0.1 that accepts and closes
// connections until the test ends.
func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestStartLogsPrerequisites: a host install did not check (an image built with --root) is
// checked when the agent starts: each unmet prerequisite is logged.
func TestStartLogsPrerequisites(t *testing.T) {
	cp := newFakeCP(t, "cfj_join1")
	cfg := testConfig(t.TempDir(), "cfj_join1", cp.srv.URL)
	cfg.Host, cfg.MinMemoryKB = testHost("vm"), DefaultMinMemoryKB
	r := startAgent(t, cfg)
	waitFor(t, "a status report", func() bool { return len(cp.callsTo("/status")) > 0 })
	logs := r.logs.String()
	for _, want := range []string{`"msg":"this host does not meet a prerequisite of the agent","node_id":"127.0.0.1","problem":"cgroup v2 is required`, `"problem":"this host has 4028000 kB of memory`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
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
