package sandboxes_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestTerminationGrace: a sandbox's grace is its create's terminationGraceSeconds, else its
// template's, else 10 s; it is fixed at the create, shown on the sandbox and handed to the
// node (grace_seconds), and out-of-range values are refused naming the field.
func TestTerminationGrace(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 8)
		a.Start(20 * time.Millisecond)
		create := func(grace int64) sandboxes.Sandbox {
			t.Helper()
			s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"true"}, TerminationGraceSeconds: grace, CreatedBy: "svc_test"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		handed := func(s sandboxes.Sandbox) int64 {
			t.Helper()
			if _, done, err := e.Svc.Wait(ctx, "root", s.ID, false, 10*time.Second); err != nil || !done {
				t.Fatalf("wait %s: %v %v", s.ID, done, err)
			}
			sp, ok := a.Spec(s.ID)
			if !ok {
				t.Fatalf("%s never reached the node", s.ID)
			}
			return sp.GraceSeconds
		}

		s := create(0)
		if s.TerminationGraceSeconds != 10 || handed(s) != 10 {
			t.Errorf("default: shown %d, handed %d; want 10", s.TerminationGraceSeconds, handed(s))
		}
		s = create(45)
		if s.TerminationGraceSeconds != 45 || handed(s) != 45 {
			t.Errorf("the create's: shown %d, handed %d; want 45", s.TerminationGraceSeconds, handed(s))
		}

		// The template's, unless the create gives one; a later change of the template leaves
		// created sandboxes as they were.
		upd, _ := json.Marshal(map[string]any{"tenantId": "root", "id": e.Templates["root"], "terminationGraceSeconds": 120})
		if _, err := e.Compute.Update(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", upd); err != nil {
			t.Fatal(err)
		}
		s = create(0)
		if s.TerminationGraceSeconds != 120 || handed(s) != 120 {
			t.Errorf("the template's: shown %d, handed %d; want 120", s.TerminationGraceSeconds, handed(s))
		}
		if s2 := create(3); s2.TerminationGraceSeconds != 3 || handed(s2) != 3 {
			t.Errorf("the create's over the template's: %d, want 3", s2.TerminationGraceSeconds)
		}

		for _, bad := range []int64{-1, 3601} {
			_, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", TerminationGraceSeconds: bad, CreatedBy: "svc_test"})
			if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !containsPath(err, "terminationGraceSeconds") {
				t.Errorf("terminationGraceSeconds %d: %v, want INVALID_INPUT at terminationGraceSeconds", bad, err)
			}
		}
		upd, _ = json.Marshal(map[string]any{"tenantId": "root", "id": e.Templates["root"], "terminationGraceSeconds": 3601})
		if _, err := e.Compute.Update(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", upd); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !containsPath(err, "terminationGraceSeconds") {
			t.Errorf("a template's terminationGraceSeconds 3601: %v, want INVALID_INPUT at terminationGraceSeconds", err)
		}
	})
}

// containsPath reports whether err is a *cubefleet.Error naming path among its field errors.
func containsPath(err error, path string) bool {
	var ce *cubefleet.Error
	if !errors.As(err, &ce) {
		return false
	}
	if ce.Details["path"] == path {
		return true
	}
	fes, _ := ce.Details["errors"].([]cubefleet.FieldError)
	for _, fe := range fes {
		if fe.Path == path {
			return true
		}
	}
	return false
}
