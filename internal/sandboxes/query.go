package sandboxes

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Get returns tenant's sandbox id. Errors: NOT_FOUND (another tenant's sandbox, a deleted one
// and one past its retention included).
func (s *Service) Get(ctx context.Context, tenant, id string) (Sandbox, error) {
	r, err := s.visible(ctx, tenant, id)
	if err != nil {
		return Sandbox{}, err
	}
	return r.view(), nil
}

// visible loads tenant's sandbox id unless it is another tenant's or deleted (NOT_FOUND).
func (s *Service) visible(ctx context.Context, tenant, id string) (*record, error) {
	if !cubefleet.IsID(id, "sbx") {
		return nil, cubefleet.Invalid("id", "id takes a sandbox id (sbx_ and 26 characters), not %q", id)
	}
	r, err := load(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if r == nil || r.TenantID != tenant || r.DeletedAt != 0 {
		return nil, notFound(tenant, id)
	}
	return r, nil
}

// ListInput selects a page of a tenant's sandboxes, newest first: State (one of States), Node
// (a node id), Template (a template id or name), Warm (the live idle sandboxes of the tenant's
// warm pools instead of its own), Limit 1-1000 (default 100), Cursor the previous page's
// NextCursor.
type ListInput struct {
	TenantID string
	State    State
	Node     string
	Template string
	Warm     bool
	Limit    int
	Cursor   string
}

// List returns a page of tenant's sandboxes (newest first) and the cursor of the next page (""
// on the last). Idle warm sandboxes are listed only with Warm. Errors: INVALID_INPUT naming the
// field.
func (s *Service) List(ctx context.Context, in ListInput) ([]Sandbox, string, error) {
	if in.Limit < 0 || in.Limit > 1000 {
		return nil, "", cubefleet.Invalid("limit", "limit is 1 to 1000")
	}
	if in.Limit == 0 {
		in.Limit = 100
	}
	if in.State != "" && !in.State.Valid() {
		return nil, "", cubefleet.Invalid("state", "state is one of pending, starting, running, unknown, exited, failed, killed, lost")
	}
	if in.Cursor != "" && !cubefleet.IsID(in.Cursor, "sbx") {
		return nil, "", cubefleet.Invalid("cursor", "cursor %q is not a page's nextCursor (a sandbox id): pass the nextCursor of the previous page", in.Cursor)
	}
	where := []string{"tenant_id = $1", "deleted_at = 0"}
	args := []any{in.TenantID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if in.Warm {
		where = append(where, "warm = 1", "claimed_at = 0", "ended_at = 0")
	} else {
		where = append(where, "(warm = 0 OR claimed_at <> 0)")
	}
	if in.State != "" {
		add("state = $%d", string(in.State))
	}
	if in.Node != "" {
		add("node_id = $%d", in.Node)
	}
	if in.Template != "" {
		if err := s.checkListTemplate(ctx, in.TenantID, in.Template); err != nil {
			return nil, "", err
		}
		args = append(args, in.Template)
		where = append(where, fmt.Sprintf("(template_id = $%d OR template_name = $%d)", len(args), len(args)))
	}
	if in.Cursor != "" {
		// Newest first by creation time (a claimed warm sandbox's is its claim's), then id.
		var at int64
		err := s.db.QueryRowContext(ctx, `SELECT created_at FROM sandboxes WHERE id = $1 AND tenant_id = $2`, in.Cursor, in.TenantID).Scan(&at)
		if err == sql.ErrNoRows {
			return nil, "", cubefleet.Invalid("cursor", "cursor %s names no sandbox of tenant %s any more: list again from the first page", in.Cursor, in.TenantID)
		}
		if err != nil {
			return nil, "", fmt.Errorf("read the cursor: %w", err)
		}
		args = append(args, at, in.Cursor)
		where = append(where, fmt.Sprintf("(created_at < $%d OR (created_at = $%d AND id < $%d))", len(args)-1, len(args)-1, len(args)))
	}
	recs, err := query(ctx, s.db, strings.Join(where, " AND ")+fmt.Sprintf(" ORDER BY created_at DESC, id DESC LIMIT %d", in.Limit+1), args...)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(recs) > in.Limit {
		recs = recs[:in.Limit]
		next = recs[in.Limit-1].ID
	}
	out := make([]Sandbox, len(recs))
	for i, r := range recs {
		out[i] = r.view()
	}
	return out, next, nil
}

// checkListTemplate refuses a list by template ref (id or name) that names neither a template of
// tenant nor the template of one of its sandboxes (INVALID_INPUT naming template, as a create).
func (s *Service) checkListTemplate(ctx context.Context, tenant, ref string) error {
	_, err := compute.FindNamed(ctx, s.db, tenant, compute.KindSandboxTemplate, ref)
	if !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		return err
	}
	var one int
	err = s.db.QueryRowContext(ctx, `SELECT 1 FROM sandboxes WHERE tenant_id = $1 AND (template_id = $2 OR template_name = $2) LIMIT 1`, tenant, ref).Scan(&one)
	if err == sql.ErrNoRows {
		return cubefleet.Invalid("template", "tenant %s has no sandbox template %s (cubefleet templates list --tenant %s shows them)", tenant, fieldrules.Quoted(ref), tenant)
	}
	return err
}

// Output is a sandbox's captured output: each stream at most --result-max-bytes and the cut
// marker. Final is false while the sandbox has not ended: the streams are then what its agent
// sent so far (Follow). StdoutOffset and StderrOffset are the byte offsets in their stream where
// Stdout and Stderr start.
type Output struct {
	Stdout          []byte
	Stderr          []byte
	StdoutTruncated bool
	StderrTruncated bool
	Final           bool
	StdoutOffset    int64
	StderrOffset    int64
}

// Logs returns the output of tenant's sandbox id (Follow from the start, without waiting).
// Errors: NOT_FOUND.
func (s *Service) Logs(ctx context.Context, tenant, id string) (Sandbox, Output, error) {
	return s.Follow(ctx, tenant, id, Offsets{}, 0)
}

// Wait waits until tenant's sandbox id has ended (untilRunning: until it runs or has ended)
// or timeout passed (at most MaxWait), and returns it as it is then; done says whether it got
// there. It sees a change made on this replica at once and one made on another within half a
// second; after EndWaits it answers at once, as on its timeout. Errors: NOT_FOUND, or ctx's.
func (s *Service) Wait(ctx context.Context, tenant, id string, untilRunning bool, timeout time.Duration) (Sandbox, bool, error) {
	timeout = min(max(timeout, 0), MaxWait)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	watched := id // the sandbox that answers for id (a warm one a waiting create claimed)
	for {
		woken, cancel := s.hub.watchSandbox(watched)
		r, err := s.visible(ctx, tenant, id)
		if err != nil {
			cancel()
			return Sandbox{}, false, err
		}
		if r.ID != watched {
			watched = r.ID
			cancel()
			continue
		}
		if r.State.Final() || untilRunning && r.State == StateRunning {
			cancel()
			return r.view(), true, nil
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-deadline.C:
			cancel()
			return r.view(), false, nil
		case <-s.hub.ending:
			cancel()
			return r.view(), false, nil
		case <-ctx.Done():
			cancel()
			return Sandbox{}, false, ctx.Err()
		}
		cancel()
	}
}

// Delete deletes tenant's sandbox id: one that has ended is removed with its result at once;
// one still waiting for room ends (killed, reason deleted) and is removed; one that is placed is
// stopped on its node (SIGTERM, then SIGKILL after its grace) and hidden at once (NOT_FOUND from
// then on), and removed once its node confirms the end. It returns the sandbox as it was, with
// StopRequestedAt set for one being stopped. Audit, when set, is written in the transaction.
// Errors: NOT_FOUND.
func (s *Service) Delete(ctx context.Context, tenant, id string, auditRow *audit.Entry) (Sandbox, error) {
	r, err := s.visible(ctx, tenant, id)
	if err != nil {
		return Sandbox{}, err
	}
	now := s.now()
	var endedNow bool
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		switch {
		case r.State.Final():
			if err := remove(ctx, tx, []string{r.ID}); err != nil {
				return err
			}
		case r.NodeID == "":
			changed, err := s.finish(ctx, tx, r, StateKilled, ReasonDeleted, "deleted before it was placed", nil)
			if err != nil {
				return err
			}
			if !changed { // placed meanwhile: try again
				return cubefleet.Errorf(cubefleet.CodeConflict, "sandbox %s changed while it was deleted: retry", r.ID)
			}
			endedNow = true
			if err := remove(ctx, tx, []string{r.ID}); err != nil {
				return err
			}
		default:
			if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET deleted_at = $2, stop_requested_at = $2, updated_at = $2 WHERE id = $1`, r.ID, now); err != nil {
				return fmt.Errorf("delete %s: %w", r.ID, err)
			}
			r.StopRequestedAt = now
			if err := enqueue(ctx, tx, r.NodeID, nodeapi.KindStop, r.ID, "", now); err != nil {
				return err
			}
		}
		return recordAudit(ctx, tx, auditRow, r.ID)
	})
	if err != nil {
		return Sandbox{}, err
	}
	switch {
	case endedNow:
		s.ended(ctx, r, StateKilled)
	case r.StopRequestedAt != 0:
		s.hub.work(r.NodeID)
		s.hub.changed(r.ID)
	}
	return r.view(), nil
}

// remove deletes the rows of sandboxes ids and their output.
func remove(ctx context.Context, tx *sql.Tx, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	for _, table := range []string{"sandboxes_output WHERE sandbox_id", "sandboxes WHERE id"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` IN (`+placeholders(1, len(ids))+`)`, anys(ids)...); err != nil {
			return fmt.Errorf("remove sandboxes: %w", err)
		}
	}
	return nil
}

// NodeSandboxes is what a node runs by the control plane's records, for nodes.get: the ids of
// its running sandboxes, of those placed there and not yet running (pending on the node), and
// of the unknown ones (running when the node stopped reporting: they may run on), each list at
// most 100, and their counts; WarmIdle counts the idle warm sandboxes among them.
type NodeSandboxes struct {
	Running    int      `json:"running"`
	Pending    int      `json:"pending"`
	Unknown    int      `json:"unknown"`
	RunningIDs []string `json:"runningIds"`
	PendingIDs []string `json:"pendingIds"`
	UnknownIDs []string `json:"unknownIds"`
	WarmIdle   int      `json:"warmIdle"`
}

// OnNode returns what node runs by the control plane's records.
func (s *Service) OnNode(ctx context.Context, node string) (NodeSandboxes, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, state, warm, claimed_at FROM sandboxes WHERE node_id = $1 AND state IN ($2, $3, $4, $5) ORDER BY id`,
		node, string(StatePending), string(StateStarting), string(StateRunning), string(StateUnknown))
	if err != nil {
		return NodeSandboxes{}, fmt.Errorf("read the sandboxes of node %s: %w", node, err)
	}
	defer rows.Close()
	out := NodeSandboxes{RunningIDs: []string{}, PendingIDs: []string{}, UnknownIDs: []string{}}
	for rows.Next() {
		var id, state string
		var warm int
		var claimed int64
		if err := rows.Scan(&id, &state, &warm, &claimed); err != nil {
			return NodeSandboxes{}, err
		}
		if warm == 1 && claimed == 0 {
			out.WarmIdle++
		}
		count, ids := &out.Pending, &out.PendingIDs
		switch State(state) {
		case StateRunning:
			count, ids = &out.Running, &out.RunningIDs
		case StateUnknown:
			count, ids = &out.Unknown, &out.UnknownIDs
		}
		*count++
		if len(*ids) < 100 {
			*ids = append(*ids, id)
		}
	}
	return out, rows.Err()
}

// Unacknowledged counts the sandboxes placed on node that its agent has not acknowledged yet:
// starting (handed to the node, or queued for it), neither reported running nor ended nor
// listed by the node. The registry asks before it calls a draining node drained
// (nodes.Config.Unacknowledged).
func (s *Service) Unacknowledged(ctx context.Context, node string) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE node_id = $1 AND state = $2`, node, string(StateStarting)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the unacknowledged sandboxes of node %s: %w", node, err)
	}
	return n, nil
}
