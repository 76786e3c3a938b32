// Package nodestore is the node registry's persistence on the control plane's database
// (SQLite or PostgreSQL, internal/store): it loads the registry at start, writes what the
// registry queues (registrations, coalesced heartbeats, deletions, events, audit rows) in one
// transaction at least every flush interval, keeps a registration journal on local disk for
// when the database is too busy to take a registration within its wait, keeps server replicas
// that share one database in step (replica sync) and lets one of them at a time hold the health
// lease, and keeps join tokens (their rows, and the uses this replica took but has not written).
//
// Its tables are the nodes module's (Module): nodes_registrations, nodes_status, nodes_deleted,
// nodes_replicas and nodes_join_tokens. A Store is the registry's nodes.Store and
// nodes.JoinTokenStore.
package nodestore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the nodes module's migrations (`nodes/0001_registry`, `nodes/0002_drain`,
// `nodes/0003_cordon_by`, `nodes/0004_join_token_revoke`, `nodes/0005_drain_deadline`). The
// store also writes events (events.Module) and audit rows (audit.Module), and takes a lease
// (store.LeaseModule).
var Module = store.EmbeddedModule("nodes", migrations)

// DefaultFlushEvery is how often coalesced writes go to the database.
const DefaultFlushEvery = time.Second

// JournalFile is the registration journal's file name in the server's data directory.
const JournalFile = "nodes-journal.jsonl"

// Config configures a Store. DB is required; every other field has a usable zero value.
type Config struct {
	// DB is the database, migrated with Module, events.Module, audit.Module and
	// store.LeaseModule.
	DB *store.DB
	// Now is the clock (the registry's); nil means time.Now.
	Now func() time.Time
	// Log receives the store's log lines (never a secret); nil discards them.
	Log *slog.Logger
	// FlushEvery is how often queued writes go to the database. Zero means DefaultFlushEvery.
	FlushEvery time.Duration
	// JournalPath is the registration journal (the server uses <data-dir>/JournalFile): a
	// registration the database has not taken within the registry's wait is synced here before
	// it is answered, and Open replays what a crash left. "" means no journal: such a
	// registration waits for the database, however long that takes.
	JournalPath string
	// Holder names this server replica in the rows it writes and in the health lease. ""
	// means host/pid/random, unique per process.
	Holder string
}

// Store is the node registry's persistence. Create it with New, hand it to nodes.New (which
// calls Open, Run and Close). It is safe for concurrent use.
//
// Locks: flushMu lets one flush run at a time; the queue's mu, joinMu (the join token ledger)
// and the journal's mu are leaves, never held while another is taken or while waiting on the
// database (except joinMu, held across the reads of TakeJoin, and flushMu, across a flush).
type Store struct {
	cfg    Config
	db     *store.DB
	log    *slog.Logger
	holder string
	reg    *nodes.Registry // set by Open

	others atomic.Bool  // other replicas announced themselves recently
	syncs  atomic.Int64 // Syncs that read the other replicas' rows since Open
	health *store.Lease // the health lease: its holder turns health changes into events
	synced atomic.Int64 // Unix ms of the last Sync

	q       queue
	flushMu sync.Mutex     // one flush at a time; guards retry
	retry   []nodes.Status // the statuses of a flush that failed
	jnl     *journal       // nil without Config.JournalPath
	m       *metrics

	joinMu sync.Mutex
	ledger map[string]*tokenLedger // join token hash -> its state in this process
}

var (
	_ nodes.Store          = (*Store)(nil)
	_ nodes.JoinTokenStore = (*Store)(nil)
)

