package server

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/store"
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
		Pools:            poolLister(s.db),
	})
	if err != nil {
		return err
	}
	routes, err := nodehttp.New(nodehttp.Config{
		Registry:             reg,
		Audit:                st,
		DB:                   s.db,
		AllowUnauthenticated: s.cfg.NodeAgentAllowUnauthenticated,
		Authenticate: func(ctx context.Context, token string) (*iam.Principal, error) {
			return iam.Authenticate(ctx, s.db, token, s.cfg.Now())
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

// poolLister lists every pool with its fleet name (for a stock Cubelet's cluster_label) and
// whether it is archived.
func poolLister(db *store.DB) func(ctx context.Context) ([]nodes.Pool, error) {
	return func(ctx context.Context) ([]nodes.Pool, error) {
		rows, err := db.QueryContext(ctx, `SELECT o.id, o.tenant_id, COALESCE(n.name, ''), o.archived_at
			FROM compute_objects o LEFT JOIN fleet_names n ON n.object_id = o.id WHERE o.kind = $1 ORDER BY o.id`, compute.KindPool)
		if err != nil {
			return nil, fmt.Errorf("list pools: %w", err)
		}
		defer rows.Close()
		var out []nodes.Pool
		for rows.Next() {
			var p nodes.Pool
			var archived sql.NullInt64
			if err := rows.Scan(&p.ID, &p.TenantID, &p.Name, &archived); err != nil {
				return nil, fmt.Errorf("list pools: %w", err)
			}
			p.Archived = archived.Valid
			out = append(out, p)
		}
		return out, rows.Err()
	}
}
