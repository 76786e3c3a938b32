package server

import (
	"context"
	"time"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/api/nodetext"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
)

// consoleNodes shows the node registry on the console's Nodes page, in the CLI's words
// (nodetext), sorted as `cubefleet nodes list` sorts them (by id), with the scheduler's
// reservations on each node (rooms; nil shows none).
type consoleNodes struct {
	reg   *nodes.Registry
	rooms func(nodeID string) (scheduler.Room, bool)
	now   func() time.Time
}

var _ console.NodeSource = consoleNodes{}

// ConsoleNodes lists every node.
func (c consoleNodes) ConsoleNodes(ctx context.Context) ([]console.Node, error) {
	items, err := c.reg.List(ctx, nodes.ListFilter{})
	if err != nil {
		return nil, err
	}
	now := c.now().UnixMilli()
	out := make([]console.Node, 0, len(items))
	for _, view := range items {
		v := api.NodeOf(view) // as the API shows it, which is what nodetext reads
		var room *contract.Room
		if c.rooms != nil {
			if r, ok := c.rooms(v.ID); ok {
				room = api.RoomOf(r)
			}
		}
		out = append(out, console.Node{ID: v.ID, State: nodetext.State(v), Pool: nodetext.Pool(v), LastReport: nodetext.Ago(now, v.LastReportAt),
			MicroVMs: nodetext.MicroVMs(v), CPU: nodetext.CPU(v), Memory: nodetext.Memory(v), Reserved: nodetext.Reserved(room),
			Cordon: nodetext.Cordon(v), Drain: nodetext.Drain(now, v), Notes: nodetext.Notes(v), NotReady: nodetext.NotReady(v)})
	}
	return out, nil
}
