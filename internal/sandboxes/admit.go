package sandboxes

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Admission (docs/sandboxes.md, "Quotas and admission"): a sandbox counts against
//   - the offer of its template's pool to its tenant (the offer's quota, per resource it names),
//     unless the tenant owns the pool;
//   - the pool owner's share: the units each owner quota keeps for the owner are never given to
//     offered tenants (what the pool's nodes offer, less the share, is all they may take
//     together), for the resources the nodes' reports size (vcpu, memoryGiB, sandboxes);
//   - the tenant's concurrency cap (--tenant-max-sandboxes), over every pool.
//
// It counts from its create until it ends (warm sandboxes too: they hold room). The counts are
// rows of sandboxes_usage, checked and changed in the transaction that creates or ends the
// sandbox, under the tenant's and the pool's lock on PostgreSQL (SQLite's write lock serializes
// every writer), so concurrent creates never pass a limit, and one exactly at it succeeds.

// usage is an amount of each quota resource.
type usage struct {
	VCPU, MemoryGiB, DiskGiB, GPU, Sandboxes int64
}

// of returns the amount of resource (a compute.EnforcedResources key); ok is false for others.
func (u usage) of(resource string) (int64, bool) {
	switch resource {
	case "vcpu":
		return u.VCPU, true
	case "memoryGiB":
		return u.MemoryGiB, true
	case "diskGiB":
		return u.DiskGiB, true
	case "gpu":
		return u.GPU, true
	case "sandboxes":
		return u.Sandboxes, true
	}
	return 0, false
}

// resources lists the quota resources in the order refusals check them.
var resources = []string{"sandboxes", "vcpu", "memoryGiB", "diskGiB", "gpu"}

// OwnerPriority is the admission priority of a pool owner's own sandboxes: above every offer's
// (offers rank 0 to 1000).
const OwnerPriority = 1001

// retryAfterSeconds is the retry hint of a quota refusal: about when sandboxes that end have
// given their share back.
const retryAfterSeconds = 5

// terms are what admission checks a tenant's sandboxes on one pool against.
type terms struct {
	owner    string           // the pool's owner
	offer    map[string]int64 // the offer's quota; nil for the owner
	priority int              // the offer's priority; OwnerPriority for the owner
	share    map[string]int64 // the owner quotas: what the owner keeps
	capacity usage            // what the pool's nodes offer (vcpu, memoryGiB, sandboxes)
}

// termsOf returns the terms of tenant on pool (owned by owner). A tenant that neither owns nor
// is offered the pool is INVALID_INPUT (its template names a pool it may not use any more).
func (s *Service) termsOf(ctx context.Context, tenant, pool, owner string) (terms, error) {
	t := terms{owner: owner, priority: OwnerPriority}
	if tenant != owner {
		offer, ok, err := compute.OfferTo(ctx, s.db, pool, tenant)
		if err != nil {
			return terms{}, err
		}
		if !ok {
			return terms{}, cubefleet.Invalid("template", "pool %s is no longer offered to tenant %s, so its templates cannot start sandboxes", pool, tenant)
		}
		t.offer, t.priority = offer.Quota, offer.Priority
		if t.offer == nil {
			t.offer = map[string]int64{}
		}
		share, err := compute.OwnerQuotas(ctx, s.db, pool)
		if err != nil {
			return terms{}, err
		}
		t.share = share
		t.capacity = s.capacity(pool)
	}
	return t, nil
}

// capacity sums what the nodes of pool offer: their CPU quota in whole cores, memory quota in
// whole GiB and microVM slots, over the nodes that run cubefleet agent, are not Down or Lost,
// and are not draining.
func (s *Service) capacity(pool string) usage {
	var c usage
	var cpu, mem int64
	for _, n := range s.cfg.Nodes.WorkNodes() {
		if n.PoolID != pool || !n.Cubefleet || n.Draining || n.State == nodes.StateDown || n.State == nodes.StateLost {
			continue
		}
		cpu += n.QuotaCPU
		mem += n.QuotaMemMiB
		c.Sandboxes += n.MaxMVM
	}
	c.VCPU, c.MemoryGiB = cpu/1000, mem/1024
	return c
}

// sized reports whether the nodes' reports size resource (the owner's share of the others is
// not enforced: nothing knows the pool's total).
func sized(resource string) bool {
	return resource == "vcpu" || resource == "memoryGiB" || resource == "sandboxes"
}

// exhausted is the RESOURCE_EXHAUSTED refusal of a sandbox needing need of resource where limit
// holds and used is taken: details {quota, scope, limit, used, requested, poolId,
// retryAfterSeconds}.
func exhausted(scope, resource, pool string, limit, used, need int64, msg string) error {
	return &cubefleet.Error{Code: cubefleet.CodeResourceExhausted, Message: msg, Details: map[string]any{
		"quota": resource, "scope": scope, "limit": limit, "used": used, "requested": need, "poolId": pool,
		"retryAfterSeconds": retryAfterSeconds,
	}}
}

