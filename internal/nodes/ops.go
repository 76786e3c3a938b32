package nodes

import (
	"context"
	"errors"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// setCordon cordons (on) or uncordons node id: the reserved label is set to "true" (with detail, at
// most 200 runes) or removed (docs/nodes.md, "Internal nodes API"). Uncordoning also ends a drain.
// It is idempotent; a change is an event. The cordon remembers who set it (cordonBy): an operator
// cordoning an already cordoned node takes it over; a node (by.IsNode) may lift or change only a
// cordon it set itself. Errors: NOT_FOUND, INVALID_INPUT for a long detail or one with a control
// character, FORBIDDEN (wrapping ErrOperatorCordon) for a node touching an operator's cordon.
func (r *Registry) setCordon(ctx context.Context, id string, on bool, detail string, by Actor) (*node, error) {
	if err := nodeapi.CheckText("detail", detail); err != nil {
		return nil, err
	}
	n, err := r.live(ctx, id)
	if err != nil {
		return nil, err
	}
	now := r.now()
	n.mu.Lock()
	changed := n.cordoned() != on
	if n.cordoned() && by.IsNode() && Actor(n.cordonBy) != by {
		// An operator's cordon (or drain): the node may neither lift nor rewrite it. Cordoning
		// again without a new detail changes nothing and is answered as usual.
		if !on || detail != "" && detail != n.cordonDetail {
			err := operatorCordon(n, on)
			n.mu.Unlock()
			return nil, err
		}
		n.mu.Unlock()
		return n, nil
	}
	switch {
	case on && changed:
		n.isolate(detail, by)
	case on:
		n.cordonDetail, n.cordonBy = detail, string(by) // an operator takes the node's cordon over
	case !on && changed:
		labels := mergeLabels(n.labels, nil)
		delete(labels, nodeapi.ReservedLabel)
		n.setLabels(labels)
		n.cordonDetail, n.cordonBy = "", ""
	}
	if !on && n.drainAt != 0 {
		n.endDrain()
		detail = "ends the drain"
	}
	n.updatedAt = now
	n.save(r.store)
	d := n.event(r.pools.Load())
	d.By, d.Detail = string(by), detail
	n.mu.Unlock()
	r.listGen.Add(1)
	if changed {
		typ := EventUncordoned
		if on {
			typ = EventCordoned
		}
		r.emit(now, typ, d)
	}
	r.notify(n)
	return n, nil
}

// isolate cordons n: the isolation label (SchedulingDisabled on the wire) with detail, set by
// by. Requires n.mu.
func (n *node) isolate(detail string, by Actor) {
	n.setLabels(mergeLabels(n.labels, map[string]string{nodeapi.ReservedLabel: "true"}))
	n.cordonDetail, n.cordonBy = detail, string(by)
}

// ErrOperatorCordon marks a node's own credential refused to lift or change a cordon an
// operator set (FORBIDDEN); the internal route audits it as a refusal.
var ErrOperatorCordon = errors.New("the cordon is an operator's")

// operatorCordon is the FORBIDDEN answer to node n lifting (on false) or rewriting the cordon
// an operator set, naming who set it. Requires n.mu.
func operatorCordon(n *node, on bool) error {
	who := n.cordonBy
	if who == "" {
		who = "an operator (not recorded: it was cordoned before cordonedBy was kept)"
	}
	what := "lift"
	if on {
		what = "change"
	}
	msg := fmt.Sprintf("node %s was cordoned by %s; a node may %s only a cordon it set itself: ask an operator (cubefleet nodes uncordon %s)", n.id, who, what, n.id)
	if n.drainAt != 0 {
		msg = fmt.Sprintf("node %s was cordoned by %s and is draining (asked by %s); a node may %s only a cordon it set itself: ask an operator (cubefleet nodes uncordon %s ends the drain)",
			n.id, who, n.drainBy, what, n.id)
	}
	return &cubefleet.Error{Code: cubefleet.CodeForbidden, Err: ErrOperatorCordon, Message: msg}
}

// relabel merges set into node id's labels and removes the keys in remove (docs/nodes.md, "Internal
// nodes API": merge; delete one). The reserved label cannot be set or removed (FORBIDDEN); the
// result must pass the label rules (INVALID_INPUT). Errors: NOT_FOUND.
func (r *Registry) relabel(ctx context.Context, id string, set map[string]string, remove []string) (*node, error) {
	if _, ok := set[nodeapi.ReservedLabel]; ok {
		return nil, cubefleet.Errorf(cubefleet.CodeForbidden, "cannot modify reserved label %s: use isolation (cordon)", nodeapi.ReservedLabel)
	}
	for _, k := range remove {
		if k == nodeapi.ReservedLabel {
			return nil, cubefleet.Errorf(cubefleet.CodeForbidden, "cannot delete reserved label %s: use isolation (uncordon)", nodeapi.ReservedLabel)
		}
	}
	n, err := r.live(ctx, id)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	labels := mergeLabels(n.labels, set)
	for _, k := range remove {
		delete(labels, k)
	}
	if err := nodeapi.CheckLabels(labels); err != nil {
		n.mu.Unlock()
		return nil, err
	}
	n.setLabels(labels)
	n.updatedAt = r.now()
	n.save(r.store)
	n.mu.Unlock()
	r.listGen.Add(1)
	r.notify(n)
	return n, nil
}

// ErrSandboxCheck marks a delete refused because the node's sandbox count cannot be trusted (it is
// not Ready); the internal route answers it 502 nodeapi.CodeSandboxCheckFailed as upstream does
// (ErrSandboxCheckFailed, docs/nodes.md, "Internal nodes API"), the public API 409 CONFLICT.
var ErrSandboxCheck = errors.New("sandbox check failed")

// forceHint says how the caller of a delete forces it, in the refusals that suggest it.
type forceHint int

const (
	forceFlag  forceHint = iota // the public API and the CLI: --force
	forceQuery                  // the internal route: ?force=true
)

// how renders the hint for node id.
func (h forceHint) how(id string) string {
	if h == forceQuery {
		return "add force=true (DELETE " + nodeapi.NodePath(id) + "?force=true)"
	}
	return "use --force (cubefleet nodes delete " + id + " --force)"
}

// notCordoned is the refusal to delete node id, in state s, that is not cordoned: the exact
// commands that delete it (the CLI's), or the internal route's isolation call.
func (h forceHint) notCordoned(id string, s State) string {
	if h == forceQuery {
		return "node " + id + " is not isolated: isolate it first (PUT " + nodeapi.NodePath(id) + "/isolation), then delete it"
	}
	if s == StateReady {
		return fmt.Sprintf("node %s is not cordoned: drain it first (`cubefleet nodes drain %s --reason TEXT --wait` cordons it and waits until it runs no sandboxes), then `cubefleet nodes delete %s`", id, id, id)
	}
	return fmt.Sprintf("node %s is %s and not cordoned, so its sandbox count is unknown: run `cubefleet nodes cordon %s --reason TEXT` and then `cubefleet nodes delete %s --force`, or `cubefleet nodes delete %s --force --reason TEXT` alone, which cordons it first", id, s, id, id, id)
}

// deleteNode deletes node id (docs/nodes.md, "Internal nodes API"): it must be cordoned (CONFLICT
// otherwise); without force it must also be Ready (CONFLICT wrapping ErrSandboxCheck: its count is
// unknown) and run no sandboxes (its reported allocated.mvm_num; CONFLICT); the refusals say how to
// force it (hint). Its credential is revoked at once: its agent gets 401 and needs a new join
// token; a stock Cubelet gets 404. Returns the node as it was. Errors: NOT_FOUND.
func (r *Registry) deleteNode(ctx context.Context, id string, force bool, by Actor, hint forceHint) (*node, error) {
	if _, err := r.live(ctx, id); err != nil {
		return nil, err
	}
	r.regMu.Lock()
	defer r.regMu.Unlock()
	n := r.set.get(id)
	if n == nil {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "node %s not found", id)
	}
	now := r.now()
	n.mu.Lock()
	if !n.cordoned() {
		s := r.health.state(n, now)
		n.mu.Unlock()
		return nil, cubefleet.Errorf(cubefleet.CodeConflict, "%s", hint.notCordoned(id, s))
	}
	if !force {
		if s := r.health.state(n, now); s != StateReady {
			n.mu.Unlock()
			return nil, &cubefleet.Error{Code: cubefleet.CodeConflict, Err: ErrSandboxCheck,
				Message: fmt.Sprintf("node %s is %s, so its sandbox count is unknown: to delete it anyway, %s", id, s, hint.how(id))}
		}
		if n.hasAllocated && n.allocated.MVMNum > 0 {
			n.mu.Unlock()
			return nil, cubefleet.Errorf(cubefleet.CodeConflict, "node %s still runs %d sandboxes (mvm_num): drain it (cubefleet nodes drain %s --wait), or to delete it anyway, %s",
				id, n.allocated.MVMNum, id, hint.how(id))
		}
	}
	n.deleted = true
	cred := n.credHash
	d := n.event(r.pools.Load())
	d.By, d.Force, d.From = string(by), force, n.state
	n.mu.Unlock()
	r.set.remove(n, cred)
	r.store.Delete(id, now)
	r.emit(now, EventDeleted, d)
	r.countStates()
	r.notifyDeleted(id)
	return n, nil
}