// New returns a store over cfg.DB. It does no I/O until Open.
func New(cfg Config) (*Store, error) {
	if cfg.DB == nil {
		return nil, errors.New("nodestore: Config.DB is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		cfg.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), cubefleet.NewID("rep"))
	}
	s := &Store{cfg: cfg, db: cfg.DB, log: cfg.Log, holder: cfg.Holder, m: newMetrics(), ledger: map[string]*tokenLedger{}}
	health, err := cfg.DB.NewLease(store.LeaseConfig{Name: healthLease, Holder: cfg.Holder, TTL: healthLeaseTTL, Log: cfg.Log,
		Does: "turns node health changes into events"})
	if err != nil {
		return nil, err
	}
	s.health = health
	s.q.init()
	if cfg.JournalPath != "" {
		s.jnl = &journal{path: cfg.JournalPath}
	}
	return s, nil
}

// Holder is this replica's name in the rows it writes and in the health lease.
func (s *Store) Holder() string { return s.holder }

func (s *Store) now() int64 { return s.cfg.Now().UnixMilli() }

// Open attaches the store to reg, replays the journal (what a crash left: registrations the
// database lacks, with the node.joined events reg.JoinedEvent gives them), reads every node,
// announces this replica and takes the health lease if it is free. nodes.New calls it.
func (s *Store) Open(ctx context.Context, reg *nodes.Registry) ([]nodes.Record, error) {
	s.reg = reg
	if s.jnl != nil {
		if err := s.replayJournal(ctx); err != nil {
			return nil, err
		}
	}
	recs, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	s.synced.Store(s.now())
	s.Announce(ctx)
	s.health.Try(ctx)
	return recs, nil
}

// Current reports whether this replica's node states are as current as the other replicas':
// it is alone (no other replica announced itself), or it has read their rows twice since it
// opened, so every report they received since (flushed within a FlushEvery) is here. A replica
// takes the scheduler lease only once it is: before, the nodes it knows only from the database
// are no candidates, and it would place nothing.
func (s *Store) Current() bool { return !s.others.Load() || s.syncs.Load() >= 2 }

// Leader reports whether this replica holds the health lease.
func (s *Store) Leader() bool { return s.health.Held() }

// flushTimeout bounds one flush of the flusher's loop (and so how long a shutdown waits for
// the flush in flight).
const flushTimeout = 15 * time.Second

// Run runs the store's loops until ctx ends: the flusher (every FlushEvery, and at once when
// a registration waits), the replica work (announce, health lease, Sync every FlushEvery) and
// the pruning of old deletions. It returns nil once they stopped; Close writes what is left.
func (s *Store) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { nodes.Every(ctx, replicaEvery, func() { s.Announce(ctx) }) })
	wg.Go(func() { nodes.Every(ctx, healthLeaseTTL/3, func() { s.health.Try(ctx) }) })
	wg.Go(func() {
		nodes.Every(ctx, s.cfg.FlushEvery, func() {
			if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reading the other replicas' node state failed", "err", err)
			}
		})
	})
	wg.Go(func() { nodes.Every(ctx, time.Minute, func() { s.pruneTombstones(ctx) }) })
	s.flushLoop(ctx)
	wg.Wait()
	return nil
}

// Close retires this replica (its announcement and the health lease go, so another replica or
// the next start takes over at once), writes everything queued (the final flush) and closes
// the journal (the file stays for the next start, should the flush have failed).
func (s *Store) Close(ctx context.Context) error {
	s.retire(ctx)
	defer s.jnl.close()
	return s.Flush(ctx)
}

// flushLoop flushes every FlushEvery, and at once when kicked, until ctx ends. A failed flush
// keeps everything queued for the next one.
func (s *Store) flushLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.FlushEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.q.wake:
		}
		// A flush is not cancelled by ctx: cancelling one mid-commit leaves its outcome unknown,
		// and a batch that did commit would be queued and written again (duplicate ids).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		err := s.Flush(fctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				s.log.Error("writing node state to the database failed; it stays queued in memory", "err", err)
			}
			failing = true
		} else if failing {
			s.log.Info("node state is being written again")
			failing = false
		}
	}
}

// Save queues reg's registration row for the next flush (nodes.Store).
func (s *Store) Save(reg nodes.Registration) { s.q.save(reg) }

// Commit queues a registration that is answered once durable and asks for a flush now
// (nodes.Store).
func (s *Store) Commit(reg nodes.Registration, join *nodes.JoinUse, spent func()) <-chan error {
	done := make(chan error, 1)
	s.q.commit(reg, join, spent, done)
	s.q.kick()
	return done
}

// Delete queues the deletion of node id at (Unix ms) and asks for a flush now (nodes.Store).
func (s *Store) Delete(id string, at int64) {
	s.q.delete(id, at)
	s.q.kick()
}

// Emit queues an event row (nodes.Store).
func (s *Store) Emit(e events.Event) { s.q.addEvent(e) }

// Audit queues an audit row for the next flush; with now it asks for that flush at once (a
// change made through the internal routes), without it the row waits for the next tick (a
// refusal).
func (s *Store) Audit(e audit.Entry, now bool) {
	s.q.addAudit(e)
	if now {
		s.q.kick()
	}
}
