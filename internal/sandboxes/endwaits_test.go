package sandboxes_test

import (
	"context"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestEndWaits: EndWaits answers the long polls in flight (sandboxes.wait, a logs follow, a
// work request) as their timeout would, and every later one at once; the sandbox runs on.
func TestEndWaits(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 4)
		a.Behave = func(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{For: time.Hour} }
		a.Start(100 * time.Millisecond)
		s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"sleep", "3600"}, CreatedBy: "svc_test"})
		if err != nil {
			t.Fatal(err)
		}
		if got, done, err := e.Svc.Wait(ctx, "root", s.ID, true, 10*time.Second); err != nil || !done {
			t.Fatalf("wait until running: %+v %v %v", got, done, err)
		}
		type answer struct {
			name string
			ok   bool
			err  error
		}
		polls := map[string]func() answer{
			"sandboxes.wait": func() answer {
				got, done, err := e.Svc.Wait(ctx, "root", s.ID, false, sandboxes.MaxWait)
				return answer{"sandboxes.wait", !done && got.State == sandboxes.StateRunning, err}
			},
			"logs follow": func() answer {
				_, out, err := e.Svc.Follow(ctx, "root", s.ID, sandboxes.Offsets{}, sandboxes.MaxWait)
				return answer{"logs follow", !out.Final, err}
			},
			"work": func() answer { // of a node with nothing queued
				out, err := e.Svc.Work(ctx, "127.0.0.9", &nodeapi.WorkRequest{Running: []string{}, WaitMS: nodeapi.MaxWaitMS})
				return answer{"work", err == nil && len(out.Assignments) == 0, err}
			},
		}
		answers := make(chan answer, len(polls))
		for _, poll := range polls {
			go func() { answers <- poll() }()
		}
		time.Sleep(200 * time.Millisecond) // the polls wait
		select {
		case a := <-answers:
			t.Fatalf("%s answered before EndWaits", a.name)
		default:
		}
		e.Svc.EndWaits()
		e.Svc.EndWaits() // again: nothing
		check := func(when string) {
			t.Helper()
			for range polls {
				select {
				case a := <-answers:
					if !a.ok || a.err != nil {
						t.Errorf("%s %s: ok %v, err %v; want the answer of its timeout", a.name, when, a.ok, a.err)
					}
				case <-time.After(10 * time.Second): // far below each poll's own wait
					t.Fatalf("a long poll %s did not answer", when)
				}
			}
		}
		check("in flight at EndWaits")
		for _, poll := range polls {
			go func() { answers <- poll() }()
		}
		check("begun after EndWaits")
		if got, done, err := e.Svc.Wait(ctx, "root", s.ID, true, time.Second); err != nil || !done {
			t.Errorf("the sandbox after EndWaits: %+v %v %v, want it running on", got, done, err)
		}
	})
}
