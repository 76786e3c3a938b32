package server

import (
	"context"
	"path/filepath"

	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// newNodeRegistry builds the node registry of a server: its pools are the compute pools with
// their fleet names, API keys on the internal nodes routes are checked by iam, and audit rows
// carry the request id.
func (s *Server) newNodeRegistry(ctx context.Context) (*nodes.Registry, error) {
	return nodes.New(ctx, nodes.Config{
		DB:                   s.db,
		HeartbeatTimeout:     s.cfg.NodeHeartbeatTimeout,
		LostAfter:            s.cfg.NodeLostAfter,
		AllowUnauthenticated: s.cfg.NodeAgentAllowUnauthenticated,
		Now:                  s.cfg.Now,
		Log:                  s.log,
		Pools:                s.nodePools,
		Authenticate: func(ctx context.Context, token string) (*iam.Principal, error) {
			return iam.Authenticate(ctx, s.db, token, s.cfg.Now())
		},
		RequestID:   RequestID,
		JournalPath: filepath.Join(s.cfg.DataDir, nodes.JournalFile),
	})
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
