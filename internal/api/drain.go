package api

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// drainBudget checks a drain against the policy.disruptionBudget of the node's pool: the
// fraction of its nodes that may be out at once (draining, or drained and not yet deleted),
// rounded up (a budget of 0.2 over 3 nodes lets 1 drain; 0 lets none). Past it, the drain is
// CONFLICT naming the budget and the nodes that drain, unless in.Force: then note says what the
// drain overrode, for its audit row. A node that drains already, one in no pool and a pool
// without a budget pass. It takes the pool's lock in the call's transaction (PostgreSQL), so
// two drains at once cannot both take the last place.
func drainBudget(ctx context.Context, d *deps, c *Call, in contract.NodeDrainInput) (note string, err error) {
	v, err := d.nodes.Get(ctx, in.NodeID)
	if err != nil || v.Drain != nil || v.PoolID == "" {
		return "", err
	}
	pool, err := compute.Load(ctx, c.Q, v.PoolID)
	if cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var spec compute.PoolSpec
	if err := pool.DecodeSpec(&spec); err != nil {
		return "", err
	}
	if spec.Policy == nil || spec.Policy.DisruptionBudget == nil {
		return "", nil
	}
	if tx, ok := c.Q.(*sql.Tx); ok {
		if err := d.db.LockKey(ctx, tx, "nodes.drain:"+pool.ID); err != nil {
			return "", err
		}
	}
	budget := *spec.Policy.DisruptionBudget
	all, err := d.nodes.List(ctx, nodes.ListFilter{Pool: v.PoolID})
	if err != nil {
		return "", err
	}
	var out []string
	for _, n := range all {
		if n.Drain != nil && n.ID != in.NodeID {
			out = append(out, n.ID)
		}
	}
	allowed := int(math.Ceil(budget*float64(len(all)) - 1e-9))
	if len(out)+1 <= allowed {
		return "", nil
	}
	name := pool.ID
	if pools, err := d.compute.Pools(ctx, c.Q); err == nil {
		for _, p := range pools {
			if p.ID == pool.ID && p.Name != "" {
				name = p.Name
			}
		}
	}
	draining := "none drains now"
	if len(out) > 0 {
		draining = strings.Join(out, ", ") + " already out"
	}
	msg := fmt.Sprintf("pool %s's disruption budget %g lets %d of its %d nodes drain at once (%s)", name, budget, allowed, len(all), draining)
	if in.Force {
		return "forced past the disruption budget: " + msg, nil
	}
	return "", &cubefleet.Error{Code: cubefleet.CodeConflict,
		Message: msg + ": wait until a drained node is deleted or uncordoned, or pass --force (force: true), which is audited",
		Details: map[string]any{"poolId": pool.ID, "disruptionBudget": budget, "nodes": len(all), "allowed": allowed, "draining": out}}
}
