package server

import (
	"context"
	"path/filepath"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/store"
)

// newNodes builds the node registry of a server: its store on the server's database with the
// registration journal in the data directory, and the registry (its pools are the compute pools
// with their fleet names; acks counts the unacknowledged sandboxes a drain waits for, once the
// sandboxes exist).
func (s *Server) newNodes(ctx context.Context, acks *sandboxAcks) error {
	st, err := nodestore.New(nodestore.Config{
		DB: s.db, Now: s.cfg.Now, Log: s.log, JournalPath: filepath.Join(s.cfg.DataDir, nodestore.JournalFile),
	})
	if err != nil {
		return err
	}
	reg, err := nodes.New(ctx, nodes.Config{
		Store:            st,
		JoinTokens:       st,
		HeartbeatTimeout: s.cfg.NodeHeartbeatTimeout,
		LostAfter:        s.cfg.NodeLostAfter,
		Now:              s.cfg.Now,
		Log:              s.log,
		Pools:            computePools{compute: s.compute, db: s.db}.list,
		Unacknowledged:   acks.count,
	})
	if err != nil {
		return err
	}
	s.nodes, s.nodeStore = reg, st
	return nil
}

// newNodeRoutes builds the node-agent and internal nodes routes on the registry (API keys on
// the internal nodes routes are checked by iam, and audit rows carry the request id); they
// serve the sandboxes' work API when the deployment runs sandboxes.
func (s *Server) newNodeRoutes() error {
	work, maxEvent := s.work()
	routes, err := nodehttp.New(nodehttp.Config{
		Work:                 work,
		MaxEventBytes:        maxEvent,
		Registry:             s.nodes,
		Audit:                s.nodeStore,
		DB:                   s.db,
		AllowUnauthenticated: s.cfg.NodeAgentAllowUnauthenticated,
		Authenticate: func(ctx context.Context, token string) (*iam.Principal, error) {
			return s.authenticateKey(ctx, token, "internal-nodes", "")
		},
		RequestID: RequestID,
		Now:       s.cfg.Now,
		Log:       s.log,
	})
	if err != nil {
		return err
	}
	s.nodeHTTP = routes
	return nil
}

// sandboxAcks counts, for the node registry's drains, the sandboxes placed on a node that its
// agent has not acknowledged. The registry is built before the sandboxes (whose nodes it is),
// so svc is set once they exist, before the server serves; nil (no sandboxes) counts none.
type sandboxAcks struct{ svc *sandboxes.Service }

// count counts the sandboxes placed on node id that its agent has not acknowledged.
func (a *sandboxAcks) count(ctx context.Context, id string) (int, error) {
	if a.svc == nil {
		return 0, nil
	}
	return a.svc.Unacknowledged(ctx, id)
}

// computePools lists the compute pools for the node registry.
type computePools struct {
	compute *compute.Service
	db      *store.DB
}

// list lists every pool with its fleet name (for a stock Cubelet's cluster_label) and whether
// it is archived: compute lists them, with the names fleet keeps.
func (c computePools) list(ctx context.Context) ([]nodes.Pool, error) {
	pools, err := c.compute.Pools(ctx, c.db)
	if err != nil {
		return nil, err
	}
	out := make([]nodes.Pool, len(pools))
	for i, p := range pools {
		out[i] = nodes.Pool{ID: p.ID, TenantID: p.TenantID, Name: p.Name, Archived: p.Archived()}
	}
	return out, nil
}
