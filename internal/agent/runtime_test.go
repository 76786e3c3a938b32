package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// An agent refuses work for a runtime it does not run, whatever the control plane placed: a
// start for the microvm runtime on a process node fails at once naming both runtimes (a start
// for its own runtime runs), a prepare of a microvm template is not prepared; and an
// egress_allow entry outside the private ranges fails its sandbox naming the entry.
func TestRefusesAnotherRuntime(t *testing.T) {
	t.Parallel()
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	n := newSandboxNode(t, cp)
	if n.cfg.Runtime != RuntimeProcess {
		t.Fatalf("the test's agent runs %q", n.cfg.Runtime)
	}
	vm := start("asg_vm", "sbx_vm", "true")
	vm.Sandbox.Runtime = "microvm"
	own := start("asg_own", "sbx_own", "true")
	own.Sandbox.Runtime = "process"
	bad := start("asg_bad", "sbx_bad", "true")
	bad.Sandbox.Network, bad.Sandbox.EgressAllow = "public", []string{"10.20.0.0/16", "169.254.0.0/16"}
	cp.Assign(node, vm, own, bad,
		nodeapi.Assignment{ID: "asg_prep", Kind: nodeapi.KindPrepare, Template: &nodeapi.TemplateSpec{ID: "tpl_vm", Runtime: "microvm"}},
		nodeapi.Assignment{ID: "asg_prep2", Kind: nodeapi.KindPrepare, Template: &nodeapi.TemplateSpec{ID: "tpl_proc", Runtime: "process"}})

	end := n.waitStates("sbx_vm", nodeapi.StateFailed)
	if !strings.Contains(end.Message, "this node runs the process runtime (cubefleet.io/runtime=process)") || !strings.Contains(end.Message, "for the microvm runtime") {
		t.Errorf("the microvm sandbox's failure: %q", end.Message)
	}
	n.waitStates("sbx_own", nodeapi.StateRunning, nodeapi.StateExited)
	end = n.waitStates("sbx_bad", nodeapi.StateFailed)
	if !strings.Contains(end.Message, "egress_allow[1]: 169.254.0.0/16 is link-local") {
		t.Errorf("the bad egress_allow's failure: %q", end.Message)
	}
	testkit.WaitFor(t, 10*time.Second, "the prepares done and reported", func() bool {
		if !cp.Done("asg_prep") || !cp.Done("asg_prep2") {
			return false
		}
		var ids []string
		list, _ := n.lastStatus()["local_templates"].([]any)
		for _, l := range list {
			ids = append(ids, l.(map[string]any)["template_id"].(string))
		}
		return slices.Equal(ids, []string{"tpl_proc"})
	})
	if !strings.Contains(n.logs.String(), "this node runs the process runtime") {
		t.Errorf("the refused prepare is not logged with its reason:\n%s", n.logs.String())
	}
}

// The control plane's addresses, which a sandbox with egressAllow is kept from: IP literals as
// they are (IPv4-mapped ones unmapped), names resolved and kept for controlPlaneTTL, a name
// that does not resolve an error naming it.
func TestControlPlaneAddrs(t *testing.T) {
	now := time.Unix(1000, 0)
	lookups := 0
	cp := &controlPlane{urls: []string{"https://10.20.0.5:3010", "http://[::ffff:10.20.0.6]:3010", "https://cp.internal:443"},
		now: func() time.Time { return now },
		lookup: func(_ context.Context, _, host string) ([]netip.Addr, error) {
			lookups++
			if host != "cp.internal" {
				return nil, fmt.Errorf("no such host %s", host)
			}
			return []netip.Addr{netip.MustParseAddr("10.20.0.7"), netip.MustParseAddr("10.20.0.5")}, nil
		}}
	got, err := cp.Addrs(context.Background())
	want := []netip.Addr{netip.MustParseAddr("10.20.0.5"), netip.MustParseAddr("10.20.0.6"), netip.MustParseAddr("10.20.0.7")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Addrs = %v, %v; want %v", got, err, want)
	}
	cp.Addrs(context.Background())
	now = now.Add(controlPlaneTTL)
	cp.Addrs(context.Background())
	if lookups != 2 {
		t.Errorf("%d lookups, want one per %s", lookups, controlPlaneTTL)
	}
	cp.urls, cp.resolved = []string{"https://gone.internal"}, time.Time{}
	if _, err := cp.Addrs(context.Background()); err == nil || !strings.Contains(err.Error(), "resolve the control plane's host gone.internal") {
		t.Errorf("an unresolvable name: %v", err)
	}
}
