package sandboxes_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

// TestHandOffSendsOnlyEgressInsidePoolPolicy: the work assignment carries only the entries of
// the template's egressAllow that lie inside its pool's policy.egressAllow as it is when the
// sandbox starts, even when the stored pool changed behind compute's back (or the template
// predates the policy): a narrowed policy drops the entries outside it, no policy drops all.
func TestHandOffSendsOnlyEgressInsidePoolPolicy(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		upd, _ := json.Marshal(map[string]any{"tenantId": "root", "id": e.Templates["root"], "network": "public",
			"egressAllow": []string{"10.20.0.0/16", "10.20.5.0/24", "10.20.9.9/32"}})
		if _, err := e.Compute.Update(ctx, e.DB, compute.KindSandboxTemplate, "svc_test", upd); err != nil {
			t.Fatal(err)
		}
		setPolicy := func(policy *compute.Policy) {
			t.Helper()
			pool, err := compute.Load(ctx, e.DB, e.Pool)
			if err != nil {
				t.Fatal(err)
			}
			var ps compute.PoolSpec
			if err := pool.DecodeSpec(&ps); err != nil {
				t.Fatal(err)
			}
			ps.Policy = policy
			spec, _ := json.Marshal(ps)
			if _, err := e.DB.ExecContext(ctx, `UPDATE compute_objects SET spec = $1 WHERE id = $2`, string(spec), e.Pool); err != nil {
				t.Fatal(err)
			}
		}
		a := e.NewAgent("127.0.0.2", 4)
		a.Start(50 * time.Millisecond)
		for _, tc := range []struct {
			name   string
			policy *compute.Policy
			want   []string
		}{
			{"the policy as compute checked it", &compute.Policy{EgressAllow: []string{"10.20.0.0/16"}}, []string{"10.20.0.0/16", "10.20.5.0/24", "10.20.9.9/32"}},
			{"a narrowed policy", &compute.Policy{EgressAllow: []string{"10.20.5.0/24", "10.20.9.0/24"}}, []string{"10.20.5.0/24", "10.20.9.9/32"}},
			{"a policy beside every entry", &compute.Policy{EgressAllow: []string{"192.168.7.0/24"}}, nil},
			{"no policy", nil, nil},
		} {
			setPolicy(tc.policy)
			s, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"true"}, CreatedBy: "svc_test"})
			if err != nil {
				t.Fatal(err)
			}
			if got, done, err := e.Svc.Wait(ctx, "root", s.ID, false, 10*time.Second); err != nil || !done {
				t.Fatalf("%s: wait: %+v %v %v", tc.name, got, done, err)
			}
			sp, ok := a.Spec(s.ID)
			if !ok || sp.Network != "public" || !slices.Equal(sp.EgressAllow, tc.want) {
				t.Errorf("%s: the hand-off's egressAllow %v (network %q, %v), want %v", tc.name, sp.EgressAllow, sp.Network, ok, tc.want)
			}
		}
	})
}
