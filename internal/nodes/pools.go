package nodes

import (
	"context"
	"fmt"

	"github.com/cubefleet/cubefleet"
)

// poolIndex is the pools as of the last refresh.
type poolIndex struct {
	byID   map[string]Pool
	byName map[string][]Pool
}

// RefreshPools re-reads the pools (Config.Pools). A failure keeps the previous list and is
// logged.
func (r *Registry) RefreshPools(ctx context.Context) {
	if r.cfg.Pools == nil {
		return
	}
	ps, err := r.cfg.Pools(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reading pools for the node registry failed; keeping the previous list", "err", err)
		}
		return
	}
	idx := &poolIndex{byID: map[string]Pool{}, byName: map[string][]Pool{}}
	for _, p := range ps {
		idx.byID[p.ID] = p
		if p.Name != "" && !p.Archived {
			idx.byName[p.Name] = append(idx.byName[p.Name], p)
		}
	}
	old := r.pools.Swap(idx)
	if old == nil || !samePools(old, idx) {
		r.notifyAll()
	}
}

// knowPools re-reads the pools when one of ids (pool ids; "" is none) is not in the index: a
// node that joined a pool created after the last read (on another replica, or before this
// replica's periodic read) is placed in it at once, not a PoolsEvery later.
func (r *Registry) knowPools(ctx context.Context, ids ...string) {
	idx := r.pools.Load()
	for _, id := range ids {
		if id == "" {
			continue
		}
		if idx == nil {
			r.RefreshPools(ctx)
			return
		}
		if _, ok := idx.byID[id]; !ok {
			r.RefreshPools(ctx)
			return
		}
	}
}

// samePools reports whether two pool indexes hold the same pools.
func samePools(a, b *poolIndex) bool {
	if len(a.byID) != len(b.byID) {
		return false
	}
	for id, p := range a.byID {
		if b.byID[id] != p {
			return false
		}
	}
	return true
}

// ResolvePool returns the pool named ref: a pool id, or a fleet name held by exactly one
// non-archived pool. Errors: INVALID_INPUT for an unknown, archived or ambiguous pool.
func (r *Registry) ResolvePool(ctx context.Context, ref string) (Pool, error) {
	r.RefreshPools(ctx)
	idx := r.pools.Load()
	if p, ok := idx.byID[ref]; ok {
		if p.Archived {
			return Pool{}, cubefleet.Invalid("pool", "pool %s is archived", ref)
		}
		return p, nil
	}
	switch ps := idx.byName[ref]; len(ps) {
	case 1:
		return ps[0], nil
	case 0:
		return Pool{}, cubefleet.Invalid("pool", "no pool has the id or fleet name %q", ref)
	default:
		return Pool{}, cubefleet.Invalid("pool", "the fleet name %q names pools of several tenants; give the pool id", ref)
	}
}

// Pool returns pool id as of the last refresh (archived pools too).
func (r *Registry) Pool(id string) (Pool, bool) {
	p, ok := r.pools.Load().byID[id]
	return p, ok
}

// of returns the pool of a node that joined into poolID (from its join token; "" for a stock
// Cubelet) and reports clusterLabel and, when it has none it can use, why.
func (idx *poolIndex) of(poolID, clusterLabel string) (Pool, string) {
	if poolID != "" {
		p, ok := idx.byID[poolID]
		switch {
		case !ok:
			return Pool{ID: poolID}, fmt.Sprintf("pool %s (from its join token) no longer exists", poolID)
		case p.Archived:
			return p, fmt.Sprintf("pool %s is archived", p.ID)
		}
		return p, ""
	}
	if clusterLabel == "" {
		return Pool{}, "unknown pool: the node reports no cluster_label and did not join with a token"
	}
	switch ps := idx.byName[clusterLabel]; len(ps) {
	case 1:
		return ps[0], ""
	case 0:
		return Pool{}, fmt.Sprintf("unknown pool: no pool has the fleet name %q (its cluster_label)", clusterLabel)
	default:
		return Pool{}, fmt.Sprintf("unknown pool: the cluster_label %q matches pools of several tenants", clusterLabel)
	}
}
