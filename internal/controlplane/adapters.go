package controlplane

import (
	"context"

	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
)

// lanePlacer places sandboxes through the placement lane (the scheduler); with a static
// membership (members) it excludes the registered nodes outside it.
type lanePlacer struct {
	lane    *lane.Lane
	nodes   *nodes.Registry
	members map[string]bool // nil: every registered node
}

// Place asks the scheduler to place p and reserve its room, excluding the registered nodes
// outside the static membership.
func (p lanePlacer) Place(ctx context.Context, pl sandboxes.Placement) (string, error) {
	exclude := pl.Exclude
	if p.members != nil {
		for _, n := range p.nodes.WorkNodes() {
			if !p.members[n.ID] {
				exclude = append(exclude, n.ID)
			}
		}
	}
	d, err := p.lane.Place(ctx, scheduler.Request{SandboxID: pl.SandboxID, Pool: pl.PoolID, Template: pl.TemplateID,
		CPU: pl.CPUMillicores, MemoryMiB: pl.MemoryMiB, DiskMiB: pl.DiskMiB, NodeSelector: pl.NodeSelector, Exclude: exclude})
	return d.NodeID, err
}

// Release releases sandbox id's reservation.
func (p lanePlacer) Release(ctx context.Context, id string) error {
	_, err := p.lane.Release(ctx, id)
	return err
}

// sandboxAcks counts, for the node registry's drains, the sandboxes placed on a node that its
// agent has not acknowledged. New sets svc once the sandboxes exist, before anything serves;
// nil (no sandboxes) counts none.
type sandboxAcks struct{ svc *sandboxes.Service }

// count counts the sandboxes placed on node id that its agent has not acknowledged.
func (a *sandboxAcks) count(ctx context.Context, id string) (int, error) {
	if a.svc == nil {
		return 0, nil
	}
	return a.svc.Unacknowledged(ctx, id)
}
