package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

//go:embed migrations/*.sql
var migrations embed.FS

// LeaseModule is the store's own migrations (`store/0001_leases`): run it before taking leases.
var LeaseModule = EmbeddedModule("store", migrations)

// TryLease takes or renews the lease name for holder until now+ttl and reports whether holder
// holds it. A lease whose holder stopped renewing is taken over once it expires, so a replica
// that dies loses its leases within ttl (docs/scheduler.md, "One placement lane across replicas").
func (db *DB) TryLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (bool, error) {
	at, until := now.UnixMilli(), now.Add(ttl).UnixMilli()
	res, err := db.ExecContext(ctx, `INSERT INTO store_leases (name, holder, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE store_leases.holder = excluded.holder OR store_leases.expires_at < $4`, name, holder, until, at)
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	return n == 1, nil
}

// LeaseConfig configures a Lease. Name and Holder are required; every other field has a usable
// zero value.
type LeaseConfig struct {
	// Name is the lease's row in store_leases ("scheduler", "sandboxes", ...).
	Name string
	// Holder names this replica (unique per process).
	Holder string
	// TTL is how long the lease lasts without renewal; 0 means 10 s.
	TTL time.Duration
	// Renew is how often Run renews it (and how often a replica that does not hold it tries
	// to take it); 0 means TTL/3. A dead holder's lease is taken over at most TTL + Renew
	// after its last renewal.
	Renew time.Duration
	// Margin is how long before the lease's expiry its holder stops counting itself the
	// holder (Held false), for clocks that differ between replicas: two replicas never both
	// count themselves holders while their clocks differ by less. 0 means none; at most TTL/2.
	Margin time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives a line when the lease is taken or lost; nil discards them.
	Log *slog.Logger
	// Does says what the holder does, for those lines ("places sandboxes").
	Does string
	// OnTake, when set, runs when the lease is taken, before Held reports it: an error leaves
	// this replica not holding (logged), and the next Try runs it again.
	OnTake func(ctx context.Context) error
	// OnLose, when set, runs when a held lease is lost or released.
	OnLose func()
	// OnRelease, when set, runs in Release while the lease is still held, before it is given
	// up: the holder's last writes (fenced by the lease) go there.
	OnRelease func(ctx context.Context)
	// OnTry, when set, runs after each Try with whether the lease is held.
	OnTry func(ctx context.Context, held bool)
}

// Lease is a database lease that one replica at a time holds: the background loops that must
// run once across replicas each take one (docs/scheduler.md, "One placement lane across
// replicas"). Try takes or renews it, Run does so every Renew until its context ends and then
// gives it up, Held reports whether this replica holds it now. Safe for concurrent use.
type Lease struct {
	db  *DB
	cfg LeaseConfig

	held  atomic.Bool
	until atomic.Int64 // Unix ms: Held is false from this instant, unless renewed
}

// NewLease returns the lease cfg describes on db (migrated with LeaseModule). A config without
// Name or Holder is an error.
func (db *DB) NewLease(cfg LeaseConfig) (*Lease, error) {
	if cfg.Name == "" || cfg.Holder == "" {
		return nil, errors.New("store: LeaseConfig.Name and LeaseConfig.Holder are required")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.Renew <= 0 {
		cfg.Renew = cfg.TTL / 3
	}
	cfg.Margin = min(max(cfg.Margin, 0), cfg.TTL/2)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Lease{db: db, cfg: cfg}, nil
}

// Held reports whether this replica holds the lease now: it took or renewed it less than
// TTL - Margin ago.
func (l *Lease) Held() bool {
	return l.held.Load() && l.cfg.Now().UnixMilli() < l.until.Load()
}

// Try takes or renews the lease once and reports whether this replica holds it (Held). On a
// database error the previous answer stands until its TTL - Margin runs out; the error is
// returned (and logged when ctx has not ended).
func (l *Lease) Try(ctx context.Context) (bool, error) {
	start := l.cfg.Now()
	ok, err := l.db.TryLease(ctx, l.cfg.Name, l.cfg.Holder, l.cfg.TTL, start)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.cfg.Log.Warn("renewing the "+l.cfg.Name+" lease failed", "err", err)
		}
	case ok:
		if !l.held.Load() && l.cfg.OnTake != nil {
			if err := l.cfg.OnTake(ctx); err != nil {
				l.cfg.Log.Warn(l.cfg.Name+" lease taken, but its holder could not start; trying again", "holder", l.cfg.Holder, "err", err)
				break
			}
		}
		l.until.Store(start.Add(l.cfg.TTL - l.cfg.Margin).UnixMilli())
		if !l.held.Swap(true) {
			l.cfg.Log.Info(l.cfg.Name+" lease taken: this replica "+l.cfg.Does, "holder", l.cfg.Holder)
		}
	default:
		l.lost()
	}
	held := l.Held()
	if l.cfg.OnTry != nil {
		l.cfg.OnTry(ctx, held)
	}
	return held, err
}

// lost marks the lease not held, running OnLose once.
func (l *Lease) lost() {
	if l.held.Swap(false) {
		l.cfg.Log.Info(l.cfg.Name+" lease lost", "holder", l.cfg.Holder)
		if l.cfg.OnLose != nil {
			l.cfg.OnLose()
		}
	}
}

// Run tries the lease at once and then every Renew until ctx ends; then it gives the lease up
// (Release), so another replica takes over at once rather than after TTL.
func (l *Lease) Run(ctx context.Context) {
	t := time.NewTicker(l.cfg.Renew)
	defer t.Stop()
	for {
		l.Try(ctx)
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			l.Release(rctx)
			cancel()
			return
		case <-t.C:
		}
	}
}

// Release gives the lease up when this replica holds it: it expires at once, for the next
// replica to take.
func (l *Lease) Release(ctx context.Context) {
	if !l.held.Load() {
		return
	}
	if l.cfg.OnRelease != nil {
		l.cfg.OnRelease(ctx)
	}
	l.lost()
	l.db.ExecContext(ctx, `UPDATE store_leases SET expires_at = 0 WHERE name = $1 AND holder = $2`, l.cfg.Name, l.cfg.Holder)
}

// LazyLease is a Lease made on first use, for a struct configured by its fields (a periodic
// pass that takes its lease each time). The zero value is ready; do not copy it after use.
type LazyLease struct {
	once  sync.Once
	lease *Lease
	err   error
}

// Try makes the lease from db and cfg on the first call (later calls ignore them) and tries it
// (Lease.Try). A cfg without Name or Holder is an error, on every call.
func (z *LazyLease) Try(ctx context.Context, db *DB, cfg LeaseConfig) (bool, error) {
	z.once.Do(func() { z.lease, z.err = db.NewLease(cfg) })
	if z.err != nil {
		return false, z.err
	}
	return z.lease.Try(ctx)
}
