package sandboxes_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestTenantResultMaxBytes: a tenant's ended sandboxes keep at most --tenant-result-max-bytes of
// output together (300 here, results of 150): each new result past it drops the output of the
// tenant's oldest ones, whose records, exit codes and byte counts stay with a note in their
// message; the newest outputs and another tenant's are kept whole.
func TestTenantResultMaxBytes(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}, Config: func(c *sandboxes.Config) {
		c.ResultMaxBytes, c.TenantResultMaxBytes = 100, 300
	}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 10)
		a.Behave = func(sp nodeapi.SandboxSpec) sandboxtest.Run {
			return sandboxtest.Run{Exit: 7, Stdout: bytes.Repeat([]byte("o"), 100), Stderr: bytes.Repeat([]byte("e"), 50), For: time.Millisecond}
		}
		a.Start(50 * time.Millisecond)
		run := func(tenant string) sandboxes.Sandbox {
			t.Helper()
			s := e.Create(tenant, "print")
			got, done, err := e.Svc.Wait(ctx, tenant, s.ID, false, 10*time.Second)
			if err != nil || !done || got.State != sandboxes.StateExited {
				t.Fatalf("wait %s: %+v %v %v", s.ID, got, done, err)
			}
			e.Clock.Add(time.Second) // the next one ends later
			return got
		}
		other := run("acme")
		var ids []string
		for range 4 {
			ids = append(ids, run("root").ID)
		}
		for i, id := range ids {
			s, out, err := e.Svc.Logs(ctx, "root", id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Result == nil || s.Result.ExitCode == nil || *s.Result.ExitCode != 7 || s.Result.StdoutBytes != 100 || s.Result.StderrBytes != 50 {
				t.Errorf("sandbox %d: result %+v", i, s.Result)
			}
			pruned := strings.Contains(s.Message, "its output was pruned") && strings.Contains(s.Message, "--tenant-result-max-bytes 300")
			switch {
			case i < 2 && (!pruned || len(out.Stdout) != 0 || len(out.Stderr) != 0):
				t.Errorf("sandbox %d (oldest): message %q, output %d+%d bytes; want pruned", i, s.Message, len(out.Stdout), len(out.Stderr))
			case i >= 2 && (pruned || len(out.Stdout) != 100 || len(out.Stderr) != 50):
				t.Errorf("sandbox %d (newest): message %q, output %d+%d bytes; want kept", i, s.Message, len(out.Stdout), len(out.Stderr))
			}
		}
		if s, out, err := e.Svc.Logs(ctx, "acme", other.ID); err != nil || len(out.Stdout) != 100 || strings.Contains(s.Message, "pruned") {
			t.Errorf("acme's result: %q %d bytes %v", s.Message, len(out.Stdout), err)
		}
	})
}
