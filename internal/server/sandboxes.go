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
)

// newSandboxes builds the sandboxes of a server (docs/sandboxes.md), unless the deployment
// leaves sandbox templates out: their placer is the scheduler's placement lane and their nodes
// the registry, both built after it (the adapters reach them when a sandbox is created).
func (s *Server) newSandboxes() error {
	if s.cfg.Disabled[compute.ModuleVPS] || s.cfg.Disabled[compute.ModuleTemplates] {
		return nil
	}
	svc, err := sandboxes.New(sandboxes.Config{
		DB: s.db, Secrets: s.box, Placer: lanePlacer{s}, Nodes: registryNodes{s}, Names: s.compute.Names, Holder: s.holder(),
		ResultMaxBytes: s.cfg.ResultMaxBytes, TenantResultMaxBytes: s.cfg.TenantResultMaxBytes, ResultRetention: s.cfg.ResultRetention, PendingTimeout: s.cfg.PendingTimeout,
		TenantMaxSandboxes: s.cfg.TenantMaxSandboxes, Now: s.cfg.Now, Log: s.log,
	})
	if err != nil {
		return err
	}
	s.sandboxes = svc
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

// lanePlacer places sandboxes through the server's placement lane (the scheduler).
type lanePlacer struct{ s *Server }

// Place asks the scheduler to place p and reserve its room; with a static membership
// (Config.Membership) the registered nodes outside it are excluded.
func (p lanePlacer) Place(ctx context.Context, pl sandboxes.Placement) (string, error) {
	exclude := pl.Exclude
	if p.s.members != nil {
		for _, n := range p.s.nodes.WorkNodes() {
			if !p.s.members[n.ID] {
				exclude = append(exclude, n.ID)
			}
		}
	}
	d, err := p.s.lane.Place(ctx, scheduler.Request{SandboxID: pl.SandboxID, Pool: pl.PoolID, Template: pl.TemplateID,
		CPU: pl.CPUMillicores, MemoryMiB: pl.MemoryMiB, DiskMiB: pl.DiskMiB, NodeSelector: pl.NodeSelector, Exclude: exclude})
	return d.NodeID, err
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

// Release releases sandbox id's reservation.
func (p lanePlacer) Release(ctx context.Context, id string) error {
	_, err := p.s.lane.Release(ctx, id)
	return err
}

// registryNodes reads the server's node registry.
type registryNodes struct{ s *Server }

// WorkNodes returns every node.
func (r registryNodes) WorkNodes() []nodes.WorkNode { return r.s.nodes.WorkNodes() }

// WorkNode returns node id.
func (r registryNodes) WorkNode(ctx context.Context, id string) (nodes.WorkNode, bool, error) {
	return r.s.nodes.WorkNode(ctx, id)
}
