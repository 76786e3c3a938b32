package sandboxes

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/secretref"
	"github.com/cubefleet/cubefleet/internal/store"
)

// The work API's control-plane side (nodeapi work.go; docs/sandboxes.md, "The work API"): each
// node's queue of assignments (table sandboxes_assignments), offered on every work request until
// the agent lists it as done, a long poll answered as soon as work arrives, and the sandbox
// events the agent sends back. Secret values are resolved here, into the answer only.

// maxOffered bounds the assignments one work answer carries (the rest follow in the next).
const maxOffered = 256

// orphanCheckEvery is how often a node's running list is checked for sandboxes the control
// plane does not run there (10 s).
const orphanCheckEvery = 10 * time.Second

// enqueue adds an assignment of kind about sandbox (or, for a prepare, template) to node's queue
// in q.
func enqueue(ctx context.Context, q store.Querier, node string, kind nodeapi.AssignmentKind, sandboxID, templateID string, now int64) error {
	_, err := q.ExecContext(ctx, `INSERT INTO sandboxes_assignments (id, node_id, kind, sandbox_id, template_id, created_at, done_at)
		VALUES ($1, $2, $3, $4, $5, $6, 0)`, cubefleet.NewID("asg"), node, string(kind), sandboxID, templateID, now)
	if err != nil {
		return fmt.Errorf("queue %s of %s for node %s: %w", kind, sandboxID+templateID, node, err)
	}
	return nil
}

// assignment is a row of sandboxes_assignments.
type assignment struct {
	ID, Node, SandboxID, TemplateID string
	Kind                            nodeapi.AssignmentKind
}

