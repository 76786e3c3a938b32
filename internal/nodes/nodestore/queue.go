package nodestore

import (
	"sync"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// maxQueued bounds the queued events and audit rows while the database does not answer;
// beyond it new ones are dropped (and logged), so a long outage cannot exhaust memory.
const maxQueued = 100000

// queue is what the next flush writes: registration rows (the latest of each node, so repeated
// changes coalesce), deletions, joins (a registration written only if its join token still has
// the use), events and audit rows, and who waits for them. Status rows are not queued: the
// flush takes them from the registry (nodes.Registry.TakeStatus).
type queue struct {
	mu      sync.Mutex
	regs    map[string]nodes.Registration
	deletes []nodes.Deletion
	joins   []pendingJoin
	events  []events.Event
	audits  []audit.Entry
	waiters []chan<- error
	dropped int
	wake    chan struct{}
}

// pendingJoin is a registration with a join token: written only if the token still has the
// use (and the node was not deleted since); otherwise spent runs and done receives
// nodes.ErrTokenSpent.
type pendingJoin struct {
	reg     nodes.Registration
	use     nodes.JoinUse
	spent   func()
	done    chan<- error
	deleted bool // the node was deleted since: the use is spent, the row not written
}

func (q *queue) init() {
	q.regs = map[string]nodes.Registration{}
	q.wake = make(chan struct{}, 1)
}

// kick asks the flusher to write now instead of at its next tick.
func (q *queue) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) save(reg nodes.Registration) {
	q.mu.Lock()
	q.regs[reg.NodeID] = reg
	q.mu.Unlock()
}

// commit queues reg (with join, when it spends a join token); done receives the outcome.
func (q *queue) commit(reg nodes.Registration, join *nodes.JoinUse, spent func(), done chan<- error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if join != nil {
		q.joins = append(q.joins, pendingJoin{reg: reg, use: *join, spent: spent, done: done})
		return
	}
	q.regs[reg.NodeID] = reg
	q.waiters = append(q.waiters, done)
}

// delete queues the deletion of node id at (Unix ms); a row queued for it is not written.
func (q *queue) delete(id string, at int64) {
	q.mu.Lock()
	delete(q.regs, id)
	for i := range q.joins {
		if q.joins[i].reg.NodeID == id {
			q.joins[i].deleted = true
		}
	}
	q.deletes = append(q.deletes, nodes.Deletion{ID: id, At: at})
	q.mu.Unlock()
}

func (q *queue) addEvent(e events.Event) {
	q.mu.Lock()
	q.events = bounded(q, q.events, e)
	q.mu.Unlock()
}

func (q *queue) addAudit(e audit.Entry) {
	q.mu.Lock()
	q.audits = bounded(q, q.audits, e)
	q.mu.Unlock()
}

// bounded appends v to list unless it holds maxQueued already (then v is counted dropped).
// Requires q.mu.
func bounded[T any](q *queue, list []T, v T) []T {
	if len(list) >= maxQueued {
		q.dropped++
		return list
	}
	return append(list, v)
}

// batch is what one flush writes.
type batch struct {
	regs    map[string]nodes.Registration
	deletes []nodes.Deletion
	joins   []pendingJoin
	events  []events.Event
	audits  []audit.Entry
	waiters []chan<- error
}

func (b *batch) empty() bool {
	return len(b.regs) == 0 && len(b.deletes) == 0 && len(b.joins) == 0 && len(b.events) == 0 && len(b.audits) == 0
}

// take empties the queue into a batch.
func (q *queue) take() batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := batch{regs: q.regs, deletes: q.deletes, joins: q.joins, events: q.events, audits: q.audits, waiters: q.waiters}
	q.regs = map[string]nodes.Registration{}
	q.deletes, q.joins, q.events, q.audits, q.waiters = nil, nil, nil, nil, nil
	return b
}

// putBack re-queues a batch whose flush failed, ahead of what was queued since (a row queued
// since for the same node is newer and stays; one deleted since stays deleted).
func (q *queue) putBack(b batch) {
	q.mu.Lock()
	defer q.mu.Unlock()
	deleted := map[string]bool{}
	for _, d := range q.deletes {
		deleted[d.ID] = true
	}
	for id, reg := range b.regs {
		if _, newer := q.regs[id]; !newer && !deleted[id] {
			q.regs[id] = reg
		}
	}
	for i := range b.joins {
		if deleted[b.joins[i].reg.NodeID] {
			b.joins[i].deleted = true
		}
	}
	q.deletes = append(b.deletes, q.deletes...)
	q.joins = append(b.joins, q.joins...)
	q.events = append(b.events, q.events...)
	q.audits = append(b.audits, q.audits...)
	q.waiters = append(b.waiters, q.waiters...)
}

// pending counts what is queued.
func (q *queue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.regs) + len(q.deletes) + len(q.joins) + len(q.events) + len(q.audits)
}

// takeDropped returns and resets the count of events and audit rows dropped since the last
// call.
func (q *queue) takeDropped() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.dropped
	q.dropped = 0
	return n
}
