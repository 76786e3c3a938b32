package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestDisconnectGraceOnAgents: a real agent frozen (SIGSTOP) while its sandbox runs: its node
// goes Down and the sandbox is unknown; continued (SIGCONT) within --disconnect-grace, the
// sandbox runs on and ends normally, exited 0. Frozen past the grace, its sandbox is lost; the
// agent, continued, is told to stop it: its processes end, and it stays lost.
func TestDisconnectGraceOnAgents(t *testing.T) {
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			f := newSandboxFleet(t, dsn(t), 1, "--disconnect-grace", "8s")
			a := f.agents[0]
			state := func(id string, want sandboxes.State) func() bool {
				return func() bool { return f.get(id).State == want }
			}
			freeze := func() { a.proc.cmd.Process.Signal(syscall.SIGSTOP) }
			thaw := func() { a.proc.cmd.Process.Signal(syscall.SIGCONT) }
			t.Cleanup(thaw)

			// Back within the grace: it runs on to its end.
			s := f.create("sh", nil, "sleep", "12")
			testkit.WaitFor(t, 30*time.Second, "the sandbox running", state(s.ID, sandboxes.StateRunning))
			freeze()
			testkit.WaitFor(t, 30*time.Second, "the sandbox unknown", state(s.ID, sandboxes.StateUnknown))
			thaw()
			testkit.WaitFor(t, 30*time.Second, "the sandbox running again", func() bool {
				got := f.get(s.ID)
				return got.State == sandboxes.StateRunning && got.Reason == sandboxes.ReasonReconnected
			})
			got := f.wait(s.ID, 60*time.Second)
			if got.State != sandboxes.StateExited || got.Result == nil || got.Result.ExitCode == nil || *got.Result.ExitCode != 0 {
				t.Fatalf("its end after the reconnect: %+v", got)
			}

			// Past the grace: lost, and stopped when the agent is back.
			d := f.create("sh", nil, "sleep", "300")
			testkit.WaitFor(t, 30*time.Second, "the second sandbox running", state(d.ID, sandboxes.StateRunning))
			pids := a.sandboxPIDs(d.ID)
			if len(pids) == 0 {
				t.Fatalf("no process of %s in %s", d.ID, a.sandboxDir)
			}
			freeze()
			testkit.WaitFor(t, 60*time.Second, "the second sandbox lost", state(d.ID, sandboxes.StateLost))
			if got := f.get(d.ID); got.Reason != sandboxes.ReasonNodeDown || !strings.Contains(got.Message, "past its disconnect grace of 8s") {
				t.Errorf("lost: %s %q", got.Reason, got.Message)
			}
			thaw()
			testkit.WaitFor(t, 60*time.Second, "the lost sandbox's processes stopped", func() bool {
				for _, pid := range pids {
					if syscall.Kill(pid, 0) == nil {
						return false
					}
				}
				return true
			})
			if got := f.get(d.ID); got.State != sandboxes.StateLost {
				t.Errorf("after its node stopped it: %+v", got)
			}
		})
	}
}

// sandboxPIDs returns the process ids the process driver recorded for sandbox id (its
// supervisor's and its command's).
func (a *sandboxAgent) sandboxPIDs(id string) []int {
	var out []int
	for _, name := range []string{"supervisor.json", "state.json"} {
		var rec struct {
			PID     int
			Process struct{ PID int }
		}
		if data, err := os.ReadFile(filepath.Join(a.sandboxDir, id, name)); err == nil && json.Unmarshal(data, &rec) == nil {
			for _, pid := range []int{rec.PID, rec.Process.PID} {
				if pid > 1 {
					out = append(out, pid)
				}
			}
		}
	}
	return out
}
