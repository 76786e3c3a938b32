package nodes

import (
	"context"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Draining, as operators know it from `kubectl drain` and `nomad node drain`: a drained node is
// cordoned (the isolation label, so SchedulingDisabled is true on the wire and Healthy is
// unchanged) and marked as draining with a reason, who asked and when; it is drained once it
// runs no sandboxes: by the node's own last report, the sandboxes cubefleet agent lists (it
// lists the sandboxes still running, not those it was told to stop), or for a stock Cubelet its
// allocated.mvm_num (0, or never reported), and no sandbox placed there is unacknowledged
// (Config.Unacknowledged: placed a moment before, its agent has neither listed it nor reported
// it running or ended, so the report cannot show it yet). The mark is part of the registration row (columns
// drain_*, drained_at), so it survives restarts and reaches every replica; uncordoning ends it.

// DrainState is where a node's drain stands, from [DrainStatus].
type DrainState string

// The drain states.
const (
	// DrainDraining: draining, and the node's last report still counts sandboxes.
	DrainDraining DrainState = "Draining"
	// DrainDrained: draining, and the node reports no sandboxes (or never reported any).
	DrainDrained DrainState = "Drained"
)

// DrainStatus is the drain state rule: "" when the node is not draining (requestedAt, Unix ms,
// is 0); otherwise Drained when no sandbox placed on it is unacknowledged (unacknowledged at most
// 0) and it never reported allocated resources (reported false) or its last report counted no
// sandboxes (mvmNum, allocated.mvm_num, at most 0), else Draining.
func DrainStatus(requestedAt int64, reported bool, mvmNum, unacknowledged int64) DrainState {
	switch {
	case requestedAt == 0:
		return ""
	case unacknowledged <= 0 && (!reported || mvmNum <= 0):
		return DrainDrained
	}
	return DrainDraining
}

// DrainView is a node's drain as the public API shows it (View.Drain, present only while the
// node is draining): State (Draining or Drained), the Reason given (at most 200 characters),
// who asked (RequestedBy: a principal id, as in events and audit rows) and when (RequestedAt,
// Unix ms), the sandboxes it still runs by its last report (SandboxesLeft, its allocated.mvm_num;
// 0 when it never reported) plus, while that report shows none, those placed there and not yet
// acknowledged, when it first reported none while draining (DrainedAt, Unix ms; absent while
// Draining), and its deadline (Deadline, Unix ms; absent without one): once it passes, the
// sandboxes still running there are stopped (killed, reason node_drained; results kept).
type DrainView struct {
	State         DrainState `json:"state"`
	Reason        string     `json:"reason,omitempty"`
	RequestedBy   string     `json:"requestedBy,omitempty"`
	RequestedAt   int64      `json:"requestedAt"`
	SandboxesLeft int64      `json:"sandboxesLeft"`
	DrainedAt     int64      `json:"drainedAt,omitempty"`
	Deadline      int64      `json:"deadline,omitempty"`
}

// sandboxes is the number of sandboxes n runs by its last report: the sandboxes cubefleet agent
// listed, or a stock Cubelet's allocated.mvm_num (0 when it never reported either). Requires
// n.mu.
func (n *node) sandboxes() int64 {
	switch {
	case n.sandboxesReported:
		return int64(len(n.sandboxIDs))
	case !n.hasAllocated:
		return 0
	}
	return max(n.allocated.MVMNum, 0)
}

// drainState is n's DrainStatus. Requires n.mu.
func (n *node) drainState() DrainState {
	return DrainStatus(n.drainAt, n.hasAllocated || n.sandboxesReported, n.sandboxes(), n.unacked)
}

// countUnacknowledged counts the sandboxes placed on node id that its agent has not
// acknowledged (Config.Unacknowledged), for a drain: 0 without the counter; a failed count is
// logged and counts as 1, so the drain waits for the next report rather than end too early.
func (r *Registry) countUnacknowledged(ctx context.Context, id string) int64 {
	if r.cfg.Unacknowledged == nil {
		return 0
	}
	c, err := r.cfg.Unacknowledged(ctx, id)
	if err != nil {
		r.log.Warn("count the unacknowledged sandboxes of a draining node", "node", id, "err", err)
		return 1
	}
	return int64(c)
}

// setUnacknowledged records count, the unacknowledged sandboxes of n counted just before, for
// its drain state: while its report lists sandboxes the drain cannot end anyway, and those
// placed meanwhile count as 0 (not twice, once listed). Requires n.mu.
func (n *node) setUnacknowledged(count int64) {
	if n.sandboxes() > 0 {
		count = 0
	}
	n.unacked = count
}

// drainView renders n's drain (nil when it is not draining). Requires n.mu.
func (n *node) drainView() *DrainView {
	s := n.drainState()
	if s == "" {
		return nil
	}
	v := &DrainView{State: s, Reason: n.drainReason, RequestedBy: n.drainBy, RequestedAt: n.drainAt, SandboxesLeft: n.sandboxes() + n.unacked, Deadline: n.drainDeadline}
	if s == DrainDrained {
		v.DrainedAt = n.drainedAt
	}
	return v
}

// endDrain forgets n's drain (uncordon). Requires n.mu.
func (n *node) endDrain() {
	n.drainReason, n.drainBy, n.drainAt, n.drainedAt, n.unacked, n.drainDeadline = "", "", 0, 0, 0, 0
}

// drainChange is what settleDrain changed: typ is the event to emit ("" for none); changed
// says drainedAt moved, so the registration row must be saved.
type drainChange struct {
	changed bool
	typ     string
	data    eventData
}

// settleDrain records, at now, a draining node reaching no sandboxes (drainedAt set: the
// node.drained event) or, should anything place work on it anyway, running some again
// (drainedAt cleared, no event; node.drained follows when it is empty again). Only the replica
// that applies the change (the drain request, or the report) calls it, so each change is one
// event. Requires n.mu; the caller saves the row under it and emits the event after unlocking.
func (n *node) settleDrain(now int64, pools *poolIndex) drainChange {
	if n.drainAt == 0 {
		return drainChange{}
	}
	switch s := n.drainState(); {
	case s == DrainDrained && n.drainedAt == 0:
		n.drainedAt, n.updatedAt = now, now
		d := n.event(pools)
		d.Detail, d.By = n.drainReason, n.drainBy
		return drainChange{changed: true, typ: EventDrained, data: d}
	case s == DrainDraining && n.drainedAt != 0:
		n.drainedAt, n.updatedAt = 0, now
		return drainChange{changed: true}
	}
	return drainChange{}
}

// Drain drains node id, as `kubectl drain` does: it cordons the node (unless it is already
// cordoned, whose detail it then keeps, though the cordon becomes by's, so a node cannot lift
// it itself; reason, at most 200 characters, becomes the detail otherwise) and marks it as
// draining with reason, by and the time; the node is drained once it reports no sandboxes and
// none placed there is unacknowledged (node.drained, at once when it runs none). Draining a node that is already draining changes
// nothing (the first request's reason and time stand). Uncordon ends the drain. Errors:
// NOT_FOUND, INVALID_INPUT.
func (r *Registry) Drain(ctx context.Context, id, reason string, by Actor) (View, error) {
	return r.DrainWithin(ctx, id, reason, by, 0)
}

// DrainWithin drains node id as Drain does, with a deadline within from now (0: none): once it
// passes, the sandboxes still running there are stopped, each with its own grace (the
// sandboxes' loop reads WorkNode.DrainDeadline). A drain of a node that is draining already
// keeps its reason and time and takes the deadline only when it is earlier than the one it has
// (or it has none): a deadline is never pushed back. Errors: NOT_FOUND, INVALID_INPUT (a
// negative within).
func (r *Registry) DrainWithin(ctx context.Context, id, reason string, by Actor, within time.Duration) (View, error) {
	if err := nodeapi.CheckText("reason", reason); err != nil {
		return View{}, err
	}
	if within < 0 {
		return View{}, cubefleet.Invalid("deadlineSeconds", "a drain's deadline must be 1 second or more from now, or none")
	}
	n, err := r.live(ctx, id)
	if err != nil {
		return View{}, err
	}
	unacked := r.countUnacknowledged(ctx, id) // before the lock: it reads the database
	now := r.now()
	var deadline int64
	if within > 0 {
		deadline = now + within.Milliseconds()
	}
	n.mu.Lock()
	n.setUnacknowledged(unacked)
	cordoned := !n.cordoned()
	started := n.drainAt == 0
	if cordoned {
		n.isolate(reason, by)
	} else if started {
		n.cordonBy = string(by) // the drain takes the cordon over: the node cannot lift it itself
	}
	if started {
		n.drainReason, n.drainBy, n.drainAt, n.drainedAt, n.drainDeadline = reason, string(by), now, 0, 0
	}
	deadlineSet := deadline != 0 && (n.drainDeadline == 0 || deadline < n.drainDeadline)
	if deadlineSet {
		n.drainDeadline = deadline
	}
	settled := n.settleDrain(now, r.pools.Load())
	if cordoned || started || deadlineSet {
		n.updatedAt = now
	}
	if cordoned || started || deadlineSet || settled.changed {
		n.save(r.store)
	}
	d := n.event(r.pools.Load())
	d.By, d.Detail = string(by), reason
	left := n.sandboxes() + n.unacked
	n.mu.Unlock()
	if cordoned {
		r.listGen.Add(1) // SchedulingDisabled changed on the wire
	}
	if cordoned {
		r.emit(now, EventCordoned, d)
	}
	if started {
		d.Sandboxes = left
		r.emit(now, EventDraining, d)
	}
	if settled.typ != "" { // the wire does not show drainedAt, so the node list stays as it is
		r.emit(now, settled.typ, settled.data)
	}
	r.notify(n)
	return r.viewOf(n, nil)
}
