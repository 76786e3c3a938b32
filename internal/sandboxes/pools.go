package sandboxes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/cubefleet/cubefleet/internal/compute"
)

// PoolUse is what one pool's sandboxes take and wait for, for the console's Pools page: the
// creates waiting for room (warm pool top-ups left out), each offer's quota with what its tenant
// uses of the pool, and each warm pool's fill.
type PoolUse struct {
	PoolID  string
	Waiting int
	Offers  []OfferUse
	Warm    []WarmFill
}

// OfferUse is an offer of the pool to Tenant: its quota (resource -> limit, as the offer
// names them) and what the tenant's sandboxes take of the pool (Usage).
type OfferUse struct {
	Tenant string
	Quota  map[string]int64
	Used   Usage
}

// WarmFill is a template's warm pool: Ready idle warm sandboxes running, Starting ones on their
// way, and the template's Min and Max.
type WarmFill struct {
	TemplateID, Template string
	Ready, Starting      int
	Min, Max             int
}

// Pools returns the use of every pool that has an offer, a warm pool or a waiting create,
// ordered by pool id.
func (s *Service) Pools(ctx context.Context) ([]PoolUse, error) {
	byPool := map[string]*PoolUse{}
	pool := func(id string) *PoolUse {
		if byPool[id] == nil {
			byPool[id] = &PoolUse{PoolID: id}
		}
		return byPool[id]
	}
	rows, err := s.db.QueryContext(ctx, `SELECT pool_id, count(*) FROM sandboxes WHERE queued = 1 AND warm = 0 AND deleted_at = 0 GROUP BY pool_id`)
	if err != nil {
		return nil, fmt.Errorf("count waiting creates: %w", err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return nil, err
		}
		pool(id).Waiting = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	offers, err := compute.Offers(ctx, s.db)
	if err != nil {
		return nil, err
	}
	for _, o := range offers {
		var spec compute.OfferSpec
		if err := o.DecodeSpec(&spec); err != nil {
			return nil, err
		}
		u := Usage{PoolID: spec.PoolID}
		err := s.db.QueryRowContext(ctx, `SELECT vcpu, memory_gib, disk_gib, gpu, sandboxes FROM sandboxes_usage WHERE tenant_id = $1 AND pool_id = $2`,
			spec.ToTenantID, spec.PoolID).Scan(&u.VCPU, &u.MemoryGiB, &u.DiskGiB, &u.GPU, &u.Sandboxes)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("read the usage of %s: %w", spec.ToTenantID, err)
		}
		p := pool(spec.PoolID)
		p.Offers = append(p.Offers, OfferUse{Tenant: spec.ToTenantID, Quota: spec.Quota, Used: u})
	}
	tpls, err := compute.Templates(ctx, s.db)
	if err != nil {
		return nil, err
	}
	for _, o := range tpls {
		var ts compute.SandboxTemplateSpec
		if err := o.DecodeSpec(&ts); err != nil {
			return nil, err
		}
		if ts.Warm == nil || ts.Warm.Max == 0 {
			continue
		}
		w := WarmFill{TemplateID: o.ID, Template: o.Name, Min: ts.Warm.Min, Max: ts.Warm.Max}
		err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(CASE WHEN state = $2 THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN state <> $2 THEN 1 ELSE 0 END), 0)
			FROM sandboxes WHERE template_id = $1 AND warm = 1 AND claimed_at = 0 AND deleted_at = 0 AND stop_requested_at = 0 AND state IN ($2, $3, $4)`,
			o.ID, string(StateRunning), string(StatePending), string(StateStarting)).Scan(&w.Ready, &w.Starting)
		if err != nil {
			return nil, fmt.Errorf("count the warm sandboxes of %s: %w", o.ID, err)
		}
		p := pool(ts.PoolID)
		p.Warm = append(p.Warm, w)
	}
	out := make([]PoolUse, 0, len(byPool))
	for _, p := range byPool {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b PoolUse) int {
		switch {
		case a.PoolID < b.PoolID:
			return -1
		case a.PoolID > b.PoolID:
			return 1
		}
		return 0
	})
	return out, nil
}
