package server

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/store"
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
		Pools:                poolLister(s.db),
		Authenticate: func(ctx context.Context, token string) (*iam.Principal, error) {
			return iam.Authenticate(ctx, s.db, token, s.cfg.Now())
		},
		RequestID:   RequestID,
		JournalPath: filepath.Join(s.cfg.DataDir, nodes.JournalFile),
	})
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
