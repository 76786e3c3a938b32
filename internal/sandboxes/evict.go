package sandboxes

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// EvictDrained stops the sandboxes still running on a draining node whose drain deadline has
// passed (`nodes drain --deadline`): each gets a stop on its node (SIGTERM, then SIGKILL after
// its own terminationGraceSeconds) and ends killed with reason node_drained once its node
// reports the end; its result is kept like any other. A sandbox stopped already (deleted, or
// stopped before) is left to that stop, and an idle warm sandbox to the warm pool (which stops
// it, reason node_draining). A sandbox still starting is moved off the draining node
// by its next work request, or stopped by a later pass once it runs. The lease holder runs it
// every Every (Reconcile).
func (s *Service) EvictDrained(ctx context.Context) error {
	now := s.now()
	for _, n := range s.cfg.Nodes.WorkNodes() {
		if !n.Draining || n.DrainDeadline == 0 || now < n.DrainDeadline {
			continue
		}
		recs, err := query(ctx, s.db, `node_id = $1 AND state = $2 AND stop_requested_at = 0 AND deleted_at = 0 AND (warm = 0 OR claimed_at <> 0)`, n.ID, string(StateRunning))
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := s.evict(ctx, r, n.DrainDeadline, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// evict queues the stop of r, whose node's drain deadline passed at deadline (Unix ms).
func (s *Service) evict(ctx context.Context, r *record, deadline, now int64) error {
	detail := fmt.Sprintf("node %s's drain deadline passed (%s): stopped, %ds grace", r.NodeID,
		time.UnixMilli(deadline).UTC().Format(time.RFC3339), r.Spec.graceSeconds())
	var queued bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET stop_requested_at = $2, stop_reason = $3, message = $4, updated_at = $2
			WHERE id = $1 AND state = $5 AND stop_requested_at = 0 AND deleted_at = 0`, r.ID, now, ReasonNodeDrained, detail, string(StateRunning))
		if err != nil {
			return fmt.Errorf("stop sandbox %s at its node's drain deadline: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil // ended, deleted or stopped meanwhile
		}
		queued = true
		return enqueue(ctx, tx, r.NodeID, nodeapi.KindStop, r.ID, "", now)
	})
	if err != nil || !queued {
		return err
	}
	s.log.Info("drain deadline passed: sandbox stopped", "sandbox", r.ID, "node", r.NodeID)
	s.hub.work(r.NodeID)
	s.hub.changed(r.ID)
	return nil
}
