package sandboxes

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// Warm pools (docs/sandboxes.md, "Warm pools"): for each template with warm {min, max}, the
// lease holder keeps at least min and at most max idle sandboxes of it ready on nodes of its
// pool (kind warm: started with no command), so a create claims one (kind claim) instead of
// starting a sandbox. It tops the pool up after claims, after sandboxes end and after a node is
// lost, and stops the idle ones beyond max and those on draining nodes (they would hold the
// drain open). Warm sandboxes count against their tenant's quotas like any other; a top-up a
// quota refuses is logged and tried again at the next pass.

// WarmCreator is the creator of warm pool sandboxes (Sandbox.CreatedBy).
const WarmCreator = "warm-pool"

// warmRefusalEvery bounds how often a template's refused top-up is logged (1 minute).
const warmRefusalEvery = time.Minute

// idle is an idle warm sandbox as KeepWarm counts it.
type idle struct {
	id, node  string
	state     State
	createdAt int64
}

// KeepWarm tops every warm pool up to its min and trims it to its max.
func (s *Service) KeepWarm(ctx context.Context) error {
	tpls, err := compute.Templates(ctx, s.db)
	if err != nil {
		return err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, template_id, node_id, state, created_at FROM sandboxes
		WHERE warm = 1 AND claimed_at = 0 AND deleted_at = 0 AND stop_requested_at = 0 AND state IN ($1, $2, $3)`,
		string(StatePending), string(StateStarting), string(StateRunning))
	if err != nil {
		return fmt.Errorf("count warm sandboxes: %w", err)
	}
	byTemplate := map[string][]idle{}
	for rows.Next() {
		var w idle
		var tpl, state string
		if err := rows.Scan(&w.id, &tpl, &w.node, &state, &w.createdAt); err != nil {
			rows.Close()
			return err
		}
		w.state = State(state)
		byTemplate[tpl] = append(byTemplate[tpl], w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	nodeOf := map[string]nodes.WorkNode{}
	for _, n := range s.cfg.Nodes.WorkNodes() {
		nodeOf[n.ID] = n
	}
	for _, o := range tpls {
		var ts compute.SandboxTemplateSpec
		if err := o.DecodeSpec(&ts); err != nil {
			return err
		}
		want := compute.Warm{}
		if ts.Warm != nil {
			want = *ts.Warm
		}
		have := byTemplate[o.ID]
		delete(byTemplate, o.ID)
		var ready []idle
		for _, w := range have {
			if n, ok := nodeOf[w.node]; w.node != "" && (!ok || n.Draining) {
				if err := s.stopIdle(ctx, w, ReasonDraining, "node "+w.node+" drains: an idle warm sandbox is not kept there"); err != nil {
					return err
				}
				continue
			}
			if !madeFromCurrent(w.createdAt, o.UpdatedAt) {
				if err := s.stopIdle(ctx, w, ReasonWarmSurplus, fmt.Sprintf("template %s changed after this idle warm sandbox was made: one of the template as it is now replaces it", o.Name)); err != nil {
					return err
				}
				continue
			}
			ready = append(ready, w)
		}
		switch {
		case len(ready) > want.Max:
			sort.Slice(ready, func(i, j int) bool { return ready[i].createdAt > ready[j].createdAt }) // newest first
			for _, w := range ready[:len(ready)-want.Max] {
				if err := s.stopIdle(ctx, w, ReasonWarmSurplus, fmt.Sprintf("template %s keeps at most %d idle warm sandboxes", o.Name, want.Max)); err != nil {
					return err
				}
			}
		case len(ready) < want.Min:
			for range want.Min - len(ready) {
				_, err := s.Create(ctx, CreateInput{TenantID: o.TenantID, Template: o.ID, CreatedBy: WarmCreator, warm: true})
				if cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) || cubefleet.IsCode(err, cubefleet.CodeInvalidInput) ||
					cubefleet.IsCode(err, cubefleet.CodeUnsupported) {
					s.warmRefused(o.ID, err)
					break
				}
				if err != nil {
					return err
				}
			}
		}
	}
	for _, left := range byTemplate { // warm sandboxes of deleted templates
		for _, w := range left {
			if err := s.stopIdle(ctx, w, ReasonWarmSurplus, "its template no longer exists"); err != nil {
				return err
			}
		}
	}
	return nil
}

// madeFromCurrent reports whether a warm sandbox made at createdAt (Unix ms) was made after its
// template's last change at changedAt (one made in the same millisecond counts as after it): it
// runs with the template's network, egressAllow, image and size as they are now. One made
// before is never claimed, and KeepWarm replaces it, so that a change (a network taken away, a
// narrower egressAllow) holds for every sandbox a create gets from then on.
func madeFromCurrent(createdAt, changedAt int64) bool { return createdAt >= changedAt }

// templateChangedAt returns the last change (Unix ms) of template id; 0 when it is gone (its
// warm sandboxes are stopped by KeepWarm).
func (s *Service) templateChangedAt(ctx context.Context, id string) (int64, error) {
	o, err := compute.Load(ctx, s.db, id)
	if cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("the template of a waiting create: %w", err)
	}
	return o.UpdatedAt, nil
}

// warmRefused logs a refused top-up of template, at most every warmRefusalEvery.
func (s *Service) warmRefused(template string, err error) {
	now := s.now()
	s.loopMu.Lock()
	last := s.warned[template]
	if now-last >= warmRefusalEvery.Milliseconds() {
		s.warned[template] = now
	}
	s.loopMu.Unlock()
	if now-last >= warmRefusalEvery.Milliseconds() {
		s.log.Warn("a warm pool cannot be topped up", "template", template, "err", err)
	}
}

// stopIdle stops an idle warm sandbox: one not yet placed ends at once (killed, reason), a
// placed one gets a stop on its node and ends when the node confirms.
func (s *Service) stopIdle(ctx context.Context, w idle, reason, detail string) error {
	now := s.now()
	r, err := load(ctx, s.db, w.id)
	if err != nil || r == nil {
		return err
	}
	var ended bool
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		if r.NodeID == "" {
			var err error
			ended, err = s.finish(ctx, tx, r, StateKilled, reason, detail, nil)
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET stop_requested_at = $2, stop_reason = $4, message = $3, updated_at = $2
			WHERE id = $1 AND claimed_at = 0 AND stop_requested_at = 0`, r.ID, now, detail, reason)
		if err != nil {
			return fmt.Errorf("stop warm sandbox %s: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil // claimed meanwhile
		}
		return enqueue(ctx, tx, r.NodeID, nodeapi.KindStop, r.ID, "", now)
	})
	if err != nil {
		return err
	}
	if ended {
		s.ended(ctx, r, StateKilled)
	} else if r.NodeID != "" {
		s.hub.work(r.NodeID)
	}
	return nil
}

