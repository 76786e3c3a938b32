package server

import (
	"context"
	"path/filepath"

	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
)

// newNodes builds the node registry of a server: its store on the server's database with the
// registration journal in the data directory, the registry (its pools are the compute pools
// with their fleet names), and its routes (API keys on the internal nodes routes are checked by
// iam, and audit rows carry the request id).
func (s *Server) newNodes(ctx context.Context) error {
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
		Pools:            s.nodePools,
		Unacknowledged:   s.unacknowledged,
	})
	if err != nil {
		return err
	}
	work, maxEvent := s.work()
	routes, err := nodehttp.New(nodehttp.Config{
		Work:                 work,
		MaxEventBytes:        maxEvent,
		Registry:             reg,
		Audit:                st,
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
	s.nodes, s.nodeStore, s.nodeHTTP = reg, st, routes
	return nil
}

// unacknowledged counts the sandboxes placed on node id that its agent has not acknowledged
// (none when the deployment runs no sandboxes).
func (s *Server) unacknowledged(ctx context.Context, id string) (int, error) {
	if s.sandboxes == nil {
		return 0, nil
	}
	return s.sandboxes.Unacknowledged(ctx, id)
}

// nodePools lists every pool with its fleet name (for a stock Cubelet's cluster_label) and
// whether it is archived: compute lists them, with the names fleet keeps.
func (s *Server) nodePools(ctx context.Context) ([]nodes.Pool, error) {
	pools, err := s.compute.Pools(ctx, s.db)
	if err != nil {
		return nil, err
	}
	out := make([]nodes.Pool, len(pools))
	for i, p := range pools {
		out[i] = nodes.Pool{ID: p.ID, TenantID: p.TenantID, Name: p.Name, Archived: p.Archived()}
	}
	return out, nil
}
