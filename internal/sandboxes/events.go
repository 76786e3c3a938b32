package sandboxes

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// SandboxEvent takes in an event of sandbox id (the id node knows it by: record.RunsAs) from
// node (nodeapi.RouteSandboxEvent), which the HTTP edge authenticated. Idempotent by (sandbox id, state): running moves a pending or
// starting sandbox to running and changes nothing later; a final state ends a sandbox that has
// not ended, with its result (each output stream cut at --result-max-bytes with the marker), and
// changes nothing once it has. Errors: NOT_FOUND when the control plane does not run sandbox id
// on node (the agent drops the event).
func (s *Service) SandboxEvent(ctx context.Context, node, id string, ev *nodeapi.SandboxEvent) error {
	r, err := loadRunsAs(ctx, s.db, id)
	if err != nil {
		return err
	}
	if r == nil || r.NodeID != node {
		return cubefleet.Errorf(cubefleet.CodeNotFound, "node %s runs no sandbox %s of this control plane", node, id)
	}
	if ev.State == nodeapi.StateRunning {
		return s.markRunning(ctx, r, ReasonStarted)
	}
	state := State(ev.State)
	reason, message := ev.Reason, ev.Message
	if reason == "" {
		reason = string(ev.State)
	}
	if state == StateKilled && r.StopReason != "" { // the control plane stopped it: say why
		reason, message = r.StopReason, r.Message
		if ev.Message != "" {
			message += "; " + ev.Message
		}
	}
	if r.State == StateLost && state == StateKilled && ev.Reason == "stopped" {
		return nil // the stop the control plane queued when it lost the sandbox: it stays lost
	}
	if r.State == StateLost && state != StateLost {
		return s.foundEnd(ctx, r, state, reason, ev)
	}
	var changed bool
	err = s.db.InGroupTx(ctx, func(tx *sql.Tx) error {
		var err error
		changed, err = s.finish(ctx, tx, r, state, reason, message, ev)
		return err
	})
	if err != nil {
		return err
	}
	if changed {
		s.ended(ctx, r, state)
	}
	return nil
}