// Cordon cordons node id (isolation: no new work; SchedulingDisabled on the wire), with an
// optional detail of at most 200 runes, recording by as who set it (View.CordonedBy; an
// operator cordoning a node the node cordoned itself takes the cordon over). Idempotent.
// Errors: NOT_FOUND, INVALID_INPUT; FORBIDDEN when by is a node (Actor.IsNode) changing an
// operator's cordon.
func (r *Registry) Cordon(ctx context.Context, id, detail string, by Actor) (View, error) {
	n, err := r.setCordon(ctx, id, true, detail, by)
	return r.viewOf(n, err)
}

// Uncordon lifts node id's isolation and ends its drain, if any. Idempotent. Errors:
// NOT_FOUND; FORBIDDEN when by is a node (Actor.IsNode) and the cordon is not its own (an
// operator cordoned or drained it), naming who set it.
func (r *Registry) Uncordon(ctx context.Context, id string, by Actor) (View, error) {
	n, err := r.setCordon(ctx, id, false, "", by)
	return r.viewOf(n, err)
}

// Label merges set into node id's labels and removes the keys in remove. Errors: NOT_FOUND,
// FORBIDDEN for the reserved label, INVALID_INPUT for a label the rules refuse or more than
// MaxLabels.
func (r *Registry) Label(ctx context.Context, id string, set map[string]string, remove []string) (View, error) {
	n, err := r.relabel(ctx, id, set, remove)
	return r.viewOf(n, err)
}

