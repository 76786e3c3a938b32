package hostsetup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestDownLeavesNoProcess runs the built binary's `agent run` (as the installed unit runs it,
// with a PID file under a root) with sandboxes: a plain one, one that ignores SIGTERM, a warm
// one. Stopping the agent leaves its sandboxes running (so a restart of the agent keeps them);
// Down then stops every sandbox: no process of the agent, a supervisor or a sandbox survives.
func TestDownLeavesNoProcess(t *testing.T) {
	bin := cubefleetBinary(t)
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	root := filepath.Dir(agenttest.SandboxDir(t)) // every user reaches its sandbox directory
	cfg := testConfig(t, filepath.Join(root, "state"), "cfj_join1", cp.URL)
	sandboxes := filepath.Join(root, agent.DefaultSandboxDir)
	cfg.SandboxDir = sandboxes
	installed := *cfg // what `agent down` reads: the installed agent's sandbox directory, under root
	installed.SandboxDir = agent.DefaultSandboxDir
	installed.StateDir = "/state"
	cmd := exec.Command(bin, "agent", "run")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "ONE_CLICK_DEPLOY_ROLE=compute", "CUBEFLEET_CONTROL_PLANE=" + cp.URL,
		"CUBE_SANDBOX_NODE_IP=127.0.0.1", "CUBEFLEET_ALLOW_LOOPBACK=1", "CUBE_S3_ENDPOINT=http://127.0.0.1:9000",
		"CUBEFLEET_JOIN_TOKEN=cfj_join1", "CUBEFLEET_AGENT_STATE_DIR=" + cfg.StateDir, "CUBEFLEET_REPORT_PERIOD=100ms",
		"CUBEFLEET_RUNTIME=process", "CUBEFLEET_SANDBOX_DIR=" + sandboxes, "CUBEFLEET_AGENT_LISTEN=" + agenttest.ClosedAddr(t),
		"CUBEFLEET_AGENT_PID_FILE=" + filepath.Join(root, PIDFilePath), "CUBEFLEET_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1",
		"CUBEFLEET_SANDBOX_ALLOW_OWN_USER=" + strconv.FormatBool(os.Geteuid() != 0), "CUBEFLEET_AGENT_ENV_FILE=" + agenttest.EnvFile(t, ""),
	}
	var logs testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if d, err := cfg.ProcessDriver(nil, 0); err == nil { // whatever a failure left
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			d.StopAll(ctx)
			cancel()
			d.Close()
		}
	})
	testkit.WaitFor(t, 20*time.Second, "the agent's first work request", func() bool { return len(cp.CallsTo("/work")) > 0 })
	cp.Assign("127.0.0.1",
		nodeapi.Assignment{ID: "asg_1", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_plain", Argv: []string{"sleep", "300"}}},
		nodeapi.Assignment{ID: "asg_2", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_stubborn", Argv: []string{"/bin/sh", "-c", `trap "" TERM; sleep 300 & exec sleep 300`}, GraceSeconds: 600}},
		nodeapi.Assignment{ID: "asg_3", Kind: nodeapi.KindWarm, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_warm"}})
	testkit.WaitFor(t, 20*time.Second, "three sandboxes running", func() bool {
		return len(cp.States("sbx_plain")) > 0 && len(cp.States("sbx_stubborn")) > 0 && len(cp.States("sbx_warm")) > 0
	})
	var procs []int // the supervisors, and the sandboxes' main processes
	for _, id := range []string{"sbx_plain", "sbx_stubborn", "sbx_warm"} {
		for _, f := range []string{"supervisor.json", "state.json", "warm.json"} {
			var rec struct {
				PID     int
				Process struct{ PID int }
			}
			if data, err := os.ReadFile(filepath.Join(sandboxes, id, f)); err == nil && json.Unmarshal(data, &rec) == nil {
				procs = append(procs, max(rec.PID, rec.Process.PID))
			}
		}
	}
	if len(procs) != 6 {
		t.Fatalf("processes of the sandboxes: %v, want a supervisor and a process each", procs)
	}

	// The agent stops alone first: its sandboxes keep running (a restart would take them over).
	var out bytes.Buffer
	opt := DownOptions{Root: root, Out: &out, Config: &installed, SandboxWait: time.Second}
	if err := downAgent(context.Background(), opt); err != nil {
		t.Fatalf("stop the agent: %v\n%s", err, out.String())
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent still runs")
	}
	for _, pid := range procs {
		if !alive(pid) {
			t.Errorf("process %d of a sandbox ended with the agent", pid)
		}
	}
	if err := Down(context.Background(), opt); err != nil {
		t.Fatalf("Down: %v\n%s", err, out.String())
	}
	want := fmt.Sprintf("Stopped the agent (process %d; only this node's agent)\nThe agent is not running (no %s; no agent holds %s)\nStopped 3 sandboxes in %s (the next agent reports their ends)\n",
		cmd.Process.Pid, filepath.Join(root, PIDFilePath), filepath.Join(cfg.StateDir, agent.LockFile), sandboxes)
	if out.String() != want {
		t.Errorf("Down said:\n%s\nwant:\n%s", out.String(), want)
	}
	for _, pid := range procs {
		if alive(pid) {
			t.Errorf("process %d survived agent down", pid)
		}
	}
	if left := sandboxProcesses(); len(left) > 0 {
		t.Errorf("processes of the sandbox binary survive: %v", left)
	}
	if strings.Contains(logs.String(), "panic") {
		t.Errorf("the agent's log:\n%s", logs.String())
	}
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i > 0 && len(data) > i+2 && data[i+2] != 'Z'
}

// sandboxProcesses returns the live processes whose command line is a sandbox supervisor or exec
// stage of the tests' binary.
func sandboxProcesses() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		exe, _ := os.Readlink("/proc/" + e.Name() + "/exe")
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.HasPrefix(exe, binDir+"/") && bytes.HasPrefix(cmdline, []byte("cubefleet-sandbox-")) {
			out = append(out, e.Name()+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// binDir holds the cubefleet binary the tests build (once: cubefleetBinary), removed by TestMain.
var (
	binDir   string
	binOnce  sync.Once
	binError error
)

func TestMain(m *testing.M) {
	// The agents these tests start re-execute this binary as their sandboxes' supervisors (spares
	// are started ahead of need); without this, a supervisor would run the tests instead.
	process.MaybeRunSupervisor()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cubefleetBinary returns the path of the cubefleet binary, built once for the package's tests.
func cubefleetBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binError = os.MkdirTemp("", "cubefleet-hostsetup-"); binError != nil {
			return
		}
		os.Chmod(binDir, 0o755)
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "cubefleet"), "github.com/cubefleet/cubefleet/cmd/cubefleet").CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return filepath.Join(binDir, "cubefleet")
}

// TestDownWithEnvFile runs `agent run --env-file F` and then `agent down --env-file F` (both the
// built binary, as the two-node demo does): down finds the agent by the env file's settings (its
// PID file when it names one, else the process holding the state directory's agent.lock), stops
// it, waits for it to exit, stops its sandboxes and exits 0; the sandboxes' uid leases end.
func TestDownWithEnvFile(t *testing.T) {
	bin := cubefleetBinary(t)
	for _, withPIDFile := range []bool{false, true} {
		t.Run(map[bool]string{false: "lock holder", true: "PID file"}[withPIDFile], func(t *testing.T) {
			cp := agenttest.NewFakeCP(t, "cfj_join1")
			sandboxes := agenttest.SandboxDir(t)
			root := filepath.Dir(sandboxes)
			pidFile := filepath.Join(root, "agent.pid")
			env := strings.Join([]string{
				"ONE_CLICK_DEPLOY_ROLE=compute", "CUBEFLEET_CONTROL_PLANE=" + cp.URL,
				"CUBE_SANDBOX_NODE_IP=127.0.0.1", "CUBEFLEET_ALLOW_LOOPBACK=1", "CUBE_S3_ENDPOINT=http://127.0.0.1:9000",
				"CUBEFLEET_JOIN_TOKEN=cfj_join1", "CUBEFLEET_AGENT_STATE_DIR=" + filepath.Join(root, "state"), "CUBEFLEET_REPORT_PERIOD=100ms",
				"CUBEFLEET_RUNTIME=process", "CUBEFLEET_SANDBOX_DIR=" + sandboxes, "CUBEFLEET_AGENT_LISTEN=" + agenttest.ClosedAddr(t),
				"CUBEFLEET_NETWORK_CIDR_SKIP_CONFLICT_CHECK=1", "CUBEFLEET_SANDBOX_ALLOW_OWN_USER=" + strconv.FormatBool(os.Geteuid() != 0),
			}, "\n") + "\n"
			if withPIDFile {
				env += "CUBEFLEET_AGENT_PID_FILE=" + pidFile + "\n"
			}
			envFile := agenttest.EnvFile(t, env)
			cmd := exec.Command(bin, "agent", "run", "--env-file", envFile)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			var logs testkit.SyncBuffer
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { cmd.Process.Kill() })
			testkit.WaitFor(t, 20*time.Second, "the agent's first work request", func() bool { return len(cp.CallsTo("/work")) > 0 })
			cp.Assign("127.0.0.1", nodeapi.Assignment{ID: "asg_1", Kind: nodeapi.KindStart, Sandbox: &nodeapi.SandboxSpec{ID: "sbx_1", Argv: []string{"sleep", "300"}}})
			testkit.WaitFor(t, 20*time.Second, "the sandbox running", func() bool { return len(cp.States("sbx_1")) > 0 })
			var rec struct{ UID int }
			if data, err := os.ReadFile(filepath.Join(sandboxes, "sbx_1", "sandbox.json")); err != nil || json.Unmarshal(data, &rec) != nil {
				t.Fatalf("the sandbox's record: %v", err)
			}
			lease := filepath.Join("/run/cubefleet/sandbox-uids", strconv.Itoa(rec.UID))
			var state struct{ Process struct{ PID int } }
			if data, err := os.ReadFile(filepath.Join(sandboxes, "sbx_1", "state.json")); err != nil || json.Unmarshal(data, &state) != nil {
				t.Fatalf("the sandbox's state: %v", err)
			}

			down := exec.Command(bin, "agent", "down", "--env-file", envFile)
			down.Env = []string{"PATH=" + os.Getenv("PATH")}
			var stderr bytes.Buffer
			down.Stderr = &stderr
			out, err := down.Output()
			if err != nil {
				t.Fatalf("agent down: %v\n%s%s", err, out, stderr.String())
			}
			want := fmt.Sprintf("Stopped the agent (process %d; only this node's agent)\nStopped 1 sandbox in %s (the next agent reports their ends)\n", cmd.Process.Pid, sandboxes)
			if string(out) != want {
				t.Errorf("agent down said:\n%s\nwant:\n%s", out, want)
			}
			select {
			case <-exited:
			default:
				t.Error("the agent still runs after agent down returned")
			}
			if alive(state.Process.PID) {
				t.Errorf("the sandbox's process %d survived agent down", state.Process.PID)
			}
			if rec.UID >= 0 {
				if data, _ := os.ReadFile(lease); strings.TrimSpace(string(data)) == filepath.Join(sandboxes, "sbx_1") {
					t.Errorf("uid %d is still leased to the stopped sandbox", rec.UID)
				}
			}
			if _, err := os.Stat(pidFile); err == nil {
				t.Errorf("the PID file %s is left behind", pidFile)
			}
		})
	}
}

// TestDownSignalsOnlyTheAgent: a PID in the state directory's agent.lock (or in the PID file)
// whose process is not a cubefleet agent holding that lock is never signalled.
func TestDownSignalsOnlyTheAgent(t *testing.T) {
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	stateDir := filepath.Join(t.TempDir(), "state")
	cfg := testConfig(t, stateDir, "", "http://127.0.0.1:1")
	cfg.PIDFile = filepath.Join(t.TempDir(), "agent.pid")
	os.MkdirAll(stateDir, 0o700)
	pid := []byte(strconv.Itoa(other.Process.Pid) + "\n")
	os.WriteFile(filepath.Join(stateDir, agent.LockFile), pid, 0o600)
	os.WriteFile(cfg.PIDFile, pid, 0o644)
	var out bytes.Buffer
	noSystemctl := func(ctx context.Context, args ...string) error {
		t.Errorf("systemctl %v: the unit's agent is not this one", args)
		return nil
	}
	if err := Down(context.Background(), DownOptions{Out: &out, Config: cfg, Systemctl: noSystemctl}); err != nil {
		t.Fatalf("Down: %v\n%s", err, out.String())
	}
	if !alive(other.Process.Pid) {
		t.Fatalf("Down killed process %d, which is not an agent", other.Process.Pid)
	}
	if !strings.Contains(out.String(), "The agent is not running") {
		t.Errorf("Down said:\n%s", out.String())
	}
}
