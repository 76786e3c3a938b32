package lane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/store"
)

// errLeaseLost fails the decisions whose reservations were not durable when this replica lost
// the scheduler lease: another replica may be deciding by now.
var errLeaseLost = errors.New("this replica lost the scheduler lease before the reservation was written")

// op is one journal entry: a reservation made (r set) or released (only id).
type op struct {
	seq uint64
	id  string
	r   *scheduler.Reservation
}

// journal is the scheduler.Journal of the lease holder: it queues every reservation made and
// released, in decision order, and a flusher writes them in batches (group commit), fenced by
// the lease. A decision is answered only once its reservation is durable (wait).
type journal struct {
	mu        sync.Mutex
	queue     []op
	queued    uint64 // seq of the last op queued
	committed uint64 // seq of the last op written
	failed    [][2]uint64
	done      chan struct{} // closed (and replaced) whenever committed or failed changes
	wake      chan struct{}
	// active reports whether this replica holds the lease: a follower's scheduler releases
	// reservations too (its copy, reloaded from the database), but writes nothing.
	active func() bool
}

func newJournal() *journal {
	return &journal{done: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Reserved implements scheduler.Journal.
func (j *journal) Reserved(r scheduler.Reservation) { j.push(op{id: r.SandboxID, r: &r}) }

// Released implements scheduler.Journal.
func (j *journal) Released(id string) { j.push(op{id: id}) }

func (j *journal) push(o op) {
	if j.active != nil && !j.active() {
		return
	}
	j.mu.Lock()
	j.queued++
	o.seq = j.queued
	j.queue = append(j.queue, o)
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// last returns the seq of the last op queued.
func (j *journal) last() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.queued
}

// wait blocks until op seq is written (nil), failed (errLeaseLost), or ctx ends.
func (j *journal) wait(ctx context.Context, seq uint64) error {
	for {
		j.mu.Lock()
		for _, f := range j.failed {
			if seq >= f[0] && seq <= f[1] {
				j.mu.Unlock()
				return errLeaseLost
			}
		}
		if j.committed >= seq {
			j.mu.Unlock()
			return nil
		}
		ch := j.done
		j.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (j *journal) signal() {
	close(j.done)
	j.done = make(chan struct{})
}

// fail drops every op queued: their waiters get errLeaseLost.
func (j *journal) fail() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.queue) == 0 {
		return
	}
	j.failed = append(j.failed, [2]uint64{j.queue[0].seq, j.queued})
	if len(j.failed) > 64 {
		j.failed = j.failed[len(j.failed)-64:]
	}
	j.queue = nil
	j.signal()
}

// take returns the ops queued (at most max).
func (j *journal) take(max int) []op {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := min(len(j.queue), max)
	batch := append([]op(nil), j.queue[:n]...)
	return batch
}

// written marks batch, the head of the queue, written.
func (j *journal) written(batch []op) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.queue) >= len(batch) && len(batch) > 0 && j.queue[0].seq == batch[0].seq {
		j.queue = j.queue[len(batch):]
		j.committed = batch[len(batch)-1].seq
	}
	j.signal()
}

// maxBatch bounds the ops of one group commit.
const maxBatch = 500

// flush writes the queued ops in one transaction, provided holder still holds the lease at
// now; it returns how many it wrote. A batch is coalesced per sandbox: its last op wins.
func (l *Lane) flush(ctx context.Context) (int, error) {
	batch := l.journal.take(maxBatch)
	if len(batch) == 0 {
		return 0, nil
	}
	final := map[string]*scheduler.Reservation{}
	var order []string
	for _, o := range batch {
		if _, seen := final[o.id]; !seen {
			order = append(order, o.id)
		}
		final[o.id] = o.r
	}
	err := l.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := l.fence(ctx, tx); err != nil {
			return err
		}
		dels := make([]any, len(order))
		var rows []*scheduler.Reservation
		for i, id := range order {
			dels[i] = id
			if r := final[id]; r != nil {
				rows = append(rows, r)
			}
		}
		for start := 0; start < len(dels); start += 400 {
			part := dels[start:min(start+400, len(dels))]
			if _, err := tx.ExecContext(ctx, `DELETE FROM scheduler_reservations WHERE sandbox_id IN (`+placeholders(len(part))+`)`, part...); err != nil {
				return err
			}
		}
		for start := 0; start < len(rows); start += 100 {
			part := rows[start:min(start+100, len(rows))]
			tuples := make([]string, len(part))
			args := make([]any, 0, 8*len(part))
			for i, r := range part {
				n := 8 * i
				tuples[i] = fmt.Sprintf("($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
				args = append(args, r.SandboxID, r.NodeID, r.Pool, r.CPU, r.MemoryMiB, r.DiskMiB, r.At.UnixMilli(), r.Score)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO scheduler_reservations (sandbox_id, node_id, pool_id, cpu, memory_mib, disk_mib, reserved_at, score) VALUES `+
				strings.Join(tuples, ", "), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	l.journal.written(batch)
	return len(batch), nil
}

// placeholders returns "$1, $2, ..., $n".
func placeholders(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", i)
	}
	return b.String()
}

// fence checks, inside tx, that this replica still holds the lease: a replica that lost it
// writes nothing (the row is locked on PostgreSQL, so a takeover waits for this commit).
func (l *Lane) fence(ctx context.Context, tx *sql.Tx) error {
	q := `SELECT holder, expires_at FROM store_leases WHERE name = $1`
	if l.db.Dialect() == store.Postgres {
		q += ` FOR UPDATE`
	}
	var holder string
	var until int64
	if err := tx.QueryRowContext(ctx, q, LeaseName).Scan(&holder, &until); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return errLeaseLost
		}
		return err
	}
	if holder != l.holder || until <= l.now().UnixMilli() {
		return errLeaseLost
	}
	return nil
}

// runJournal flushes the journal whenever ops are queued, until ctx ends. A failed flush is
// retried while the lease holds; once it is lost the queued ops fail.
func (l *Lane) runJournal(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.journal.wake:
		}
		for {
			n, err := l.flush(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, errLeaseLost) || !l.holds() {
					l.journal.fail()
					break
				}
				l.log.Warn("writing scheduler reservations failed; retrying", "err", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if n == 0 {
				break
			}
		}
	}
}
