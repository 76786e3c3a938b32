package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cubefleet/cubefleet/internal/store"
)

// DefaultRetention is how long audit rows are kept unless --audit-retention says otherwise:
// 90 days.
const DefaultRetention = 90 * 24 * time.Hour

// RetentionLease is the database lease (table store_leases) of the replica that sweeps.
const RetentionLease = "audit.retention"

// sweepBatch is how many rows one DELETE removes, so a sweep never holds a long write.
const sweepBatch = 10000

// Sweeper bounds the audit log's growth: it deletes the rows older than Retention, on one
// replica at a time (RetentionLease).
type Sweeper struct {
	DB *store.DB
	// Retention is how long rows are kept; zero means DefaultRetention, a negative value keeps
	// every row.
	Retention time.Duration
	// Every is how often Run sweeps; zero means an hour.
	Every time.Duration
	// Holder names this replica in the lease.
	Holder string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives a line per sweep that deleted rows, and failures; nil discards.
	Log *slog.Logger

	lease store.LazyLease
}

func (s *Sweeper) every() time.Duration {
	if s.Every > 0 {
		return s.Every
	}
	return time.Hour
}

// Run sweeps at once and then every Every until ctx ends; failures are logged.
func (s *Sweeper) Run(ctx context.Context) {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(s.every())
	defer t.Stop()
	for {
		if _, n, err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "audit retention sweep failed", "err", err)
		} else if n > 0 {
			log.InfoContext(ctx, "audit retention: deleted old rows", "rows", n, "retention", s.retention().String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sweeper) retention() time.Duration {
	if s.Retention == 0 {
		return DefaultRetention
	}
	return s.Retention
}

// Pass takes (or renews) the lease and, holding it, deletes the rows older than Retention in
// batches of 10,000. It reports whether it held the lease and how many rows it deleted.
func (s *Sweeper) Pass(ctx context.Context) (held bool, deleted int64, err error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	every := s.every()
	// The lease lasts one and a half periods, so the holder keeps it from one pass to the next.
	if held, err = s.lease.Try(ctx, s.DB, store.LeaseConfig{Name: RetentionLease, Holder: s.Holder, TTL: every + every/2, Now: s.Now, Log: s.Log,
		Does: "sweeps the audit log"}); err != nil || !held {
		return false, 0, err
	}
	at := now()
	if s.retention() < 0 {
		return true, 0, nil
	}
	before := at.Add(-s.retention()).UnixMilli()
	for {
		res, err := s.DB.ExecContext(ctx, `DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < $1 LIMIT $2)`, before, sweepBatch)
		if err != nil {
			return true, deleted, fmt.Errorf("audit retention: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return true, deleted, fmt.Errorf("audit retention: %w", err)
		}
		deleted += n
		if n < sweepBatch {
			return true, deleted, nil
		}
	}
}
