// Package lane is the one placement lane across server replicas (docs/scheduler.md, "In the
// server"): the replica holding the database lease "scheduler" makes every decision with its
// scheduler.Scheduler and writes each reservation (group commits, fenced by the lease) before it
// answers; the other replicas hand their requests to the holder through the database, the one
// channel between replicas that is already authenticated, and read its answer there. A replica
// that takes the lease over rebuilds the reservations from the database before its first
// decision, so a failover never overbooks a node.
package lane

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the lane's migrations (`scheduler/0001_lane`), after store.LeaseModule.
var Module = store.EmbeddedModule("scheduler", migrations)

// LeaseName is the database lease of the placement lane.
const LeaseName = "scheduler"

// Defaults of Config.
const (
	// DefaultLeaseTTL is how long the scheduler lease lasts without renewal (1 s); it is
	// renewed every DefaultLeaseRenew (200 ms), so a holder killed without a word is replaced
	// within about 1.2 s, and the holder stops deciding leaseMargin (300 ms) before the
	// lease it last renewed expires.
	DefaultLeaseTTL       = time.Second
	DefaultLeaseRenew     = 200 * time.Millisecond
	DefaultForwardTimeout = 10 * time.Second
	// notifyChannel is the PostgreSQL channel a forwarded request is announced on.
	notifyChannel = "cubefleet_scheduler"
	// leaseMargin is how long before the lease's expiry the holder stops deciding, for clocks
	// that differ between replicas.
	leaseMargin = 300 * time.Millisecond
)

// Config configures a Lane. DB and Holder are required.
type Config struct {
	// DB is the database, migrated with store.LeaseModule and Module.
	DB *store.DB
	// Holder names this replica (unique per process).
	Holder string
	// Scheduler configures the scheduler the lane decides with; its Journal is the lane's.
	Scheduler scheduler.Options
	// LeaseTTL is how long the lease lasts without renewal; 0 means DefaultLeaseTTL. It is
	// renewed every LeaseRenew; 0 means DefaultLeaseRenew, or a fifth of a LeaseTTL set.
	LeaseTTL, LeaseRenew time.Duration
	// ForwardTimeout bounds how long a forwarded request waits for the holder's answer.
	ForwardTimeout time.Duration
	// Ready, when set, reports whether this replica may take the lease: Run does not try it
	// before (a replica just started whose view of the nodes is not current yet would place
	// nothing). Once it reported true, it is not asked again.
	Ready func() bool
	// Log receives the lane's log lines; nil discards them.
	Log *slog.Logger
}

// Lane places sandboxes through the replica that holds the scheduler lease. Create it with
// New, run it with Run.
type Lane struct {
	db      *store.DB
	holder  string
	s       *scheduler.Scheduler
	journal *journal
	lease   *store.Lease
	now     func() time.Time
	timeout time.Duration
	log     *slog.Logger
	metrics *scheduler.Metrics
	ready   func() bool

	seq atomic.Uint64
}

