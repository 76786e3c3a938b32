package compute

import (
	"context"
	"fmt"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/store"
)

// A template's egressAllow entries lie inside its pool's policy.egressAllow: the pool's owner,
// not the tenants it offers the pool to, decides which private prefixes the pool's sandboxes
// may reach. A template create or update checks its entries against its pool's policy, a pool
// update checks the pool's templates against the new policy; a caller that sets
// Service.DeferEgress (fleet apply, where a pool and its templates change in one transaction)
// runs CheckEgress on the final state instead.

// egressOutside is one template entry outside its pool's policy.
type egressOutside struct {
	template Object
	index    int
	entry    string
}

// templateEgress checks the egressAllow of ts, a template on pool, against the pool's
// policy.egressAllow: INVALID_INPUT at the first entry outside it, naming the entry, the pool
// and the fix, with every such entry in the details.
func (s *Service) templateEgress(ctx context.Context, q store.Querier, ts *SandboxTemplateSpec, pool Object) error {
	if s.DeferEgress || len(ts.EgressAllow) == 0 {
		return nil
	}
	policy, err := policyEgress(pool)
	if err != nil {
		return err
	}
	outside := fieldrules.EgressOutside(ts.EgressAllow, policy)
	if outside == nil {
		return nil
	}
	pool, err = s.named(ctx, q, pool)
	if err != nil {
		return err
	}
	var p problems
	for _, i := range outside {
		p.add(fmt.Sprintf("egressAllow[%d]", i), "%s", fieldrules.EgressOutsidePolicy(ts.EgressAllow[i], poolLabel(pool), policy))
	}
	return cubefleet.InvalidAll(p)
}

// poolEgress refuses an update of pool to ps that would leave an entry of one of the pool's
// templates outside ps's policy.egressAllow: INVALID_INPUT at policy.egressAllow naming up to
// five of those templates and their entries.
func (s *Service) poolEgress(ctx context.Context, q store.Querier, pool Object, ps *PoolSpec) error {
	if s.DeferEgress {
		return nil
	}
	var policy []string
	if ps.Policy != nil {
		policy = ps.Policy.EgressAllow
	}
	tpls, err := egressTemplates(ctx, q, `ref_a = $2`, pool.ID)
	if err != nil {
		return err
	}
	out, err := outsideOf(tpls, func(string) ([]string, error) { return policy, nil })
	if err != nil || out == nil {
		return err
	}
	return cubefleet.Invalid("policy.egressAllow", "policy.egressAllow would leave %s outside it; keep prefixes that hold those entries, or have those templates' egressAllow narrowed first (each by its own tenant)", listOutside(out))
}

// CheckEgress checks, inside q, that every egressAllow entry of a template of tenantID, and of
// every template on a pool of tenantID, lies inside its pool's policy.egressAllow as stored:
// INVALID_INPUT naming up to five templates, their entries, and the fix. A caller that sets
// Service.DeferEgress runs it once before it commits. It costs one query of the templates that
// have an egressAllow and one load of each of their pools.
func (s *Service) CheckEgress(ctx context.Context, q store.Querier, tenantID string) error {
	tpls, err := egressTemplates(ctx, q, `(tenant_id = $2 OR ref_a IN (SELECT id FROM compute_objects WHERE tenant_id = $2 AND kind = $3))`, tenantID, KindPool)
	if err != nil {
		return err
	}
	pools := map[string]Object{}
	out, err := outsideOf(tpls, func(id string) ([]string, error) {
		o, ok := pools[id]
		if !ok {
			loaded, err := Load(ctx, q, id)
			if err != nil {
				return nil, err
			}
			if o, err = s.named(ctx, q, loaded); err != nil {
				return nil, err
			}
			pools[id] = o
		}
		return policyEgress(o)
	})
	if err != nil || out == nil {
		return err
	}
	first := out[0]
	var ts SandboxTemplateSpec
	if err := first.template.DecodeSpec(&ts); err != nil {
		return err
	}
	policy, err := policyEgress(pools[ts.PoolID])
	if err != nil {
		return err
	}
	return cubefleet.Invalid("egressAllow", "%s: %s (all outside: %s)", describe(first.template),
		fieldrules.EgressOutsidePolicy(first.entry, poolLabel(pools[ts.PoolID]), policy), listOutside(out))
}

// egressTemplates returns the sandbox templates matching where (placeholders from $2, args)
// whose spec has an egressAllow, by id.
func egressTemplates(ctx context.Context, q store.Querier, where string, args ...any) ([]Object, error) {
	return queryObjects(ctx, q, `kind = $1 AND spec LIKE '%"egressAllow":%' AND `+where+` ORDER BY id`, append([]any{KindSandboxTemplate}, args...)...)
}

// outsideOf returns the entries of tpls' egressAllow outside the policy policyOf returns for
// their pool, in order; nil when there are none.
func outsideOf(tpls []Object, policyOf func(poolID string) ([]string, error)) ([]egressOutside, error) {
	var out []egressOutside
	for _, t := range tpls {
		var ts SandboxTemplateSpec
		if err := t.DecodeSpec(&ts); err != nil {
			return nil, err
		}
		policy, err := policyOf(ts.PoolID)
		if err != nil {
			return nil, err
		}
		for _, i := range fieldrules.EgressOutside(ts.EgressAllow, policy) {
			out = append(out, egressOutside{t, i, ts.EgressAllow[i]})
		}
	}
	return out, nil
}

// listOutside names up to five entries of out: "template web (tpl_...) egressAllow[0]
// 10.0.0.0/8".
func listOutside(out []egressOutside) string {
	var parts []string
	for _, o := range out[:min(len(out), 5)] {
		parts = append(parts, fmt.Sprintf("%s egressAllow[%d] %s", describe(o.template), o.index, o.entry))
	}
	if len(out) > 5 {
		parts = append(parts, fmt.Sprintf("%d more", len(out)-5))
	}
	return strings.Join(parts, ", ")
}

// policyEgress returns the policy.egressAllow of pool, a pool object.
func policyEgress(pool Object) ([]string, error) {
	var ps PoolSpec
	if err := pool.DecodeSpec(&ps); err != nil {
		return nil, err
	}
	if ps.Policy == nil {
		return nil, nil
	}
	return ps.Policy.EgressAllow, nil
}

// poolLabel is how a message names pool: its fleet name when it has one, else its id.
func poolLabel(pool Object) string {
	if pool.Name != "" {
		return pool.Name
	}
	return pool.ID
}
