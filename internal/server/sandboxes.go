package server

import (
	"context"
	"fmt"
	"net/url"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
)

// newSandboxes builds the sandboxes of a server (docs/sandboxes.md), unless the deployment
// leaves sandbox templates out: their placer is the scheduler's placement lane, their nodes
// the registry (both built before them), and acks then counts their unacknowledged ones for
// the registry's drains.
func (s *Server) newSandboxes(acks *sandboxAcks) error {
	if s.cfg.Disabled[compute.ModuleVPS] || s.cfg.Disabled[compute.ModuleTemplates] {
		return nil
	}
	svc, err := sandboxes.New(sandboxes.Config{
		DB: s.db, Secrets: s.box, Placer: lanePlacer{lane: s.lane, nodes: s.nodes, members: s.members}, Nodes: s.nodes, Names: s.compute.Names, Holder: s.holder(),
		ResultMaxBytes: s.cfg.ResultMaxBytes, ResultRetention: s.cfg.ResultRetention, PendingTimeout: s.cfg.PendingTimeout,
		TenantMaxSandboxes: s.cfg.TenantMaxSandboxes, Now: s.cfg.Now, Log: s.log,
	})
	if err != nil {
		return err
	}
	s.sandboxes, acks.svc = svc, svc
	return nil
}

// work is the work API the node routes serve: the sandboxes, or none.
func (s *Server) work() (nodehttp.Work, int64) {
	if s.sandboxes == nil {
		return nil, 0
	}
	return s.sandboxes, nodehttp.MaxEventBytesFor(s.sandboxes.ResultMaxBytes())
}

// Sandboxes returns the server's sandboxes (nil when the deployment runs none).
func (s *Server) Sandboxes() *sandboxes.Service { return s.sandboxes }

// lanePlacer places sandboxes through the placement lane (the scheduler); with a static
// membership (members, the node ids of Config.Membership) it excludes the registered nodes
// outside it.
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

// membersOf is the set of node ids (hosts) of a static membership's origins; nil for none.
func membersOf(origins []string) (map[string]bool, error) {
	if origins == nil {
		return nil, nil
	}
	out := make(map[string]bool, len(origins))
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("membership: %q is not an origin", o)
		}
		out[u.Hostname()] = true
	}
	return out, nil
}
