package controlplane

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/api/nodetext"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
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

// consolePools shows each pool on the console's Pools page: its nodes' room as the scheduler
// holds it (rooms), each offer's quota use, its warm pools and waiting creates (sandboxes; nil
// shows none), by the pools the registry knows (pools).
type consolePools struct {
	reg       *nodes.Registry
	rooms     func(nodeID string) (scheduler.Room, bool)
	pools     func(ctx context.Context) ([]nodes.Pool, error)
	sandboxes *sandboxes.Service
}

var _ console.PoolSource = consolePools{}

// ConsolePools lists every pool, by name.
func (c consolePools) ConsolePools(ctx context.Context) ([]console.Pool, error) {
	known, err := c.pools(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*console.Pool{}
	var order []string
	add := func(id, name string) *console.Pool {
		if p := byID[id]; p != nil {
			return p
		}
		if name == "" {
			name = id
		}
		byID[id] = &console.Pool{ID: id, Name: name}
		order = append(order, id)
		return byID[id]
	}
	for _, p := range known {
		add(p.ID, p.Name)
	}
	items, err := c.reg.List(ctx, nodes.ListFilter{})
	if err != nil {
		return nil, err
	}
	for _, view := range items {
		if view.PoolID == "" {
			continue
		}
		v := api.NodeOf(view) // as the API shows it, which is what nodetext reads
		n := console.PoolNode{ID: v.ID, State: nodetext.State(v)}
		if r, ok := c.rooms(v.ID); ok {
			n.Bars = []console.Bar{
				{Resource: "CPU", Unit: "cores", Reported: float64(r.Reported.CPU) / 1000, Reserved: float64(r.Reserved.CPU) / 1000, Free: float64(r.Remaining.CPU) / 1000},
				{Resource: "Memory", Unit: "GiB", Reported: float64(r.Reported.MemoryMiB) / 1024, Reserved: float64(r.Reserved.MemoryMiB) / 1024,
					Free: float64(r.Remaining.MemoryMiB) / 1024, Kept: float64(r.MemReserveMiB) / 1024},
				{Resource: "MicroVM slots", Unit: "slots", Reported: float64(r.Reported.MvmNum), Reserved: float64(r.Reserved.MvmNum), Free: float64(r.Remaining.MvmNum)},
			}
		}
		p := add(v.PoolID, nodetext.Pool(v))
		p.Nodes = append(p.Nodes, n)
	}
	if c.sandboxes != nil {
		uses, err := c.sandboxes.Pools(ctx)
		if err != nil {
			return nil, err
		}
		for _, u := range uses {
			p := add(u.PoolID, "")
			p.Waiting = u.Waiting
			for _, o := range u.Offers {
				ou := console.OfferUse{Tenant: o.Tenant}
				for _, res := range slices.Sorted(maps.Keys(o.Quota)) {
					ou.Uses = append(ou.Uses, console.QuotaUse{Resource: res, Used: usageOf(o.Used, res), Limit: o.Quota[res]})
				}
				p.Offers = append(p.Offers, ou)
			}
			for _, w := range u.Warm {
				p.Warm = append(p.Warm, console.WarmFill{Template: w.Template, Ready: w.Ready, Starting: w.Starting, Min: w.Min, Max: w.Max})
			}
		}
	}
	out := make([]console.Pool, 0, len(order))
	for _, id := range order {
		if p := byID[id]; len(p.Nodes) > 0 || len(p.Offers) > 0 || len(p.Warm) > 0 || p.Waiting > 0 {
			out = append(out, *p)
		}
	}
	slices.SortStableFunc(out, func(a, b console.Pool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// usageOf is what u holds of quota resource res (0 for one admission does not count).
func usageOf(u sandboxes.Usage, res string) int64 {
	switch res {
	case "vcpu":
		return u.VCPU
	case "memoryGiB":
		return u.MemoryGiB
	case "diskGiB":
		return u.DiskGiB
	case "gpu":
		return u.GPU
	case "sandboxes":
		return u.Sandboxes
	}
	return 0
}
