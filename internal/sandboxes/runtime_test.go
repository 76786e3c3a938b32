package sandboxes_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestTemplateRuntimePlacesItsSandboxes: a template's runtime joins the create's nodeSelector
// (cubefleet.io/runtime), so its sandbox waits while no node of that runtime has room and
// lands on the one that has it, never on a node of another runtime; the hand-off names the
// runtime and the template's egressAllow; a create whose own nodeSelector asks for another
// runtime is refused naming both; a template without a runtime places as before.
func TestTemplateRuntimePlacesItsSandboxes(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		raw, _ := json.Marshal(map[string]any{"tenantId": "root", "poolId": e.Pool, "flavorId": e.Flavor, "name": "vm", "imageId": "busybox",
			"network": "public", "runtime": "microvm", "egressAllow": []string{"10.20.0.0/16"}})
		if _, err := e.Compute.Create(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", raw); err != nil {
			t.Fatal(err)
		}
		proc := e.NewAgent("127.0.0.2", 4)
		proc.Start(50 * time.Millisecond)
		if _, err := e.Reg.Label(ctx, proc.ID, map[string]string{nodeapi.LabelRuntime: "process"}, nil); err != nil {
			t.Fatal(err)
		}

		s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "vm", Command: []string{"true"},
			NodeSelector: map[string]string{"zone": "a"}, CreatedBy: "svc_test"})
		if err != nil {
			t.Fatal(err)
		}
		if s.State != sandboxes.StatePending || s.NodeID != "" {
			t.Fatalf("with only a process node: %+v, want pending", s)
		}
		if want := map[string]string{"zone": "a", nodeapi.LabelRuntime: "microvm"}; !maps.Equal(s.NodeSelector, want) {
			t.Errorf("nodeSelector = %v, want %v", s.NodeSelector, want)
		}
		if _, err := e.Svc.Delete(ctx, "root", s.ID, nil); err != nil {
			t.Fatal(err)
		}

		vm := e.NewAgent("127.0.0.3", 4)
		vm.Start(50 * time.Millisecond)
		if _, err := e.Reg.Label(ctx, vm.ID, map[string]string{nodeapi.LabelRuntime: "microvm"}, nil); err != nil {
			t.Fatal(err)
		}
		// The template is prepared on the microvm node only once it says so, and the scheduler
		// hears of the label soon after: until then a create waits.
		testkit.WaitFor(t, 10*time.Second, "a create placed on the labelled microvm node", func() bool {
			if err := e.Svc.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			vm.Report()
			s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "vm", Command: []string{"true"}, CreatedBy: "svc_test"})
			if err != nil {
				t.Fatal(err)
			}
			if s.NodeID == "" {
				e.Svc.Delete(ctx, "root", s.ID, nil)
			}
			return s.NodeID != ""
		})
		for range 3 {
			s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "vm", Command: []string{"true"}, CreatedBy: "svc_test"})
			if err != nil {
				t.Fatal(err)
			}
			if s.NodeID != vm.ID {
				t.Fatalf("a microvm template's sandbox on %q, want the microvm node %s", s.NodeID, vm.ID)
			}
			if got, done, err := e.Svc.Wait(ctx, "root", s.ID, false, 10*time.Second); err != nil || !done {
				t.Fatalf("wait: %+v %v %v", got, done, err)
			}
			sp, _ := vm.Spec(s.ID)
			if sp.Runtime != "microvm" || !slices.Equal(sp.EgressAllow, []string{"10.20.0.0/16"}) || sp.Network != "public" {
				t.Errorf("hand-off: runtime %q, egress %v, network %q", sp.Runtime, sp.EgressAllow, sp.Network)
			}
		}

		_, err = e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "vm", Command: []string{"true"},
			NodeSelector: map[string]string{nodeapi.LabelRuntime: "process"}, CreatedBy: "svc_test"})
		var ce *cubefleet.Error
		if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !errors.As(err, &ce) ||
			!strings.Contains(ce.Error(), "cubefleet.io/runtime=process") || !strings.Contains(ce.Error(), "template vm runs on the microvm runtime") {
			t.Errorf("a selector for another runtime: %v", err)
		}

		// A warm pool of a microvm template is kept on the microvm node only, and a create
		// claims from it there.
		raw, _ = json.Marshal(map[string]any{"tenantId": "root", "poolId": e.Pool, "flavorId": e.Flavor, "name": "vmwarm", "imageId": "busybox",
			"network": "private", "runtime": "microvm", "warm": map[string]any{"min": 2, "max": 2}})
		if _, err := e.Compute.Create(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", raw); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 10*time.Second, "two warm sandboxes of vmwarm ready", func() bool {
			if err := e.Svc.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			vm.Report()
			if err := e.Svc.KeepWarm(ctx); err != nil {
				t.Fatal(err)
			}
			if err := e.Svc.PlaceWaiting(ctx); err != nil { // those created before the template was prepared there
				t.Fatal(err)
			}
			items, _, err := e.Svc.List(ctx, sandboxes.ListInput{TenantID: "root", Warm: true})
			if err != nil {
				t.Fatal(err)
			}
			ready := 0
			for _, w := range items {
				if w.NodeID != "" && w.NodeID != vm.ID {
					t.Fatalf("a warm sandbox of a microvm template on %s", w.NodeID)
				}
				if w.State == sandboxes.StateRunning && w.Reason == sandboxes.ReasonWarmReady {
					ready++
				}
			}
			return ready == 2
		})
		if s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "vmwarm", Command: []string{"true"}, CreatedBy: "svc_test"}); err != nil ||
			s.ClaimedAt == 0 || s.NodeID != vm.ID {
			t.Errorf("a create of vmwarm: %+v %v, want a claim on %s", s, err, vm.ID)
		}

		// The template without a runtime ("py") runs wherever there is room, and its hand-off
		// names none.
		s, err = e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"true"}, CreatedBy: "svc_test"})
		if err != nil || s.NodeID == "" {
			t.Fatalf("py: %+v %v", s, err)
		}
		if _, ok := s.NodeSelector[nodeapi.LabelRuntime]; ok {
			t.Errorf("py's nodeSelector = %v", s.NodeSelector)
		}
	})
}
