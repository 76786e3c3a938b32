package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Group commit on SQLite: its writers take turns (InTx), and a busy server spends most of a
// small write transaction on beginning and committing it. InGroupTx lets the callers that wait
// for their turn at the same time share one transaction, each in a savepoint of its own: one
// commit for all of them, and a caller's failure undoes only its own writes.

// group is the queue of InGroupTx callers waiting for a shared transaction.
type group struct {
	mu      sync.Mutex
	queue   []*groupCall
	leading bool // a caller runs the queue's transactions
}

// groupCall is one InGroupTx call.
type groupCall struct {
	ctx      context.Context
	fn       func(tx *sql.Tx) error
	err      error
	panicked any           // what fn panicked with, re-raised by InGroupTx
	done     chan error    // its result
	lead     chan struct{} // closed when this caller is to run the next transaction
}

// maxGroup bounds the callers of one shared transaction.
const maxGroup = 128

// InGroupTx runs fn in a write transaction, as InTx does, and returns once fn's writes are
// committed (nil) or undone (fn's error, or the transaction's). On SQLite fn may share the
// transaction with the fns of other callers (in a savepoint of its own, so an error undoes only
// fn's writes, and fn sees what the fns before it wrote); on PostgreSQL it is InTx. fn must not
// call InTx or InGroupTx. A caller whose ctx ends before fn ran gets ctx's error and fn does not
// run.
func (db *DB) InGroupTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if db.writer == nil {
		return db.InTx(ctx, fn)
	}
	c := &groupCall{ctx: ctx, fn: fn, done: make(chan error, 1), lead: make(chan struct{})}
	g := &db.group
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if !g.leading {
		g.leading = true
		close(c.lead)
	}
	g.mu.Unlock()
	for {
		select {
		case err := <-c.done:
			if c.panicked != nil {
				panic(c.panicked)
			}
			return err
		case <-c.lead:
			c.lead = nil // led once: its own call is in the batch it takes
			db.runGroup()
		}
	}
}

// runGroup runs the queued calls (at most maxGroup) in one transaction, hands them their
// results, and passes the lead to the next queued call, if any.
func (db *DB) runGroup() {
	g := &db.group
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	batch := append([]*groupCall(nil), g.queue[:n]...)
	g.queue = g.queue[n:]
	g.mu.Unlock()

	for len(batch) > 0 {
		live := batch[:0:0]
		for _, c := range batch {
			if err := c.ctx.Err(); err != nil {
				c.done <- err
				continue
			}
			live = append(live, c)
		}
		batch = live
		if len(batch) == 0 {
			break
		}
		// A call whose context ends while its statement runs may make SQLite abort the whole
		// transaction: it is run again without that call.
		var dropped *groupCall
		err := db.InTx(context.Background(), func(tx *sql.Tx) error {
			for _, c := range batch {
				c.err = nil
				if _, err := tx.ExecContext(c.ctx, "SAVEPOINT cubefleet_group"); err != nil {
					return savepointErr(c, &dropped, err)
				}
				if err := c.call(tx); err != nil {
					if c.ctx.Err() != nil && c.panicked == nil {
						dropped = c
						return err
					}
					c.err = err
					if _, err := tx.ExecContext(context.Background(), "ROLLBACK TO cubefleet_group"); err != nil {
						return fmt.Errorf("roll back to the savepoint: %w", err)
					}
				}
				if _, err := tx.ExecContext(context.Background(), "RELEASE cubefleet_group"); err != nil {
					return fmt.Errorf("release the savepoint: %w", err)
				}
			}
			return nil
		})
		if dropped != nil {
			dropped.done <- dropped.ctx.Err()
			batch = removeCall(batch, dropped)
			continue
		}
		for _, c := range batch {
			if err != nil {
				c.done <- err
			} else {
				c.done <- c.err
			}
		}
		break
	}

	g.mu.Lock()
	if len(g.queue) > 0 {
		close(g.queue[0].lead)
	} else {
		g.leading = false
	}
	g.mu.Unlock()
}

// savepointErr is the error of a savepoint c could not take: c's context ended (c is dropped,
// the rest run again), or the transaction's.
func savepointErr(c *groupCall, dropped **groupCall, err error) error {
	if c.ctx.Err() != nil {
		*dropped = c
	}
	return fmt.Errorf("savepoint: %w", err)
}

// removeCall returns batch without c.
func removeCall(batch []*groupCall, c *groupCall) []*groupCall {
	out := batch[:0:0]
	for _, b := range batch {
		if b != c {
			out = append(out, b)
		}
	}
	return out
}

// call runs c.fn in tx; a panic of fn is kept (c.panicked) and re-raised in c's own goroutine.
func (c *groupCall) call(tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked = p
			err = errPanicked
		}
	}()
	return c.fn(tx)
}

// errPanicked stands for a panic of a call's fn while its savepoint is rolled back.
var errPanicked = errors.New("panicked")
