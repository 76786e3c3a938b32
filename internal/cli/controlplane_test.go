package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/ionos/ionossim"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// TestControlPlaneAdapter drives every cubes.ControlPlane call against a real control plane:
// members of the pool, cordon, uncordon, drain with a deadline, a join token bound to an
// address, and sandbox calls refused for a template and a sandbox that do not exist.
func TestControlPlaneAdapter(t *testing.T) {
	c := mustServe(t, "")
	f := newCubeFleet(t, c, 2)
	p, err := readFile(f.profile, "--profile", cubes.DecodeProfile, func([]byte) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cp, err := profileControlPlane(func(string) string { return "" }, "", p.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ms, err := cp.Members(ctx, p.ControlPlane.Pool)
	if err != nil || len(ms) != 2 || ms[0].IP != ionossim.SampleServerIP(0) || ms[0].State != "Ready" || ms[0].PoolID != p.ControlPlane.Pool {
		t.Fatalf("members %+v %v", ms, err)
	}
	ip := ms[0].ID
	if err := cp.Cordon(ctx, ip, "roundtrip"); err != nil {
		t.Fatal(err)
	}
	if m, err := cp.Member(ctx, ip); err != nil || !m.Cordoned || m.Draining {
		t.Errorf("cordoned: %+v %v", m, err)
	}
	if err := cp.Uncordon(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if err := cp.Drain(ctx, ip, "scale down", 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if m, err := cp.Member(ctx, ip); err != nil || !m.Cordoned || !m.Draining {
		t.Errorf("draining: %+v %v", m, err)
	}
	token, err := cp.CreateJoinToken(ctx, p.ControlPlane.Pool, ionossim.SampleServerIP(2), 10*time.Minute)
	if err != nil || !strings.HasPrefix(token, "cfj_") {
		t.Fatalf("join token: %v", err)
	}
	// The token is bound to its address: a node registering as another is refused.
	if code, _ := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", "10.7.0.99")); code == 200 {
		t.Error("a join token bound to 10.7.0.13 registered 10.7.0.99")
	}
	var e *cubefleet.Error
	if _, err := cp.Member(ctx, "10.9.9.9"); !errors.As(err, &e) || e.Code != cubefleet.CodeNotFound {
		t.Errorf("an unknown node: %v", err)
	}
	if _, err := cp.CreateSandbox(ctx, "root", "no-such-template", ip, nil); !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput || !strings.Contains(e.Message, "no-such-template") {
		t.Errorf("a canary of an unknown template: %v", err)
	}
	if _, err := cp.Sandbox(ctx, "root", "sbx_01J00000000000000000000000"); !errors.As(err, &e) || e.Code != cubefleet.CodeNotFound {
		t.Errorf("an unknown sandbox: %v", err)
	}
}
