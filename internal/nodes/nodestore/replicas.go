package nodestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodes"
)

// Several server replicas may share one PostgreSQL (docs/server.md, "Several replicas"): a
// node's reports land on whichever replica its connection reaches. Each replica keeps the
// registry in memory and writes what it receives (rows tagged with its holder id); every
// FlushEvery it reads the rows the other replicas wrote since its last read (newer reports,
// changed registrations, deletions), so every replica answers every read with every node's
// latest report, at most a flush interval or two late. One replica at a time, the holder of the
// lease nodes.health, turns health changes into events, so each change is one event. A replica
// alone (the usual SQLite case) skips the reads: replicas announce themselves in
// nodes_replicas.

const (
	// replicaEvery is how often a replica announces itself and looks for others.
	replicaEvery = 5 * time.Second
	// replicaTTL is how long an announcement counts.
	replicaTTL = 30 * time.Second
	// syncSlack re-reads rows this much older than the last read, for clocks that differ
	// between replicas and transactions that commit late.
	syncSlack = 5 * time.Second
	// tombstoneTTL is how long deletions are remembered for the other replicas.
	tombstoneTTL = time.Hour
	// healthLease is the lease of the replica that turns health changes into events.
	healthLease = "nodes.health"
	// healthLeaseTTL is how long a replica holds healthLease without renewing it.
	healthLeaseTTL = 10 * time.Second
)

// Announce records this replica in nodes_replicas and notes whether others are alive (Run
// does every 5 s; a test calls it to notice a replica started since). Errors are logged and
// keep the previous answer.
func (s *Store) Announce(ctx context.Context) {
	now := time.Now()
	_, err := s.db.ExecContext(ctx, `INSERT INTO nodes_replicas (holder, seen_at) VALUES ($1, $2)
		ON CONFLICT (holder) DO UPDATE SET seen_at = excluded.seen_at`, s.holder, now.UnixMilli())
	if err == nil {
		var n int
		err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM nodes_replicas WHERE holder <> $1 AND seen_at > $2`,
			s.holder, now.Add(-replicaTTL).UnixMilli()).Scan(&n)
		s.others.Store(n > 0)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("announcing this replica of the node registry failed", "err", err)
	}
}

// retire removes this replica's announcement and gives up the health lease (at shutdown), so
// the next replica or restart takes over at once.
func (s *Store) retire(ctx context.Context) {
	s.db.ExecContext(ctx, `DELETE FROM nodes_replicas WHERE holder = $1`, s.holder)
	s.health.Release(ctx)
}

// Sync reads what the other replicas wrote since the last Sync (newer reports, changed
// registrations and deletions) and hands it to the registry (nodes.Registry.Apply). It does
// nothing while this replica is alone. Run calls it every FlushEvery.
func (s *Store) Sync(ctx context.Context) error {
	if !s.others.Load() || s.reg == nil {
		return nil
	}
	now := s.now()
	since := s.synced.Load() - syncSlack.Milliseconds()
	var c nodes.Changes
	var err error
	if c.Deletions, err = s.deletionsSince(ctx, since); err != nil {
		return err
	}
	if c.Registrations, err = s.registrationsSince(ctx, since); err != nil {
		return err
	}
	if c.Statuses, err = s.statusesSince(ctx, since); err != nil {
		return err
	}
	if err := s.reg.Apply(ctx, c); err != nil {
		return err
	}
	s.synced.Store(now)
	s.syncs.Add(1)
	return nil
}

// deletionsSince reads the other replicas' deletions after since (Unix ms).
func (s *Store) deletionsSince(ctx context.Context, since int64) ([]nodes.Deletion, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT node_id, at FROM nodes_deleted WHERE at > $1 AND writer <> $2`, since, s.holder)
	if err != nil {
		return nil, fmt.Errorf("sync deletions: %w", err)
	}
	defer rows.Close()
	var out []nodes.Deletion
	for rows.Next() {
		var d nodes.Deletion
		if err := rows.Scan(&d.ID, &d.At); err != nil {
			return nil, fmt.Errorf("sync deletions: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sync deletions: %w", err)
	}
	return out, nil
}

// registrationsSince reads the registrations the other replicas changed after since (Unix ms),
// as they are stored now.
func (s *Store) registrationsSince(ctx context.Context, since int64) ([]nodes.Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.node_id FROM nodes_registrations r WHERE r.updated_at > $1 AND r.writer <> $2 AND `+notShadowed, since, s.holder)
	if err != nil {
		return nil, fmt.Errorf("sync registrations: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sync registrations: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sync registrations: %w", err)
	}
	var out []nodes.Record
	for _, id := range ids {
		rec, err := s.LoadNode(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			out = append(out, *rec)
		}
	}
	return out, nil
}

// statusesSince reads the reports the other replicas wrote after since (Unix ms). A report
// whose live record does not parse comes with its times only.
func (s *Store) statusesSince(ctx context.Context, since int64) ([]nodes.Status, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT node_id, reported_at, heartbeat_at, ready, live, inventory FROM nodes_status
		WHERE reported_at > $1 AND writer <> $2`, since, s.holder)
	if err != nil {
		return nil, fmt.Errorf("sync reports: %w", err)
	}
	defer rows.Close()
	var out []nodes.Status
	for rows.Next() {
		var st nodes.Status
		var live string
		var inv sql.NullString
		var ready int64
		if err := rows.Scan(&st.NodeID, &st.ReportedAt, &st.HeartbeatAt, &ready, &live, &inv); err != nil {
			return nil, fmt.Errorf("sync reports: %w", err)
		}
		st.Ready = ready == 1
		_ = parseLive(live, &st) // a live record that does not parse leaves st with its times
		// The node's images and templates: a replica its reports do not reach learns what it
		// prepared (the scheduler places a template only where it is local).
		var i inventoryRecord
		if inv.Valid && json.Unmarshal([]byte(inv.String), &i) == nil {
			st.Inventory = &nodes.Inventory{Images: i.Images, Templates: i.Templates, TemplatesReported: i.TemplatesReported}
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sync reports: %w", err)
	}
	return out, nil
}

// pruneTombstones removes the rows deletions shadow, then forgets deletions older than
// tombstoneTTL.
func (s *Store) pruneTombstones(ctx context.Context) {
	if err := s.deleteShadowed(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("removing the rows of deleted nodes failed", "err", err)
		return
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM nodes_deleted WHERE at < $1`, s.now()-tombstoneTTL.Milliseconds()); err != nil && ctx.Err() == nil {
		s.log.Warn("pruning node deletions failed", "err", err)
	}
}
