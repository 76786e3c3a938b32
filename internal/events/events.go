// Package events is the control plane's event log: an append-only table of what happened to the
// things it manages (node lifecycle: joined, suspect, down, lost, recovered, cordoned, ...), read
// through the events.list API method (permission events:read on tenant/root); fleet drift
// (fleet.drifted, fleet.converged, in the drifted tenant's log). It is also the webhook
// outbox: tenants subscribe endpoints to event types (webhooks.go), Append queues a delivery
// per matching subscription in the event's own transaction (outbox.go), and the Dispatcher
// sends them signed the Standard Webhooks way, at least once, with retries (dispatch.go)
// (docs/drift-webhooks.md).
package events

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the events module's migrations (`events/0001_log`, `events/0002_webhooks`).
var Module = store.EmbeddedModule("events", migrations)

// Event is one entry of the log. ID is `evt_<ULID>`, so ids sort by the time they were made;
// At is Unix milliseconds on the control plane's clock; Type is dotted (`node.suspect`);
// Subject names the object it is about (a node id); Data is a JSON object with the details
// (never a secret).
type Event struct {
	ID       string          `json:"id"`
	At       int64           `json:"at"`
	TenantID string          `json:"tenantId"`
	Type     string          `json:"type"`
	Subject  string          `json:"subject"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// batchRows is how many events one INSERT writes (11 parameters fewer than audit's rows, same
// reasoning: SQLite prepares a statement in time quadratic in its parameters).
const batchRows = 50

// Append writes evs through q, in order, assigning ids to those without one (in evs, so a
// retry after an unknown outcome writes the same ids), and queues one webhook delivery per
// event and subscription of its tenant to its type (the outbox). An event whose id the log
// already holds is not written again: a batch retried after a commit that did happen adds
// nothing. With a transaction as q the events and their deliveries commit or roll back with
// the caller's work.
func Append(ctx context.Context, q store.Querier, evs ...Event) error {
	for start := 0; start < len(evs); start += batchRows {
		chunk := evs[start:min(start+batchRows, len(evs))]
		var sql strings.Builder
		sql.WriteString(`INSERT INTO events_log (id, at, tenant_id, type, subject, data) VALUES `)
		args := make([]any, 0, len(chunk)*6)
		for i := range chunk {
			e := &chunk[i]
			if e.ID == "" {
				e.ID = cubefleet.NewID("evt")
			}
			data := string(e.Data)
			if data == "" {
				data = "{}"
			}
			if i > 0 {
				sql.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&sql, "($%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6)
			args = append(args, e.ID, e.At, e.TenantID, e.Type, e.Subject, data)
		}
		sql.WriteString(" ON CONFLICT (id) DO NOTHING")
		if _, err := q.ExecContext(ctx, sql.String(), args...); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		if err := fanOut(ctx, q, chunk); err != nil {
			return err
		}
	}
	return nil
}

// Filter selects events. TenantID is required. Type is an exact type (`node.lost`) or, ending
// in a dot, a prefix (`node.`); Subject an exact subject; Since a Unix time in milliseconds
// (inclusive); Limit 1-1000 (default 100); Cursor the ID of the previous page's last event.
type Filter struct {
	TenantID string
	Type     string
	Subject  string
	Since    int64
	Limit    int
	Cursor   string
}

// List returns the events matching f, oldest first, and the cursor of the next page ("" at the
// end).
func List(ctx context.Context, q store.Querier, f Filter) ([]Event, string, error) {
	f.Limit = store.PageLimit(f.Limit)
	where, args := f.where()
	args = append(args, f.Limit+1)
	out, err := query(ctx, q, where+fmt.Sprintf(" ORDER BY id LIMIT $%d", len(args)), args)
	if err != nil {
		return nil, "", err
	}
	out, next := store.ForwardPage(out, f.Limit, func(e Event) string { return e.ID })
	return out, next, nil
}

// Newest returns the newest f.Limit events matching f (f.Cursor is ignored), oldest first, and
// whether older ones match too: the tail of the log, for "what just happened".
func Newest(ctx context.Context, q store.Querier, f Filter) ([]Event, bool, error) {
	f.Limit, f.Cursor = store.PageLimit(f.Limit), ""
	where, args := f.where()
	args = append(args, f.Limit+1)
	out, err := query(ctx, q, where+fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args)), args)
	if err != nil {
		return nil, false, err
	}
	out, older := store.TailPage(out, f.Limit)
	return out, older, nil
}

// where is f's WHERE clause and its arguments ($1...).
func (f Filter) where() (string, []any) {
	where := []string{"tenant_id = $1", "at >= $2", "id > $3"}
	args := []any{f.TenantID, f.Since, f.Cursor}
	if f.Type != "" {
		args = append(args, f.Type)
		if prefix, ok := strings.CutSuffix(f.Type, "."); ok {
			args[len(args)-1] = prefix + ".%"
			where = append(where, fmt.Sprintf("type LIKE $%d", len(args)))
		} else {
			where = append(where, fmt.Sprintf("type = $%d", len(args)))
		}
	}
	if f.Subject != "" {
		args = append(args, f.Subject)
		where = append(where, fmt.Sprintf("subject = $%d", len(args)))
	}
	return strings.Join(where, " AND "), args
}

// query reads the events of `SELECT ... FROM events_log WHERE <rest>`.
func query(ctx context.Context, q store.Querier, rest string, args []any) ([]Event, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, at, tenant_id, type, subject, data FROM events_log WHERE `+rest, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var data string
		if err := rows.Scan(&e.ID, &e.At, &e.TenantID, &e.Type, &e.Subject, &data); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}
