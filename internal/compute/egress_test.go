package compute_test

import (
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// A tenant's template on a pool another tenant offers it may allow only private prefixes inside
// the pool's policy.egressAllow; the pool's owner cannot narrow the policy under a template that
// uses it; a caller that defers the rule (fleet apply) checks the final state.
func TestTemplateEgressInsidePoolPolicy(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		acme := e.base("acme")
		pool := e.mustCreate(compute.KindPool, map[string]any{"tenantId": "acme", "siteId": acme.site.ID, "class": "vps-host",
			"policy": map[string]any{"egressAllow": []any{"10.20.0.0/16"}}})
		flavor := e.mustCreate(compute.KindFlavor, map[string]any{"tenantId": "acme", "poolId": pool.ID, "name": "g1.small", "vcpu": 2, "memoryGiB": 4, "diskGiB": 40})
		e.mustCreate(compute.KindOffer, map[string]any{"tenantId": "acme", "poolId": pool.ID, "toTenantId": "root"})
		tpl := func(name string, egress ...any) map[string]any {
			return map[string]any{"tenantId": "root", "name": name, "poolId": pool.ID, "flavorId": flavor.ID, "imageId": "ubuntu-24.04",
				"network": "public", "egressAllow": egress}
		}

		_, err := e.create(compute.KindSandboxTemplate, tpl("wide", "10.0.0.0/8"))
		wantCode(t, "a tenant's template allowing the operator's private network", err, cubefleet.CodeInvalidInput, "egressAllow[0]",
			"egressAllow[0]: 10.0.0.0/8 is outside what pool "+pool.ID+" lets its sandboxes reach: the pool allows only 10.20.0.0/16; allow a prefix inside those, or add it to pool "+pool.ID+"'s policy.egressAllow, which only the pool's owner can change")
		if strings.Count(err.Error(), "egressAllow[0]") != 1 {
			t.Errorf("the message names the entry more than once: %v", err)
		}
		_, err = e.create(compute.KindSandboxTemplate, tpl("beside", "10.20.1.0/24", "10.21.0.0/16"))
		wantCode(t, "a second entry beside the policy", err, cubefleet.CodeInvalidInput, "egressAllow[1]", "10.21.0.0/16 is outside")
		inside := e.mustCreate(compute.KindSandboxTemplate, tpl("inside", "10.20.1.0/24", "10.20.9.9/32"))
		_, err = e.update(compute.KindSandboxTemplate, map[string]any{"tenantId": "root", "id": inside.ID, "egressAllow": []any{"10.20.1.0/24", "172.16.0.0/12"}})
		wantCode(t, "an update widening the template", err, cubefleet.CodeInvalidInput, "egressAllow[1]", "172.16.0.0/12 is outside")

		// The pool's owner cannot leave the template's entries outside a new policy.
		for _, policy := range []any{
			map[string]any{"egressAllow": []any{"10.20.1.0/24"}},
			map[string]any{"disruptionBudget": 0.5},
			nil,
		} {
			_, err = e.update(compute.KindPool, map[string]any{"tenantId": "acme", "id": pool.ID, "policy": policy})
			wantCode(t, "a shrinking pool update", err, cubefleet.CodeInvalidInput, "policy.egressAllow", "sandboxTemplate inside ("+inside.ID+") egressAllow[1] 10.20.9.9/32")
		}
		if _, err := e.update(compute.KindPool, map[string]any{"tenantId": "acme", "id": pool.ID,
			"policy": map[string]any{"egressAllow": []any{"10.20.0.0/16", "192.168.7.0/24"}}}); err != nil {
			t.Fatalf("a widening pool update: %v", err)
		}
		e.mustCreate(compute.KindSandboxTemplate, tpl("widened", "192.168.7.0/24"))

		// Deferred, the calls run in either order and CheckEgress judges where they end.
		deferred := *e.svc
		deferred.DeferEgress = true
		tx, err := db.BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := deferred.Update(e.ctx, tx, compute.KindPool, caller, raw(t, map[string]any{"tenantId": "acme", "id": pool.ID,
			"policy": map[string]any{"egressAllow": []any{"10.20.1.0/24", "192.168.7.0/24"}}})); err != nil {
			t.Fatalf("a deferred shrinking pool update: %v", err)
		}
		for _, tenant := range []string{"acme", "root"} {
			err = deferred.CheckEgress(e.ctx, tx, tenant)
			wantCode(t, "the final state with the template outside, for "+tenant, err, cubefleet.CodeInvalidInput, "egressAllow",
				"sandboxTemplate inside ("+inside.ID+"): 10.20.9.9/32 is outside what pool "+pool.ID)
		}
		if _, err := deferred.Update(e.ctx, tx, compute.KindSandboxTemplate, caller, raw(t, map[string]any{"tenantId": "root", "id": inside.ID,
			"egressAllow": []any{"10.20.1.0/24"}})); err != nil {
			t.Fatalf("a deferred narrowing template update: %v", err)
		}
		for _, tenant := range []string{"acme", "root", "globex"} {
			if err := deferred.CheckEgress(e.ctx, tx, tenant); err != nil {
				t.Errorf("the final state with every entry inside, for %s: %v", tenant, err)
			}
		}
	})
}
