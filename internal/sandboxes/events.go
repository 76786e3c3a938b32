package sandboxes

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// SandboxEvent takes in an event of sandbox id from node (nodeapi.RouteSandboxEvent), which the
// HTTP edge authenticated. Idempotent by (sandbox id, state): running moves a pending or
// starting sandbox to running and changes nothing later; a final state ends a sandbox that has
// not ended, with its result (each output stream cut at --result-max-bytes with the marker), and
// changes nothing once it has. Errors: NOT_FOUND when the control plane does not run sandbox id
// on node (the agent drops the event).
func (s *Service) SandboxEvent(ctx context.Context, node, id string, ev *nodeapi.SandboxEvent) error {
	r, err := load(ctx, s.db, id)
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
	reason := ev.Reason
	if reason == "" {
		reason = string(ev.State)
	}
	var changed bool
	err = s.db.InGroupTx(ctx, func(tx *sql.Tx) error {
		var err error
		changed, err = s.finish(ctx, tx, r, state, reason, ev.Message, ev)
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
		changed = n == 1
		return nil
	})
	if err != nil {
		return err
	}
	if changed {
		s.m.running(r, now)
		s.hub.changed(r.ID)
	}
	return nil
}

// finish ends r in tx with state (final), reason and message, and, when ev is the node's event,
// its result. It changes nothing when r has ended already (changed false). An ended sandbox
// gives back its share of its quotas, and its queued assignments are dropped.
func (s *Service) finish(ctx context.Context, tx *sql.Tx, r *record, state State, reason, message string, ev *nodeapi.SandboxEvent) (changed bool, err error) {
	now := s.now()
	var exit any
	var signal string
	var outN, errN, cpu, peak int64
	var outT, errT bool
	var stdout, stderr []byte
	if ev != nil {
		if ev.ExitCode != nil {
			exit = int64(*ev.ExitCode)
		}
		signal, cpu, peak = ev.Signal, ev.CPUMillis, ev.PeakMemoryBytes
		stdout, outT = cut(ev.Stdout, ev.StdoutTruncated, s.cfg.ResultMaxBytes)
		stderr, errT = cut(ev.Stderr, ev.StderrTruncated, s.cfg.ResultMaxBytes)
		outN, errN = int64(len(stdout)), int64(len(stderr))
	}
	res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = $2, ended_at = $3, end_reason = $4, message = $5, exit_code = $6, signal = $7,
		stdout_bytes = $8, stderr_bytes = $9, stdout_truncated = $10, stderr_truncated = $11, cpu_ms = $12, peak_memory_bytes = $13,
		charged = 0, queued = 0, updated_at = $3
		WHERE id = $1 AND state IN ($14, $15, $16)`,
		r.ID, string(state), now, reason, message, exit, signal, outN, errN, b2i(outT), b2i(errT), cpu, peak,
		string(StatePending), string(StateStarting), string(StateRunning))
	if err != nil {
		return false, fmt.Errorf("end sandbox %s: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return false, nil
	}
	if r.Charged {
		if err := charge(ctx, tx, r.TenantID, r.PoolID, r.usage(), -1); err != nil {
			return false, err
		}
	}
	if outN > 0 || errN > 0 {
		if stdout == nil {
			stdout = []byte{}
		}
		if stderr == nil {
			stderr = []byte{}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandboxes_output (sandbox_id, stdout, stderr) VALUES ($1, $2, $3)`, r.ID, stdout, stderr); err != nil {
			return false, fmt.Errorf("keep the output of %s: %w", r.ID, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sandboxes_assignments SET done_at = $2 WHERE sandbox_id = $1 AND done_at = 0 AND kind <> $3`,
		r.ID, now, string(nodeapi.KindStop)); err != nil {
		return false, fmt.Errorf("drop the work of %s: %w", r.ID, err)
	}
	r.State, r.EndedAt, r.EndReason, r.Message = state, now, reason, message
	return true, nil
}

// ended runs after a transaction in which r ended with state: its reservation is released (the
// room its node held for it), its waiters woken, and the loops kicked (room freed; a warm pool
// may need a new sandbox).
func (s *Service) ended(ctx context.Context, r *record, state State) {
	s.m.ended(r, state)
	if r.NodeID != "" {
		s.release(ctx, r.ID)
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