// markRunning moves r to running (reason; warm_ready for an idle warm sandbox) unless it is
// running or ended.
func (s *Service) markRunning(ctx context.Context, r *record, reason string) error {
	if r.Warm && r.ClaimedAt == 0 {
		reason = ReasonWarmReady
	}
	now := s.now()
	var changed bool
	err := s.db.InGroupTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = $2, running_at = $3, running_reason = $4, queued = 0, updated_at = $3
			WHERE id = $1 AND state IN ($5, $6)`, r.ID, string(StateRunning), now, reason, string(StatePending), string(StateStarting))
		if err != nil {
			return fmt.Errorf("mark %s running: %w", r.ID, err)
		}
		n, _ := res.RowsAffected()
		if changed = n == 1; changed {
			return publish(ctx, tx, r, EventStarted, StateRunning, reason, nil, now)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if changed {
		s.m.running(r, now)
		s.hub.changed(r.ID)
		if reason == ReasonWarmReady {
			s.hub.kickLoops() // a create waiting for room may claim it
		}
	}
	return nil
}

// finish ends r in tx with state (final), reason and message, and, when ev is the node's event,
// its result. It changes nothing when r has ended already (changed false). An ended sandbox
// gives back its share of its quotas, and its queued assignments are dropped.
func (s *Service) finish(ctx context.Context, tx *sql.Tx, r *record, state State, reason, message string, ev *nodeapi.SandboxEvent) (changed bool, err error) {
	now := s.now()
	res := s.resultOf(ev)
	sqlRes, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = $2, ended_at = $3, end_reason = $4, message = $5, exit_code = $6, signal = $7,
		stdout_bytes = $8, stderr_bytes = $9, stdout_truncated = $10, stderr_truncated = $11, cpu_ms = $12, peak_memory_bytes = $13,
		charged = 0, queued = 0, updated_at = $3
		WHERE id = $1 AND state IN ($14, $15, $16, $17)`,
		r.ID, string(state), now, reason, message, res.exit, res.signal, len(res.stdout), len(res.stderr), b2i(res.outT), b2i(res.errT), res.cpu, res.peak,
		string(StatePending), string(StateStarting), string(StateRunning), string(StateUnknown))
	if err != nil {
		return false, fmt.Errorf("end sandbox %s: %w", r.ID, err)
	}
	if n, _ := sqlRes.RowsAffected(); n != 1 {
		return false, nil
	}
	if r.Charged {
		if err := charge(ctx, tx, r.TenantID, r.PoolID, r.usage(), -1); err != nil {
			return false, err
		}
	}
	if err := s.keepOutput(ctx, tx, r, res); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sandboxes_assignments SET done_at = $2 WHERE sandbox_id = $1 AND done_at = 0 AND kind <> $3`,
		r.ID, now, string(nodeapi.KindStop)); err != nil {
		return false, fmt.Errorf("drop the work of %s: %w", r.ID, err)
	}
	if err := publish(ctx, tx, r, endEvents[state], state, reason, res.exit, now); err != nil {
		return false, err
	}
	r.State, r.EndedAt, r.EndReason, r.Message = state, now, reason, message
	return true, nil
}

// result is a node's final event as a sandbox keeps it: each stream cut at --result-max-bytes.
type result struct {
	exit           any // int64, or nil without an exit code
	signal         string
	cpu, peak      int64
	stdout, stderr []byte
	outT, errT     bool
}

// resultOf is ev's result (none for a nil ev).
func (s *Service) resultOf(ev *nodeapi.SandboxEvent) result {
	var res result
	if ev == nil {
		return res
	}
	if ev.ExitCode != nil {
		res.exit = int64(*ev.ExitCode)
	}
	res.signal, res.cpu, res.peak = ev.Signal, ev.CPUMillis, ev.PeakMemoryBytes
	res.stdout, res.outT = cut(ev.Stdout, ev.StdoutTruncated, s.cfg.ResultMaxBytes)
	res.stderr, res.errT = cut(ev.Stderr, ev.StderrTruncated, s.cfg.ResultMaxBytes)
	return res
}

// foundEnd records the end a node reports of sandbox r, which was found lost while the node was
// away (Down, or its reports stopped listing it): its state becomes the reported one (state,
// reason) with its result, and its message says it had been lost. Its quota share and its
// reservation were given back when it was lost and are not given back again; an end reported
// twice changes nothing the second time.
func (s *Service) foundEnd(ctx context.Context, r *record, state State, reason string, ev *nodeapi.SandboxEvent) error {
	now := s.now()
	res := s.resultOf(ev)
	message := fmt.Sprintf("it had been lost (%s: %s) before node %s reported its end", r.EndReason, r.Message, r.NodeID)
	if ev.Message != "" {
		message = ev.Message + "; " + message
	}
	var changed bool
	err := s.db.InGroupTx(ctx, func(tx *sql.Tx) error {
		sqlRes, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = $2, ended_at = $3, end_reason = $4, message = $5, exit_code = $6, signal = $7,
			stdout_bytes = $8, stderr_bytes = $9, stdout_truncated = $10, stderr_truncated = $11, cpu_ms = $12, peak_memory_bytes = $13, updated_at = $3
			WHERE id = $1 AND state = $14`,
			r.ID, string(state), now, reason, message, res.exit, res.signal, len(res.stdout), len(res.stderr), b2i(res.outT), b2i(res.errT), res.cpu, res.peak,
			string(StateLost))
		if err != nil {
			return fmt.Errorf("record the end of lost sandbox %s: %w", r.ID, err)
		}
		if n, _ := sqlRes.RowsAffected(); n != 1 {
			return nil
		}
		changed = true
		if err := publish(ctx, tx, r, endEvents[state], state, reason, res.exit, now); err != nil {
			return err
		}
		return s.keepOutput(ctx, tx, r, res)
	})
	if err != nil || !changed {
		return err
	}
	s.log.Info("a lost sandbox's end reached the control plane", "sandbox", r.ID, "node", r.NodeID, "state", state, "reason", reason)
	s.hub.changed(r.ID)
	return nil
}

// ended runs after a transaction in which r ended with state: its reservation is released (the
// room its node held for it), its waiters woken, and the loops kicked (room freed; a warm pool
// may need a new sandbox).
func (s *Service) ended(ctx context.Context, r *record, state State) {
	s.m.ended(r, state)
	s.live.drop(r.ID)
	if r.NodeID != "" {
		s.release(ctx, r.RunsAs)
	}
	s.hub.changed(r.ID)
	s.hub.kickLoops()
}

// cut keeps the first limit bytes of b and the truncation marker when b is longer than limit
// and a marker (an agent that kept more than it was asked to); truncated says whether the
// stream was cut, by the node or here.
func cut(b []byte, truncated bool, limit int64) ([]byte, bool) {
	if int64(len(b)) <= limit+int64(nodeapi.MaxTruncationMarkerLen) {
		return b, truncated
	}
	out := make([]byte, 0, limit+int64(nodeapi.MaxTruncationMarkerLen))
	out = append(out, b[:limit]...)
	return append(out, nodeapi.TruncationMarker(limit)...), true
}
