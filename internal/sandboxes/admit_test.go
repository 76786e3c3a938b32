package sandboxes_test

import (
	"context"
	"sync"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
)

func forever(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{} }

// refusal checks err is RESOURCE_EXHAUSTED naming quota in scope with limit and use.
func refusal(t *testing.T, err error, scope, quota string, limit, used int64) {
	t.Helper()
	ce, ok := err.(*cubefleet.Error)
	if !ok || ce.Code != cubefleet.CodeResourceExhausted {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
	}
	d := ce.Details
	if d["scope"] != scope || d["quota"] != quota || d["limit"] != limit || d["used"] != used || d["retryAfterSeconds"] == nil {
		t.Fatalf("details %v, want scope %s quota %s limit %d used %d", d, scope, quota, limit, used)
	}
}

// TestOfferQuota: a tenant's sandboxes count against the offer of the pool (vcpu: two
// sandboxes of 2 vCPU fill a quota of 4 exactly; a third is refused naming vcpu, its limit and
// use); ending one gives its share back.
func TestOfferQuota(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{Offer: map[string]int64{"vcpu": 4, "sandboxes": 10}}, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		a := e.NewAgent("127.0.0.2", 10)
		a.Behave = forever
		a.Start(50_000_000)
		first := e.Create("acme", "sleep")
		e.Create("acme", "sleep")
		_, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "acme", Template: "py", Command: []string{"sleep"}})
		refusal(t, err, "offer", "vcpu", 4, 4)
		if _, err := e.Svc.Delete(ctx, "acme", first.ID, nil); err != nil {
			t.Fatal(err)
		}
		e.Eventually(5e9, func() string {
			if _, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "acme", Template: "py", Command: []string{"sleep"}}); err != nil {
				return err.Error()
			}
			return ""
		})
		u, _ := e.Svc.TenantUsage(ctx, "acme")
		if len(u) != 1 || u[0].VCPU != 4 || u[0].Sandboxes != 2 {
			t.Errorf("usage %+v", u)
		}
	})
}

// TestOwnerShare: the pool owner keeps its share: offered tenants together take at most what
// the pool's nodes offer less the owner quota (2 nodes of 3 slots, the owner keeps 4: acme gets
// 2 although its offer allows 100), while the owner still gets its 4.
func TestOwnerShare(t *testing.T) {
	o := sandboxtest.Options{Offer: map[string]int64{"sandboxes": 100}, OwnerQuota: map[string]int64{"sandboxes": 4}}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		ctx := context.Background()
		for _, id := range []string{"127.0.0.2", "127.0.0.3"} {
			a := e.NewAgent(id, 3)
			a.Behave = forever
		}
		e.Create("acme", "sleep")
		e.Create("acme", "sleep")
		_, err := e.Svc.Create(ctx, sandboxes.CreateInput{TenantID: "acme", Template: "py", Command: []string{"sleep"}})
		refusal(t, err, "ownerShare", "sandboxes", 2, 2)
		for range 4 {
			e.Create("root", "sleep")
		}
	})
}

// TestTenantCap: a tenant's sandboxes over every pool are capped (--tenant-max-sandboxes).
func TestTenantCap(t *testing.T) {
	o := sandboxtest.Options{Config: func(c *sandboxes.Config) { c.TenantMaxSandboxes = 2 }}
	sandboxtest.Each(t, o, func(t *testing.T, e *sandboxtest.Env) {
		e.NewAgent("127.0.0.2", 10)
		e.Create("root", "sleep")
		e.Create("root", "sleep")
		_, err := e.Svc.Create(context.Background(), sandboxes.CreateInput{TenantID: "root", Template: "py", Command: []string{"sleep"}})
		refusal(t, err, "tenant", "sandboxes", 2, 2)
	})
}

// TestConcurrentCreatesHoldTheQuota: 60 creates at once against an offer of 10 sandboxes: exactly
// 10 are admitted, the rest refused RESOURCE_EXHAUSTED.
func TestConcurrentCreatesHoldTheQuota(t *testing.T) {
	sandboxtest.Each(t, sandboxtest.Options{Offer: map[string]int64{"sandboxes": 10}}, func(t *testing.T, e *sandboxtest.Env) {
		e.NewAgent("127.0.0.2", 100)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, refused := 0, 0
		for range 60 {
			wg.Go(func() {
				_, err := e.Svc.Create(context.Background(), sandboxes.CreateInput{TenantID: "acme", Template: "py", Command: []string{"sleep"}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case cubefleet.IsCode(err, cubefleet.CodeResourceExhausted):
					refused++
				default:
					t.Errorf("create: %v", err)
				}
			})
		}
		wg.Wait()
		if ok != 10 || refused != 50 {
			t.Errorf("%d admitted and %d refused, want 10 and 50", ok, refused)
		}
	})
}