// admit checks that r fits its tenant's quotas and charges it, in tx. Errors: RESOURCE_EXHAUSTED
// naming the quota, its limit and its use, with a retry hint.
func (s *Service) admit(ctx context.Context, tx *sql.Tx, r *record, t terms) error {
	if err := s.db.LockKey(ctx, tx, "sandboxes:tenant:"+r.TenantID); err != nil {
		return err
	}
	if err := s.db.LockKey(ctx, tx, "sandboxes:pool:"+r.PoolID); err != nil {
		return err
	}
	need := r.usage()
	var live int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(sandboxes), 0) FROM sandboxes_usage WHERE tenant_id = $1`, r.TenantID).Scan(&live); err != nil {
		return fmt.Errorf("read the usage of %s: %w", r.TenantID, err)
	}
	if limit := int64(s.cfg.TenantMaxSandboxes); live+1 > limit {
		return exhausted("tenant", "sandboxes", r.PoolID, limit, live, 1,
			fmt.Sprintf("tenant %s has %d sandboxes pending, starting or running, its concurrency cap (--tenant-max-sandboxes %d): retry when some have ended, or delete some",
				r.TenantID, live, limit))
	}
	if r.TenantID != t.owner {
		mine, err := usageWhere(ctx, tx, `tenant_id = $1 AND pool_id = $2`, r.TenantID, r.PoolID)
		if err != nil {
			return err
		}
		for _, res := range resources {
			limit, ok := t.offer[res]
			if !ok {
				continue
			}
			used, _ := mine.of(res)
			n, _ := need.of(res)
			if used+n > limit {
				return exhausted("offer", res, r.PoolID, limit, used, n,
					fmt.Sprintf("the offer of pool %s to tenant %s allows %d %s and the tenant uses %d; this sandbox needs %d more: retry when some of its sandboxes have ended, or ask the pool's owner for a larger quota",
						s.poolNameIn(ctx, tx, r.PoolID), r.TenantID, limit, res, used, n))
			}
		}
		if len(t.share) > 0 {
			others, err := usageWhere(ctx, tx, `pool_id = $1 AND tenant_id <> $2`, r.PoolID, t.owner)
			if err != nil {
				return err
			}
			for _, res := range resources {
				keep, ok := t.share[res]
				if !ok || !sized(res) {
					continue
				}
				total, _ := t.capacity.of(res)
				used, _ := others.of(res)
				n, _ := need.of(res)
				if limit := max(total-keep, 0); used+n > limit {
					return exhausted("ownerShare", res, r.PoolID, limit, used, n,
						fmt.Sprintf("pool %s keeps %d of its %d %s for its owner %s; the tenants it is offered to use %d of the other %d and this sandbox needs %d more: retry when sandboxes on the pool have ended",
							s.poolNameIn(ctx, tx, r.PoolID), keep, total, res, t.owner, used, limit, n))
				}
			}
		}
	}
	return charge(ctx, tx, r.TenantID, r.PoolID, need, 1)
}

// usageWhere sums the usage rows where holds.
func usageWhere(ctx context.Context, q store.Querier, where string, args ...any) (usage, error) {
	var u usage
	err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(vcpu), 0), COALESCE(SUM(memory_gib), 0), COALESCE(SUM(disk_gib), 0), COALESCE(SUM(gpu), 0),
		COALESCE(SUM(sandboxes), 0) FROM sandboxes_usage WHERE `+where, args...).Scan(&u.VCPU, &u.MemoryGiB, &u.DiskGiB, &u.GPU, &u.Sandboxes)
	if err != nil {
		return usage{}, fmt.Errorf("read sandbox usage: %w", err)
	}
	return u, nil
}

// charge adds (sign 1) or gives back (sign -1) u to tenant's usage of pool.
func charge(ctx context.Context, q store.Querier, tenant, pool string, u usage, sign int64) error {
	_, err := q.ExecContext(ctx, `INSERT INTO sandboxes_usage (tenant_id, pool_id, vcpu, memory_gib, disk_gib, gpu, sandboxes)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tenant_id, pool_id) DO UPDATE SET vcpu = sandboxes_usage.vcpu + excluded.vcpu,
			memory_gib = sandboxes_usage.memory_gib + excluded.memory_gib, disk_gib = sandboxes_usage.disk_gib + excluded.disk_gib,
			gpu = sandboxes_usage.gpu + excluded.gpu, sandboxes = sandboxes_usage.sandboxes + excluded.sandboxes`,
		tenant, pool, sign*u.VCPU, sign*u.MemoryGiB, sign*u.DiskGiB, sign*u.GPU, sign*u.Sandboxes)
	if err != nil {
		return fmt.Errorf("charge the usage of %s on %s: %w", tenant, pool, err)
	}
	return nil
}

// Usage is what a tenant's sandboxes take of one pool (vcpu cores, GiB, devices, sandboxes).
type Usage struct {
	PoolID    string `json:"poolId"`
	VCPU      int64  `json:"vcpu"`
	MemoryGiB int64  `json:"memoryGiB"`
	DiskGiB   int64  `json:"diskGiB"`
	GPU       int64  `json:"gpu"`
	Sandboxes int64  `json:"sandboxes"`
}

// TenantUsage returns what tenant's sandboxes (pending, starting or running) take of each pool,
// by pool id.
func (s *Service) TenantUsage(ctx context.Context, tenant string) ([]Usage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT pool_id, vcpu, memory_gib, disk_gib, gpu, sandboxes FROM sandboxes_usage
		WHERE tenant_id = $1 AND sandboxes > 0 ORDER BY pool_id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("read the usage of %s: %w", tenant, err)
	}
	defer rows.Close()
	out := []Usage{}
	for rows.Next() {
		var u Usage
		if err := rows.Scan(&u.PoolID, &u.VCPU, &u.MemoryGiB, &u.DiskGiB, &u.GPU, &u.Sandboxes); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}
