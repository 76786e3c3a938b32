package events

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Delivery states.
const (
	StatePending   = "pending"   // waiting for its next attempt
	StateDelivered = "delivered" // a 2xx answer
	StateFailed    = "failed"    // dead-lettered after the retry horizon; Redeliver queues it again
)

// Delivery is one event on its way to one subscription. Times are Unix ms; LastStatus is the
// last answer's HTTP status (0: none, the attempt failed before an answer) and LastError what
// went wrong (never a secret or the URL).
type Delivery struct {
	ID             string `json:"id"`
	SubscriptionID string `json:"subscriptionId"`
	TenantID       string `json:"tenantId"`
	EventID        string `json:"eventId"`
	EventType      string `json:"eventType"`
	State          string `json:"state"`
	CreatedAt      int64  `json:"createdAt"`
	Attempts       int    `json:"attempts"`
	NextAttemptAt  int64  `json:"nextAttemptAt,omitempty"`
	LastAttemptAt  int64  `json:"lastAttemptAt,omitempty"`
	LastStatus     int    `json:"lastStatus,omitempty"`
	LastError      string `json:"lastError,omitempty"`
	DoneAt         int64  `json:"doneAt,omitempty"`
}

// AuditTarget names the delivery in audit rows.
func (d Delivery) AuditTarget() string { return d.ID }

// Outcome says in plain words where the delivery stands, as the CLI and the console show it:
// "delivered (HTTP 204)", "waiting for its first attempt", "retrying: the receiver answered
// HTTP 503", "gave up after 12 attempts: no answer within the timeout".
func (d Delivery) Outcome() string {
	return cubefleet.DeliveryOutcome(d.State, d.LastStatus, d.Attempts, d.LastError)
}

// Payload is the body of every delivery (Standard Webhooks' payload shape: type, timestamp,
// data), with the event's id, tenant and subject beside them. Timestamp is RFC 3339 in UTC with
// milliseconds, as that scheme writes times.
type Payload struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	TenantID  string          `json:"tenantId"`
	Subject   string          `json:"subject"`
	Data      json.RawMessage `json:"data"`
}

// body renders e's payload: the bytes every attempt of its deliveries sends.
func body(e Event) (string, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b, err := json.Marshal(Payload{ID: e.ID, Type: e.Type, Timestamp: time.UnixMilli(e.At).UTC().Format("2006-01-02T15:04:05.000Z"),
		TenantID: e.TenantID, Subject: e.Subject, Data: data})
	return string(b), err
}

// Wildcard returns the wildcard that names typ's family, "node.*" for "node.down", or "" for a
// type without a dot. A subscription to a wildcard receives every type of the family, also
// those added later.
func Wildcard(typ string) string {
	family, _, ok := strings.Cut(typ, ".")
	if !ok || family == "" {
		return ""
	}
	return family + ".*"
}

