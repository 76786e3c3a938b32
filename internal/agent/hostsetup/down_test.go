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
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestDownLeavesNoProcess runs the built binary's `agent run` (as the installed unit runs it,
// with a PID file under a root) with sandboxes: a plain one, one that ignores SIGTERM, a warm
// one. Stopping the agent leaves its sandboxes running (so a restart of the agent keeps them);
// Down then stops every sandbox: no process of the agent, a supervisor or a sandbox survives.
func TestDownLeavesNoProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cubefleet")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/cubefleet/cubefleet/cmd/cubefleet").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	root := filepath.Dir(agenttest.SandboxDir(t)) // every user reaches its sandbox directory
	cfg := testConfig(t, filepath.Join(root, "state"), "cfj_join1", cp.URL)
	sandboxes := filepath.Join(root, agent.DefaultSandboxDir)
	cfg.SandboxDir = sandboxes
	installed := *cfg // what `agent down` reads: the installed agent's sandbox directory, under root
	installed.SandboxDir = agent.DefaultSandboxDir
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
	want := fmt.Sprintf("Stopped the agent (process %d; only this node's agent)\nThe agent is not running (no %s)\nStopped 3 sandboxes in %s (the next agent reports their ends)\n",
		cmd.Process.Pid, filepath.Join(root, PIDFilePath), sandboxes)
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
// stage of this test's binary.
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
		if strings.Contains(exe, "TestDownLeavesNoProcess") && bytes.HasPrefix(cmdline, []byte("cubefleet-sandbox-")) {
			out = append(out, e.Name()+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}