// Delete deletes node id and revokes its credential; it returns the node as it was. Errors:
// NOT_FOUND; CONFLICT when it is not cordoned, or (without force) not Ready or still running
// sandboxes (the message says to use --force).
func (r *Registry) Delete(ctx context.Context, id string, force bool, by Actor) (View, error) {
	n, err := r.deleteNode(ctx, id, force, by, forceFlag)
	return r.viewOf(n, err)
}

// Isolate is the internal isolation route (docs/nodes.md, "Internal nodes API"): it cordons (on) or
// uncordons node id as Cordon and Uncordon do, and appends the node's NodeSnapshot to dst. Errors
// as theirs.
func (r *Registry) Isolate(ctx context.Context, id string, on bool, detail string, by Actor, dst []byte) ([]byte, error) {
	n, err := r.setCordon(ctx, id, on, detail, by)
	return r.snapshotOf(dst, n, err)
}

// Relabel is the internal labels routes (docs/nodes.md, "Internal nodes API"): Label, appending the
// node's NodeSnapshot to dst. Errors as Label's.
func (r *Registry) Relabel(ctx context.Context, id string, set map[string]string, remove []string, dst []byte) ([]byte, error) {
	n, err := r.relabel(ctx, id, set, remove)
	return r.snapshotOf(dst, n, err)
}

// Remove is the internal delete route (docs/nodes.md, "Internal nodes API"): Delete, whose refusals
// say to add force=true, appending the node's NodeSnapshot from before the delete to dst. Errors as
// Delete's; the refusal of a node that is not Ready wraps ErrSandboxCheck.
func (r *Registry) Remove(ctx context.Context, id string, force bool, by Actor, dst []byte) ([]byte, error) {
	n, err := r.deleteNode(ctx, id, force, by, forceQuery)
	return r.snapshotOf(dst, n, err)
}

// snapshotOf appends n's NodeSnapshot to dst unless err.
func (r *Registry) snapshotOf(dst []byte, n *node, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.appendSnapshot(dst, r.health.state(n, r.now())), nil
}