// queued returns node's assignments not yet done, oldest first.
func queued(ctx context.Context, q store.Querier, node string) ([]assignment, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, kind, sandbox_id, template_id FROM sandboxes_assignments
		WHERE node_id = $1 AND done_at = 0 ORDER BY id LIMIT `+fmt.Sprint(maxOffered), node)
	if err != nil {
		return nil, fmt.Errorf("read the work of node %s: %w", node, err)
	}
	defer rows.Close()
	var out []assignment
	for rows.Next() {
		a := assignment{Node: node}
		var kind string
		if err := rows.Scan(&a.ID, &kind, &a.SandboxID, &a.TemplateID); err != nil {
			return nil, err
		}
		a.Kind = nodeapi.AssignmentKind(kind)
		out = append(out, a)
	}
	return out, rows.Err()
}

// markDone marks assignments ids of node done.
func markDone(ctx context.Context, q store.Querier, node string, ids []string, now int64) error {
	for chunk := range slices.Chunk(ids, 500) {
		args := append([]any{node, now}, anys(chunk)...)
		if _, err := q.ExecContext(ctx, `UPDATE sandboxes_assignments SET done_at = $2 WHERE node_id = $1 AND done_at = 0 AND id IN (`+
			placeholders(3, len(chunk))+`)`, args...); err != nil {
			return fmt.Errorf("mark the work of node %s done: %w", node, err)
		}
	}
	return nil
}

// Work answers a work request of node (nodeapi.RouteWork), which the HTTP edge authenticated:
// it marks the assignments req lists as done, stops sandboxes the node runs that the control
// plane does not run there (at most every 10 s per node), and answers the node's queued
// assignments, oldest first, but those req lists as in progress, as soon as there are any, or
// after req.WaitMS with none (at once after EndWaits). Start, warm and claim assignments carry the sandbox's whole
// environment, secret:// values resolved; a sandbox whose secret cannot be read fails instead
// (reason secret_unavailable). On a draining node a queued start is placed again elsewhere and
// a warm sandbox is not started.
func (s *Service) Work(ctx context.Context, node string, req *nodeapi.WorkRequest) (*nodeapi.WorkResponse, error) {
	if len(req.Done) > 0 {
		if err := s.db.InGroupTx(ctx, func(tx *sql.Tx) error { return markDone(ctx, tx, node, req.Done, s.now()) }); err != nil {
			return nil, err
		}
	}
	if err := s.checkOrphans(ctx, node, req.Running); err != nil {
		s.log.Warn("checking a node's running sandboxes failed", "node", node, "err", err)
	}
	wait := time.NewTimer(time.Duration(req.WaitMS) * time.Millisecond)
	defer wait.Stop()
	for {
		woken, cancel := s.hub.watchNode(node)
		out, err := s.offer(ctx, node, req.Draining, req.InProgress)
		if err != nil || len(out.Assignments) > 0 || req.WaitMS == 0 {
			cancel()
			return out, err
		}
		select {
		case <-woken:
			cancel()
		case <-wait.C:
			cancel()
			return out, nil
		case <-s.hub.ending:
			cancel()
			return out, nil
		case <-ctx.Done():
			cancel()
			return nil, ctx.Err()
		}
	}
}

// offer builds the answer of node's queued work, without the assignments the node carries out
// (inProgress).
func (s *Service) offer(ctx context.Context, node string, draining bool, inProgress []string) (*nodeapi.WorkResponse, error) {
	out := &nodeapi.WorkResponse{Assignments: []nodeapi.Assignment{}}
	asgs, err := queued(ctx, s.db, node)
	if len(inProgress) > 0 && len(asgs) < maxOffered { // at the limit, newer work may follow them: all are answered
		busy := make(map[string]bool, len(inProgress))
		for _, id := range inProgress {
			busy[id] = true
		}
		asgs = slices.DeleteFunc(asgs, func(a assignment) bool { return busy[a.ID] })
	}
	if err != nil || len(asgs) == 0 {
		return out, err
	}
	if !draining {
		n, ok, err := s.cfg.Nodes.WorkNode(ctx, node)
		if err != nil {
			return nil, err
		}
		draining = ok && n.Draining
	}
	var ids []string
	for _, a := range asgs {
		if a.SandboxID != "" {
			ids = append(ids, a.SandboxID)
		}
	}
	recs, err := s.records(ctx, "id", ids)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, a := range asgs {
		switch a.Kind {
		case nodeapi.KindStop:
			runsAs := a.SandboxID // a sandbox the control plane has no record of: the node's own id
			if r := recs[a.SandboxID]; r != nil {
				runsAs = r.RunsAs
			}
			out.Assignments = append(out.Assignments, nodeapi.Assignment{ID: a.ID, Kind: a.Kind, SandboxID: runsAs})
		case nodeapi.KindPrepare:
			t, err := compute.Load(ctx, s.db, a.TemplateID)
			if err != nil {
				dropped = append(dropped, a.ID) // the template is gone: nothing to prepare
				continue
			}
			var ts compute.SandboxTemplateSpec
			if err := t.DecodeSpec(&ts); err != nil {
				return nil, err
			}
			out.Assignments = append(out.Assignments, nodeapi.Assignment{ID: a.ID, Kind: a.Kind,
				Template: &nodeapi.TemplateSpec{ID: t.ID, Name: t.Name, Image: ts.ImageID, Runtime: ts.Runtime}})
		case nodeapi.KindStart, nodeapi.KindWarm, nodeapi.KindClaim:
			r := recs[a.SandboxID]
			if r == nil || r.State.Final() || r.NodeID != node {
				dropped = append(dropped, a.ID)
				continue
			}
			if draining && a.Kind != nodeapi.KindClaim {
				if err := s.moveOff(ctx, r, a); err != nil {
					return nil, err
				}
				continue
			}
			sp, err := s.handOff(ctx, r)
			if err != nil {
				if cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
					if err := s.failHandOff(ctx, r, a, err); err != nil {
						return nil, err
					}
					continue
				}
				return nil, err
			}
			out.Assignments = append(out.Assignments, nodeapi.Assignment{ID: a.ID, Kind: a.Kind, Sandbox: sp})
		default:
			dropped = append(dropped, a.ID) // a kind this control plane does not know
		}
	}
	if len(dropped) > 0 {
		if err := s.db.InTx(ctx, func(tx *sql.Tx) error { return markDone(ctx, tx, node, dropped, s.now()) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// records loads the sandboxes whose column ("id", or "runs_as" for the ids nodes know) is one
// of ids, by that column.
func (s *Service) records(ctx context.Context, column string, ids []string) (map[string]*record, error) {
	out := make(map[string]*record, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		rs, err := query(ctx, s.db, column+` IN (`+placeholders(1, len(chunk))+`)`, anys(chunk)...)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if column == "runs_as" {
				out[r.RunsAs] = r
			} else {
				out[r.ID] = r
			}
		}
	}
	return out, nil
}

// handOff is r as its node runs it: the template's environment with the create's laid over it
// and its egressAllow (the entries inside its pool's policy.egressAllow now: poolEgress), the runtime it was placed for (its nodeSelector's),
// secret:// values resolved (INVALID_INPUT naming the variable when one cannot be: the value is
// never in the message), its flavor's limits, its timeout and the result's output limit.
func (s *Service) handOff(ctx context.Context, r *record) (*nodeapi.SandboxSpec, error) {
	tplEnv, image := map[string]string{}, ""
	var network string
	var egress []string
	if t, err := compute.Load(ctx, s.db, r.TemplateID); err == nil {
		var ts compute.SandboxTemplateSpec
		if err := t.DecodeSpec(&ts); err != nil {
			return nil, err
		}
		tplEnv, network, image = ts.Env, ts.Network, ts.ImageID
		if egress, err = s.poolEgress(ctx, ts); err != nil {
			return nil, err
		}
	} else if !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		return nil, err
	}
	env := maps.Clone(tplEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, r.Spec.Env)
	sp := &nodeapi.SandboxSpec{
		ID: r.RunsAs, TemplateID: r.TemplateID, Image: image, Argv: r.Spec.Command, CPUMillicores: r.Res.VCPU * 1000, MemoryMiB: r.Res.MemoryGiB * 1024,
		DiskMiB: r.Res.DiskGiB * 1024, TimeoutSeconds: r.Spec.TimeoutSeconds, GraceSeconds: r.Spec.graceSeconds(), OutputLimitBytes: s.cfg.ResultMaxBytes,
		Env: make([]string, 0, len(env)), Network: network, EgressAllow: egress,
		Runtime: r.Spec.NodeSelector[nodeapi.LabelRuntime], // the runtime it was placed for
	}
	if r.Warm && r.ClaimedAt == 0 {
		sp.TimeoutSeconds = 0 // idle until claimed: the claim brings the command and environment
		sp.Argv, sp.Env = nil, nil
		return sp, nil
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if ref, ok := secretref.Parse(v); ok {
			if ref.Scheme != secretref.SchemeSecret || (ref.Tenant != "" && ref.Tenant != r.TenantID) {
				return nil, cubefleet.Invalid("env."+k, "env %s is a reference sandboxes do not resolve (%s://); only secret:// references of the tenant", k, ref.Scheme)
			}
			val, err := s.cfg.Secrets.Value(ctx, s.db, r.TenantID, ref.Name)
			if cubefleet.IsCode(err, cubefleet.CodeNotFound) {
				return nil, cubefleet.Invalid("env."+k, "env %s names secret %s, which tenant %s no longer has", k, ref.Name, r.TenantID)
			}
			if err != nil {
				return nil, fmt.Errorf("resolve env %s of sandbox %s: %w", k, r.ID, err)
			}
			v = val
		}
		sp.Env = append(sp.Env, k+"="+v)
	}
	return sp, nil
}

// failHandOff ends r as failed (reason secret_unavailable) and drops assignment a.
func (s *Service) failHandOff(ctx context.Context, r *record, a assignment, cause error) error {
	msg := cause.Error()
	if ce, ok := cause.(*cubefleet.Error); ok {
		msg = ce.Message
	}
	var changed bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		changed, err = s.finish(ctx, tx, r, StateFailed, ReasonSecret, "not started: "+msg, nil)
		return err
	})
	if err != nil {
		return err
	}
	if changed {
		s.ended(ctx, r, StateFailed)
	}
	return nil
}

// moveOff takes a start or warm assignment a off a draining node: a sandbox to start is placed
// again (pending, waiting for room), a warm one is dropped (killed: the warm pool makes another
// elsewhere).
func (s *Service) moveOff(ctx context.Context, r *record, a assignment) error {
	if a.Kind != nodeapi.KindWarm {
		_, err := s.unplace(ctx, r, a.Node, "node "+a.Node+" drains: placed again")
		return err
	}
	var changed bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := markDone(ctx, tx, a.Node, []string{a.ID}, s.now()); err != nil {
			return err
		}
		var err error
		changed, err = s.finish(ctx, tx, r, StateKilled, ReasonDraining, "node "+a.Node+" drains: the idle warm sandbox was not started", nil)
		return err
	})
	if err == nil && changed {
		s.ended(ctx, r, StateKilled)
	}
	return err
}

// checkOrphans stops the sandboxes node runs (running, from its work request) that the control
// plane does not run there: ended (lost while the node was away, say), deleted long ago, or
// unknown. It checks a node at most every orphanCheckEvery.
func (s *Service) checkOrphans(ctx context.Context, node string, running []string) error {
	if len(running) == 0 {
		return nil
	}
	now := s.now()
	s.orphanMu.Lock()
	if now-s.orphanAt[node] < orphanCheckEvery.Milliseconds() {
		s.orphanMu.Unlock()
		return nil
	}
	s.orphanAt[node] = now
	s.orphanMu.Unlock()
	recs, err := s.records(ctx, "runs_as", running)
	if err != nil {
		return err
	}
	var orphans []string // as the control plane names them (the node's id when it has no record)
	for _, id := range running {
		r := recs[id]
		switch {
		case r == nil:
			orphans = append(orphans, id)
		case r.NodeID != node || r.State.Final():
			orphans = append(orphans, r.ID)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	stopping, err := s.stopsQueued(ctx, node)
	if err != nil {
		return err
	}
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		for _, id := range orphans {
			if !stopping[id] {
				if err := enqueue(ctx, tx, node, nodeapi.KindStop, id, "", now); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		s.log.Info("stopping sandboxes a node runs that the control plane does not run there", "node", node, "sandboxes", strings.Join(orphans, ","))
	}
	return err
}

// stopsQueued returns the sandboxes node has a stop queued for.
func (s *Service) stopsQueued(ctx context.Context, node string) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox_id FROM sandboxes_assignments WHERE node_id = $1 AND done_at = 0 AND kind = $2`, node, string(nodeapi.KindStop))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// poolEgress returns the entries of ts's egressAllow that lie inside its pool's
// policy.egressAllow as stored now, in order. Compute refuses a template or pool change that
// leaves an entry outside; this holds when a stored template predates its pool's policy or a
// pool changed behind compute's back: a sandbox reaches only the private prefixes its pool's
// owner allows. A pool that is gone allows none.
func (s *Service) poolEgress(ctx context.Context, ts compute.SandboxTemplateSpec) ([]string, error) {
	if len(ts.EgressAllow) == 0 {
		return nil, nil
	}
	var policy []string
	pool, err := compute.Load(ctx, s.db, ts.PoolID)
	switch {
	case err == nil:
		var ps compute.PoolSpec
		if err := pool.DecodeSpec(&ps); err != nil {
			return nil, err
		}
		if ps.Policy != nil {
			policy = ps.Policy.EgressAllow
		}
	case !cubefleet.IsCode(err, cubefleet.CodeNotFound):
		return nil, err
	}
	var out []string
	for _, e := range ts.EgressAllow {
		if fieldrules.EgressWithin(e, policy) {
			out = append(out, e)
		}
	}
	return out, nil
}
