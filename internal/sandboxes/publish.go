package sandboxes

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/cubefleet/cubefleet/internal/events"
)

// The sandboxes' event types, in the sandbox's tenant's log, with the sandbox's id (the one its
// create answered, also for a claimed warm sandbox) as the subject and SandboxEventData as the
// data. An idle warm sandbox (a warm pool's own, not claimed) publishes none.
const (
	EventStarted = "sandbox.started" // its command runs on its node
	EventExited  = "sandbox.exited"  // its command ended by itself (any exit code)
	EventFailed  = "sandbox.failed"  // it could not be started (no room within --pending-timeout, a program not found, ...)
	EventKilled  = "sandbox.killed"  // it was stopped: deleted, its timeout, a drain
	EventLost    = "sandbox.lost"    // its node stopped listing it, went Down or was deleted
)

// EventTypes lists the sandboxes' event types.
var EventTypes = []string{EventStarted, EventExited, EventFailed, EventKilled, EventLost}

// SandboxEventData is the data of every sandbox event: what happened to which sandbox, where.
// It never carries the sandbox's environment, command or output. ExitCode is set only when the
// command exited with one.
type SandboxEventData struct {
	SandboxID  string `json:"sandboxId"`
	TemplateID string `json:"templateId"`
	Template   string `json:"template,omitempty"` // the template's fleet name
	PoolID     string `json:"poolId"`
	NodeID     string `json:"nodeId,omitempty"`
	State      State  `json:"state"`
	Reason     string `json:"reason,omitempty"`
	ExitCode   *int64 `json:"exitCode,omitempty"`
}

// endEvents maps a final state to its event type.
var endEvents = map[State]string{StateExited: EventExited, StateFailed: EventFailed, StateKilled: EventKilled, StateLost: EventLost}

// publish appends r's event of type typ (its state now state, for reason, with exit, an int64
// or nil) to its tenant's log in tx, at now (Unix ms); nothing for an idle warm sandbox.
func publish(ctx context.Context, tx *sql.Tx, r *record, typ string, state State, reason string, exit any, now int64) error {
	if r.Warm && r.ClaimedAt == 0 {
		return nil
	}
	id := r.ID
	d := SandboxEventData{SandboxID: id, TemplateID: r.TemplateID, Template: r.TemplateName, PoolID: r.PoolID, NodeID: r.NodeID, State: state, Reason: reason}
	if code, ok := exit.(int64); ok {
		d.ExitCode = &code
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := events.Append(ctx, tx, events.Event{At: now, TenantID: r.TenantID, Type: typ, Subject: id, Data: data}); err != nil {
		return fmt.Errorf("sandbox %s: %w", r.ID, err)
	}
	return nil
}
