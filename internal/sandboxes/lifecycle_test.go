package sandboxes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestLifecycle: a sandbox is placed on the node's agent, handed over the work API (its
// template's env with its own laid over), runs once, and its result is kept: exit code,
// output, every state with its time and reason.
func TestLifecycle(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = func(sp nodeapi.SandboxSpec) sandboxtest.Run {
			return sandboxtest.Run{Exit: 3, Stdout: []byte("hi\n"), Stderr: []byte("warn\n"), For: 10 * time.Millisecond}
		}
		a.Start(100 * time.Millisecond)
		s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"echo", "hi"},
			Env: map[string]string{"MODE": "test"}, TimeoutSeconds: 30, CreatedBy: "svc_test"})
		if err != nil {
			t.Fatal(err)
		}
		if s.State != sandboxes.StateStarting || s.NodeID != "127.0.0.2" {
			t.Fatalf("created: %+v", s)
		}
		got, done, err := e.Svc.Wait(ctx, "root", s.ID, false, 10*time.Second)
		if err != nil || !done {
			t.Fatalf("wait: %+v %v %v", got, done, err)
		}
		if got.State != sandboxes.StateExited || got.Result == nil || got.Result.ExitCode == nil || *got.Result.ExitCode != 3 {
			t.Fatalf("ended: %+v", got)
		}
		var states []sandboxes.State
		for _, tr := range got.States {
			states = append(states, tr.State)
		}
		if want := []sandboxes.State{sandboxes.StatePending, sandboxes.StateStarting, sandboxes.StateRunning, sandboxes.StateExited}; !slices.Equal(states, want) {
			t.Errorf("states %v, want %v", states, want)
		}
		_, out, err := e.Svc.Logs(ctx, "root", s.ID)
		if err != nil || string(out.Stdout) != "hi\n" || string(out.Stderr) != "warn\n" || !out.Final {
			t.Errorf("logs: %+v %v", out, err)
		}
		sp, _ := a.Spec(s.ID)
		if !slices.Equal(sp.Env, []string{"GREETING=hello", "MODE=test"}) || !slices.Equal(sp.Argv, []string{"echo", "hi"}) ||
			sp.CPUMillicores != 2000 || sp.MemoryMiB != 1024 || sp.TimeoutSeconds != 30 || sp.OutputLimitBytes != sandboxes.DefaultResultMaxBytes {
			t.Errorf("spec: %+v", sp)
		}
		if n := a.Starts(s.ID); n != 1 {
			t.Errorf("started %d times", n)
		}
	})
}