// Prepare queues the templates of each node's pool that the node does not report among its
// local_templates (kind prepare), so a node that joins gets its pool's templates without an
// operator step (a template that names a runtime, only on nodes of that runtime); a node
// asked once is asked again only after prepareAgain (a node deleted and registered again is
// asked at once: the marks are per registration).
func (s *Service) Prepare(ctx context.Context) error {
	tpls, err := compute.Templates(ctx, s.db)
	if err != nil {
		return err
	}
	byPool := map[string][]string{}
	runtimeOf := map[string]string{}
	for _, o := range tpls {
		byPool[o.Refs[0]] = append(byPool[o.Refs[0]], o.ID)
		var ts compute.SandboxTemplateSpec
		if err := o.DecodeSpec(&ts); err != nil {
			return err
		}
		runtimeOf[o.ID] = ts.Runtime
	}
	now := s.now()
	type job struct{ node, tpl string }
	var jobs []job
	s.loopMu.Lock()
	for key, at := range s.prepared {
		if now-at >= prepareAgain.Milliseconds() {
			delete(s.prepared, key)
		}
	}
	for _, n := range s.cfg.Nodes.WorkNodes() {
		if !n.Cubefleet || n.PoolID == "" || n.State != nodes.StateReady || n.Draining {
			continue
		}
		have := map[string]bool{}
		for _, t := range n.Templates {
			have[t] = true
		}
		for _, t := range byPool[n.PoolID] {
			key := fmt.Sprintf("%s@%d/%s", n.ID, n.RegisteredAt, t)
			if rt := runtimeOf[t]; rt != "" && n.Labels[nodeapi.LabelRuntime] != rt {
				continue // its sandboxes never run there
			}
			if have[t] || now-s.prepared[key] < prepareAgain.Milliseconds() {
				continue
			}
			s.prepared[key] = now
			jobs = append(jobs, job{n.ID, t})
		}
	}
	s.loopMu.Unlock()
	if len(jobs) == 0 {
		return nil
	}
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		for _, j := range jobs {
			if err := enqueue(ctx, tx, j.node, nodeapi.KindPrepare, "", j.tpl, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		s.hub.work(j.node)
	}
	return nil
}