// New returns a Lane and its scheduler. An invalid scheduler configuration is an error.
func New(cfg Config) (*Lane, error) {
	if cfg.DB == nil || cfg.Holder == "" {
		return nil, errors.New("lane: Config.DB and Config.Holder are required")
	}
	l := &Lane{db: cfg.DB, holder: cfg.Holder, journal: newJournal(), timeout: cfg.ForwardTimeout,
		log: cfg.Log, now: cfg.Scheduler.Now, metrics: cfg.Scheduler.Metrics, ready: cfg.Ready}
	ttl, renew := cfg.LeaseTTL, cfg.LeaseRenew
	switch {
	case ttl <= 0:
		ttl = DefaultLeaseTTL
		if renew <= 0 {
			renew = DefaultLeaseRenew
		}
	case renew <= 0:
		renew = ttl / 5
	}
	if l.timeout <= 0 {
		l.timeout = DefaultForwardTimeout
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.now == nil {
		l.now = time.Now
	}
	lease, err := cfg.DB.NewLease(store.LeaseConfig{
		Name: LeaseName, Holder: cfg.Holder, TTL: ttl, Renew: renew, Margin: min(leaseMargin, ttl/3), Now: l.now, Log: l.log,
		Does: "places sandboxes", OnTake: l.takeOver, OnLose: l.journal.fail, OnTry: l.tried, OnRelease: l.flushAll,
	})
	if err != nil {
		return nil, err
	}
	l.lease = lease
	l.journal.active = lease.Held
	opts := cfg.Scheduler
	opts.Journal = l.journal
	s, err := scheduler.New(opts)
	if err != nil {
		return nil, err
	}
	l.s = s
	return l, nil
}

// Scheduler returns the lane's scheduler (feed it node states; read rooms from it).
func (l *Lane) Scheduler() *scheduler.Scheduler { return l.s }

// Holding reports whether this replica holds the lease now (it decides).
func (l *Lane) Holding() bool { return l.lease.Held() }

func (l *Lane) holds() bool { return l.lease.Held() }

// Run takes and renews the lease (once Config.Ready says so), writes the journal, serves
// forwarded requests while holding the lease, and keeps a follower's reservations in step
// with the database, until ctx ends;
// then it writes what is queued and gives the lease up, so another replica takes over at once.
func (l *Lane) Run(ctx context.Context) error {
	go l.runJournal(ctx)
	go l.serveForwarded(ctx)
	for l.ready != nil && !l.ready() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	l.lease.Run(ctx)
	return nil
}

// takeOver rebuilds the reservations from the database before this replica decides anything
// as the new holder.
func (l *Lane) takeOver(ctx context.Context) error {
	rs, err := l.load(ctx)
	if err != nil {
		return fmt.Errorf("reading the reservations: %w", err)
	}
	l.s.Restore(rs)
	l.log.Info("scheduler reservations restored", "holder", l.holder, "reservations", len(rs))
	return nil
}

// tried runs after each lease attempt: a follower reloads the reservations, so `nodes get`
// shows them; the holder-gauge follows.
func (l *Lane) tried(ctx context.Context, held bool) {
	if !held {
		if rs, err := l.load(ctx); err == nil {
			l.s.Restore(rs)
		}
	}
	if l.metrics != nil {
		v := 0.0
		if held {
			v = 1
		}
		l.metrics.LeaseHolder.Set(v)
	}
}

// flushAll writes what is queued before the lease is given up: a decision answered is never
// lost.
func (l *Lane) flushAll(ctx context.Context) {
	for {
		n, err := l.flush(ctx)
		if err != nil || n == 0 {
			return
		}
	}
}

// load reads every reservation row.
func (l *Lane) load(ctx context.Context) ([]scheduler.Reservation, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT sandbox_id, node_id, pool_id, cpu, memory_mib, disk_mib, reserved_at, score FROM scheduler_reservations`)
	if err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	defer rows.Close()
	var out []scheduler.Reservation
	for rows.Next() {
		var r scheduler.Reservation
		var at int64
		if err := rows.Scan(&r.SandboxID, &r.NodeID, &r.Pool, &r.CPU, &r.MemoryMiB, &r.DiskMiB, &at, &r.Score); err != nil {
			return nil, fmt.Errorf("read reservations: %w", err)
		}
		r.At = time.UnixMilli(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Place decides where req goes and returns once its reservation is durable: here when this
// replica holds the lease, else through the holder. Errors are the scheduler's
// (INVALID_INPUT, RESOURCE_EXHAUSTED), or an error when no holder answered within the forward
// timeout or the lease was lost mid-decision (retry).
func (l *Lane) Place(ctx context.Context, req scheduler.Request) (scheduler.Decision, error) {
	if l.holds() {
		return l.placeHere(ctx, req)
	}
	var d scheduler.Decision
	err := l.forward(ctx, kindPlace, req, &d)
	return d, err
}

func (l *Lane) placeHere(ctx context.Context, req scheduler.Request) (scheduler.Decision, error) {
	d, err := l.s.Decide(ctx, req)
	if err != nil {
		return d, err
	}
	if err := l.journal.wait(ctx, l.journal.last()); err != nil {
		l.s.Release(req.SandboxID)
		return scheduler.Decision{}, fmt.Errorf("placing %s: %w", req.SandboxID, err)
	}
	return d, nil
}

// Release frees a sandbox's reservation by id (its create failed or was given up) and reports
// whether there was one, here or through the holder.
func (l *Lane) Release(ctx context.Context, sandboxID string) (bool, error) {
	if l.holds() {
		return l.releaseHere(ctx, sandboxID)
	}
	var out releaseAnswer
	err := l.forward(ctx, kindRelease, releaseBody{SandboxID: sandboxID}, &out)
	return out.Released, err
}

func (l *Lane) releaseHere(ctx context.Context, id string) (bool, error) {
	ok := l.s.Release(id)
	if ok {
		if err := l.journal.wait(ctx, l.journal.last()); err != nil {
			return true, err
		}
	}
	return ok, nil
}

const (
	kindPlace   = "place"
	kindRelease = "release"
)

type releaseBody struct {
	SandboxID string `json:"sandboxId"`
}

type releaseAnswer struct {
	Released bool `json:"released"`
}

// answer is a forwarded request's answer: Result, or Error.
type answer struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Code    cubefleet.Code `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// forward writes the request for the holder and waits for its answer.
func (l *Lane) forward(ctx context.Context, kind string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	id := fmt.Sprintf("%s/%d", l.holder, l.seq.Add(1))
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if _, err := l.db.ExecContext(ctx, `INSERT INTO scheduler_requests (id, kind, body, created_at) VALUES ($1, $2, $3, $4)`,
		id, kind, string(raw), time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("forwarding to the scheduler lease holder: %w", err)
	}
	defer l.db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM scheduler_requests WHERE id = $1`, id)
	if l.db.Dialect() == store.Postgres {
		l.db.ExecContext(ctx, `SELECT pg_notify($1, '')`, notifyChannel)
	}
	wait := time.Millisecond
	for {
		var ans sql.NullString
		err := l.db.QueryRowContext(ctx, `SELECT answer FROM scheduler_requests WHERE id = $1`, id).Scan(&ans)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("forwarding to the scheduler lease holder: %w", err)
		}
		if ans.Valid {
			var a answer
			if err := json.Unmarshal([]byte(ans.String), &a); err != nil {
				return fmt.Errorf("the scheduler lease holder's answer: %w", err)
			}
			if a.Error != nil {
				return &cubefleet.Error{Code: a.Error.Code, Message: a.Error.Message, Details: a.Error.Details}
			}
			return json.Unmarshal(a.Result, out)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no scheduler lease holder answered within %s: %w", l.timeout, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// serveForwarded answers the other replicas' requests while this replica holds the lease: it
// wakes on a PostgreSQL notification (or every 20 ms), decides every open request, waits once
// for their reservations to be durable, and writes the answers.
func (l *Lane) serveForwarded(ctx context.Context) {
	if l.db.Dialect() == store.Postgres {
		conn, err := l.db.Conn(ctx)
		if err == nil {
			defer conn.Close()
			err = conn.Raw(func(dc any) error {
				pc := dc.(*stdlib.Conn).Conn()
				if _, err := pc.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
					return err
				}
				l.serveLoop(ctx, func(ctx context.Context) { pc.WaitForNotification(ctx) })
				return nil
			})
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		l.log.Warn("listening for forwarded placements failed; polling instead", "err", err)
	}
	l.serveLoop(ctx, nil)
}

// serveLoop answers open requests each time listen returns (a notification, or 100 ms), or
// every 20 ms without listen, until ctx ends.
func (l *Lane) serveLoop(ctx context.Context, listen func(context.Context)) {
	lastSweep := time.Now()
	for ctx.Err() == nil {
		if listen != nil {
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			listen(wctx)
			cancel()
		} else {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !l.holds() {
			continue
		}
		if err := l.answerOpen(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("answering forwarded placements failed", "err", err)
		}
		if time.Since(lastSweep) > 30*time.Second {
			lastSweep = time.Now()
			l.db.ExecContext(ctx, `DELETE FROM scheduler_requests WHERE created_at < $1`, time.Now().Add(-2*l.timeout).UnixMilli())
		}
	}
}

// answerOpen decides every open request that is not stale and writes the answers.
func (l *Lane) answerOpen(ctx context.Context) error {
	rows, err := l.db.QueryContext(ctx, `SELECT id, kind, body FROM scheduler_requests WHERE answer IS NULL AND created_at >= $1 ORDER BY created_at LIMIT 500`,
		time.Now().Add(-l.timeout).UnixMilli())
	if err != nil {
		return err
	}
	type open struct{ id, kind, body string }
	var reqs []open
	for rows.Next() {
		var o open
		if err := rows.Scan(&o.id, &o.kind, &o.body); err != nil {
			rows.Close()
			return err
		}
		reqs = append(reqs, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(reqs) == 0 {
		return err
	}
	answers := make([]answer, len(reqs))
	for i, o := range reqs {
		var result any
		var err error
		switch o.kind {
		case kindPlace:
			var req scheduler.Request
			if err = json.Unmarshal([]byte(o.body), &req); err == nil {
				result, err = l.s.Decide(ctx, req)
			}
		case kindRelease:
			var b releaseBody
			if err = json.Unmarshal([]byte(o.body), &b); err == nil {
				result = releaseAnswer{Released: l.s.Release(b.SandboxID)}
			}
		default:
			err = fmt.Errorf("unknown request kind %q", o.kind)
		}
		answers[i] = l.toAnswer(result, err)
	}
	if err := l.journal.wait(ctx, l.journal.last()); err != nil {
		for i := range answers {
			if answers[i].Error == nil {
				answers[i] = l.toAnswer(nil, err)
			}
		}
	}
	return l.db.InTx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixMilli()
		for i, o := range reqs {
			raw, _ := json.Marshal(answers[i])
			if _, err := tx.ExecContext(ctx, `UPDATE scheduler_requests SET answer = $1, answered_at = $2 WHERE id = $3`, string(raw), now, o.id); err != nil {
				return err
			}
		}
		return nil
	})
}

// toAnswer encodes a result or an error for the requester; an error without a public code is
// logged here and answered as UNAVAILABLE when the database could not be reached, else as
// INTERNAL, without its details.
func (l *Lane) toAnswer(result any, err error) answer {
	if err != nil {
		var ce *cubefleet.Error
		if errors.As(err, &ce) {
			return answer{Error: &wireError{Code: ce.Code, Message: ce.Message, Details: ce.Details}}
		}
		l.log.Warn("a forwarded placement failed", "err", err)
		if store.IsUnreachable(err) {
			return answer{Error: &wireError{Code: cubefleet.CodeUnavailable, Message: "the control plane's database is unreachable; retry shortly"}}
		}
		return answer{Error: &wireError{Code: cubefleet.CodeInternal, Message: "the scheduler lease holder could not answer; retry"}}
	}
	raw, _ := json.Marshal(result)
	return answer{Result: raw}
}