// fanOut queues a delivery of each event to each subscription of its tenant to its type.
func fanOut(ctx context.Context, q store.Querier, evs []Event) error {
	tenants, types := map[string]bool{}, map[string]bool{}
	for _, e := range evs {
		tenants[e.TenantID], types[e.Type] = true, true
		if w := Wildcard(e.Type); w != "" {
			types[w] = true
		}
	}
	var args []any
	in := func(set map[string]bool) string {
		var ph []string
		for v := range set {
			args = append(args, v)
			ph = append(ph, fmt.Sprintf("$%d", len(args)))
		}
		return strings.Join(ph, ", ")
	}
	where := `tenant_id IN (` + in(tenants) + `) AND type IN (` + in(types) + `)`
	rows, err := q.QueryContext(ctx, `SELECT tenant_id, type, subscription_id FROM webhook_subscription_types WHERE `+where, args...)
	if err != nil {
		return fmt.Errorf("webhook fan-out: %w", err)
	}
	subs := map[[2]string][]string{}
	for rows.Next() {
		var tenant, typ, sub string
		if err := rows.Scan(&tenant, &typ, &sub); err != nil {
			rows.Close()
			return fmt.Errorf("webhook fan-out: %w", err)
		}
		subs[[2]string{tenant, typ}] = append(subs[[2]string{tenant, typ}], sub)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("webhook fan-out: %w", err)
	}
	for _, e := range evs {
		// A subscription to the type and to its family's wildcard gets one delivery.
		targets := subs[[2]string{e.TenantID, e.Type}]
		if w := Wildcard(e.Type); w != "" {
			for _, sub := range subs[[2]string{e.TenantID, w}] {
				if !slices.Contains(targets, sub) {
					targets = append(targets, sub)
				}
			}
		}
		if len(targets) == 0 {
			continue
		}
		b, err := body(e)
		if err != nil {
			return err
		}
		for _, sub := range targets {
			if _, err := q.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, subscription_id, tenant_id, event_id, event_type, body, state, created_at, retry_from,
				attempts, next_attempt_at, claimed_by, claimed_until, last_error)
				VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7, 0, $7, '', 0, '') ON CONFLICT (subscription_id, event_id) DO NOTHING`,
				cubefleet.NewID("whd"), sub, e.TenantID, e.ID, e.Type, b, e.At); err != nil {
				return fmt.Errorf("queue webhook delivery: %w", err)
			}
		}
	}
	return nil
}

const deliveryColumns = `id, subscription_id, tenant_id, event_id, event_type, state, created_at, attempts, next_attempt_at,
	COALESCE(last_attempt_at, 0), COALESCE(last_status, 0), last_error, COALESCE(done_at, 0)`

func scanDelivery(row interface{ Scan(...any) error }) (Delivery, error) {
	var d Delivery
	err := row.Scan(&d.ID, &d.SubscriptionID, &d.TenantID, &d.EventID, &d.EventType, &d.State, &d.CreatedAt, &d.Attempts, &d.NextAttemptAt,
		&d.LastAttemptAt, &d.LastStatus, &d.LastError, &d.DoneAt)
	if d.State != StatePending {
		d.NextAttemptAt = 0
	}
	return d, err
}

// DeliveryFilter selects deliveries: a tenant's (required), of one subscription, in one state
// ("" any); Limit 1-1000 (default 100); Cursor the ID of the previous page's last delivery.
type DeliveryFilter struct {
	TenantID       string
	SubscriptionID string
	State          string
	Limit          int
	Cursor         string
}

// ListDeliveries returns the deliveries matching f, newest first, and the cursor of the next
// (older) page ("" at the end).
func ListDeliveries(ctx context.Context, q store.Querier, f DeliveryFilter) ([]Delivery, string, error) {
	switch f.State {
	case "", StatePending, StateDelivered, StateFailed:
	default:
		return nil, "", cubefleet.Invalid("state", "state %q: want pending, delivered or failed", f.State)
	}
	f.Limit = store.PageLimit(f.Limit)
	where := []string{"tenant_id = $1"}
	args := []any{f.TenantID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.SubscriptionID != "" {
		add("subscription_id = $%d", f.SubscriptionID)
	}
	if f.State != "" {
		add("state = $%d", f.State)
	}
	if f.Cursor != "" {
		add("id < $%d", f.Cursor)
	}
	args = append(args, f.Limit+1)
	rows, err := q.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, "", fmt.Errorf("list deliveries: %w", err)
	}
	defer rows.Close()
	out := []Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list deliveries: %w", err)
	}
	out, next := store.ForwardPage(out, f.Limit, func(d Delivery) string { return d.ID })
	return out, next, nil
}

// Redeliver queues tenantID's delivery id again now, with a fresh retry horizon: a dead letter
// after its receiver is fixed, or a delivered one the receiver lost. It sends the same body and
// webhook-id. Errors: NOT_FOUND.
func Redeliver(ctx context.Context, q store.Querier, tenantID, id string, now time.Time) (*Delivery, error) {
	at := now.UnixMilli()
	res, err := q.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'pending', retry_from = $1, next_attempt_at = $1, claimed_by = '', claimed_until = 0, done_at = NULL
		WHERE tenant_id = $2 AND id = $3`, at, tenantID, id)
	if err != nil {
		return nil, fmt.Errorf("redeliver: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no webhook delivery %s; `cubefleet webhooks deliveries --tenant %s` lists them", tenantID, id, tenantID)
	}
	d, err := scanDelivery(q.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("redeliver: %w", err)
	}
	return &d, nil
}

// OutboxStats are the outbox's depth and the creation time (Unix ms) of its oldest pending
// delivery (0 when none is pending).
type OutboxStats struct {
	Pending      int
	OldestMillis int64
}

// Outbox returns the outbox's depth and its oldest pending delivery's age.
func Outbox(ctx context.Context, q store.Querier) (OutboxStats, error) {
	var s OutboxStats
	var oldest sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT COUNT(*), MIN(created_at) FROM webhook_deliveries WHERE state = 'pending'`).Scan(&s.Pending, &oldest)
	s.OldestMillis = oldest.Int64
	return s, err
}
