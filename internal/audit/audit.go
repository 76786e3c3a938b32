// Package audit is the control plane's append-only audit log: one row per state-changing API
// call and per refused call (docs/iam.md, "The audit log": a refusal is FORBIDDEN and is audited).
package audit

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the audit module's migrations (`audit/0001_log`, `audit/0002_count_at`).
var Module = store.EmbeddedModule("audit", migrations)

// Outcomes of an audited call.
const (
	OutcomeOK        = "ok"
	OutcomeForbidden = "forbidden"
)

// Entry is one audit row. At is Unix milliseconds; Target is the object the call acted on (an
// id), when there is one; Message never holds a secret. Count is how many calls the row stands
// for: 1 (0 is taken as 1), or more for a row that summarizes refused calls (Summary).
type Entry struct {
	ID          string `json:"id"`
	At          int64  `json:"at"`
	TenantID    string `json:"tenantId"`
	PrincipalID string `json:"principalId"`
	Method      string `json:"method"`
	Permission  string `json:"permission"`
	Scope       string `json:"scope"`
	Outcome     string `json:"outcome"`
	Target      string `json:"target,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
	Message     string `json:"message,omitempty"`
	Count       int64  `json:"count,omitempty"`
}

// count is e.Count as stored: at least 1.
func (e Entry) count() int64 { return max(e.Count, 1) }

// Record appends e (its ID is assigned here when empty) through q, so it commits or rolls back
// with the caller's transaction.
func Record(ctx context.Context, q store.Querier, e Entry) error {
	if e.ID == "" {
		e.ID = cubefleet.NewID("aud")
	}
	_, err := q.ExecContext(ctx, `INSERT INTO audit_log (id, at, tenant_id, principal_id, method, permission, scope, outcome, target, request_id, message, call_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		e.ID, e.At, e.TenantID, e.PrincipalID, e.Method, e.Permission, e.Scope, e.Outcome, e.Target, e.RequestID, e.Message, e.count())
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// Batch collects entries to write together with Flush: a composite call (fleet.apply) that
// makes thousands of calls writes their rows in a few statements instead of one each. It is not
// safe for concurrent use.
type Batch struct{ entries []Entry }

// Add queues e (its ID is assigned here when empty).
func (b *Batch) Add(e Entry) {
	if e.ID == "" {
		e.ID = cubefleet.NewID("aud")
	}
	b.entries = append(b.entries, e)
}

// Len is the number of queued entries.
func (b *Batch) Len() int { return len(b.entries) }

// batchRows is how many rows one INSERT writes. SQLite looks up each $N parameter by name in a
// list, so a statement's preparation grows with the square of its parameters: 50 rows (600
// parameters) keep that small while cutting the round trips to PostgreSQL fiftyfold.
const batchRows = 50

// Flush writes the queued entries through q, in order, and empties the batch.
func (b *Batch) Flush(ctx context.Context, q store.Querier) error {
	for start := 0; start < len(b.entries); start += batchRows {
		chunk := b.entries[start:min(start+batchRows, len(b.entries))]
		var sql strings.Builder
		sql.WriteString(`INSERT INTO audit_log (id, at, tenant_id, principal_id, method, permission, scope, outcome, target, request_id, message, call_count) VALUES `)
		args := make([]any, 0, len(chunk)*12)
		for i, e := range chunk {
			if i > 0 {
				sql.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&sql, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9, n+10, n+11, n+12)
			args = append(args, e.ID, e.At, e.TenantID, e.PrincipalID, e.Method, e.Permission, e.Scope, e.Outcome, e.Target, e.RequestID, e.Message, e.count())
		}
		if _, err := q.ExecContext(ctx, sql.String(), args...); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	b.entries = b.entries[:0]
	return nil
}

// Filter selects audit rows: TenantID is required; Since (Unix ms, inclusive) and Limit (1-1000,
// default 100) are optional; Cursor is the ID of the last row of the previous page.
type Filter struct {
	TenantID string
	Since    int64
	Limit    int
	Cursor   string
}

// List returns the rows matching f, oldest first, and the cursor of the next page ("" at the
// end).
func List(ctx context.Context, q store.Querier, f Filter) ([]Entry, string, error) {
	f.Limit = store.PageLimit(f.Limit)
	out, err := query(ctx, q, f, "ORDER BY id")
	if err != nil {
		return nil, "", err
	}
	out, next := store.ForwardPage(out, f.Limit, func(e Entry) string { return e.ID })
	return out, next, nil
}

// Newest returns the newest f.Limit rows matching f (f.Cursor is ignored), oldest first, and
// whether older ones match too: the tail of the log, for "what just happened", as the event
// log's Newest.
func Newest(ctx context.Context, q store.Querier, f Filter) ([]Entry, bool, error) {
	f.Limit, f.Cursor = store.PageLimit(f.Limit), ""
	out, err := query(ctx, q, f, "ORDER BY id DESC")
	if err != nil {
		return nil, false, err
	}
	out, older := store.TailPage(out, f.Limit)
	return out, older, nil
}

// query returns up to f.Limit+1 rows matching f in the order order names.
func query(ctx context.Context, q store.Querier, f Filter, order string) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, at, tenant_id, principal_id, method, permission, scope, outcome, target, request_id, message, call_count
		FROM audit_log WHERE tenant_id = $1 AND at >= $2 AND id > $3 `+order+` LIMIT $4`, f.TenantID, f.Since, f.Cursor, f.Limit+1)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.ID, &e.At, &e.TenantID, &e.PrincipalID, &e.Method, &e.Permission, &e.Scope, &e.Outcome, &e.Target, &e.RequestID, &e.Message, &e.Count); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		if e.Count == 1 {
			e.Count = 0 // shown only on rows that stand for more than one call
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
