package events

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/netguard"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Limits of webhook subscriptions, so no tenant can make the outbox or a fan-out unbounded.
const (
	MaxSubscriptions   = 100 // per tenant
	MaxSubscribedTypes = 64  // event types per subscription
	MaxDescription     = 200 // characters
	// DefaultSecretOverlap is how long a rotated-out secret keeps signing beside the new one.
	DefaultSecretOverlap = 24 * time.Hour
	// MaxSecretOverlap bounds the overlap a rotation may ask for.
	MaxSecretOverlap = 7 * 24 * time.Hour
	// SecretPrefix starts every signing secret (Standard Webhooks' whsec_ form: the rest is
	// the base64 of 32 random bytes).
	SecretPrefix = "whsec_"
)

// Subscription is a tenant's webhook endpoint: events of the listed types in the tenant's log
// are POSTed to URL, signed with the subscription's secret (Standard Webhooks). CreatedAt is
// Unix ms.
type Subscription struct {
	ID          string   `json:"id"`
	TenantID    string   `json:"tenantId"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
	CreatedBy   string   `json:"createdBy"`
	CreatedAt   int64    `json:"createdAt"`
}

// AuditTarget names the subscription in audit rows.
func (s Subscription) AuditTarget() string { return s.ID }

// WithSecret is a subscription with its signing secret: the answer of create and rotate, the
// only time the secret is shown.
type WithSecret struct {
	Subscription
	Secret string `json:"secret"`
	// PreviousSecretExpiresAt, after a rotation, is when the secret it replaced stops signing
	// (Unix ms).
	PreviousSecretExpiresAt int64 `json:"previousSecretExpiresAt,omitempty"`
}

// Webhooks manages subscriptions and their secrets.
type Webhooks struct {
	// DB is the database the transactions given to Create and RotateSecret belong to (its
	// LockKey serializes a tenant's subscriptions on PostgreSQL).
	DB *store.DB
	// Box seals the signing secrets (the server's secrets key).
	Box *secrets.Box
	// Guard checks a subscription's URL when it is given.
	Guard *netguard.Guard
	// Types maps every event type a subscription may name to whether only the root tenant's
	// log holds it (node lifecycle events).
	Types map[string]bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (w *Webhooks) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// NewSubscription is the input of Create.
type NewSubscription struct {
	TenantID    string
	URL         string
	Events      []string
	Description string
	CreatedBy   string
}

// Create checks in (the URL with the SSRF guard, the event types against w.Types), stores the
// subscription with a fresh secret in tx and returns both; the secret is never shown again.
// Errors: INVALID_INPUT naming the field; RESOURCE_EXHAUSTED past MaxSubscriptions.
func (w *Webhooks) Create(ctx context.Context, tx *sql.Tx, in NewSubscription) (*WithSecret, error) {
	var errs []cubefleet.FieldError
	u, err := w.Guard.CheckURL(ctx, strings.TrimSpace(in.URL))
	if err != nil {
		errs = append(errs, cubefleet.FieldError{Path: "url", Message: fmt.Sprintf("url %q: %s", netguard.Redact(in.URL), netguard.Redact(err.Error()))})
	}
	types, typeErrs := w.checkTypes(in.TenantID, in.Events)
	errs = append(errs, typeErrs...)
	if n := len([]rune(in.Description)); n > MaxDescription {
		errs = append(errs, cubefleet.FieldError{Path: "description", Message: fmt.Sprintf("description is %d characters; at most %d", n, MaxDescription)})
	}
	if len(errs) > 0 {
		return nil, cubefleet.InvalidAll(errs)
	}
	sub := Subscription{ID: cubefleet.NewID("whk"), TenantID: in.TenantID, URL: u.String(), Events: types,
		Description: in.Description, CreatedBy: in.CreatedBy, CreatedAt: w.now().UnixMilli()}
	if err := w.DB.LockKey(ctx, tx, "webhooks:"+in.TenantID); err != nil {
		return nil, err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_subscriptions WHERE tenant_id = $1`, in.TenantID).Scan(&n); err != nil {
		return nil, fmt.Errorf("create subscription: %w", err)
	}
	if n >= MaxSubscriptions {
		return nil, cubefleet.Errorf(cubefleet.CodeResourceExhausted, "tenant %s has %d webhook subscriptions, the most it may have: delete one first", in.TenantID, n)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_subscriptions (id, tenant_id, url, description, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		sub.ID, sub.TenantID, sub.URL, sub.Description, sub.CreatedBy, sub.CreatedAt); err != nil {
		return nil, fmt.Errorf("create subscription: %w", err)
	}
	for _, t := range types {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_subscription_types (tenant_id, type, subscription_id) VALUES ($1, $2, $3)`, sub.TenantID, t, sub.ID); err != nil {
			return nil, fmt.Errorf("create subscription: %w", err)
		}
	}
	secret, err := w.addSecret(ctx, tx, sub.ID)
	if err != nil {
		return nil, err
	}
	return &WithSecret{Subscription: sub, Secret: secret}, nil
}

// checkTypes returns the event types sorted without repeats, and a problem at events for
// every type that is unknown or not the tenant's to subscribe to.
func (w *Webhooks) checkTypes(tenantID string, in []string) ([]string, []cubefleet.FieldError) {
	var types []string
	var errs []cubefleet.FieldError
	add := func(format string, args ...any) {
		errs = append(errs, cubefleet.FieldError{Path: "events", Message: fmt.Sprintf(format, args...)})
	}
	for _, t := range in {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		rootOnly, known := w.Types[t]
		if family, ok := strings.CutSuffix(t, ".*"); ok {
			rootOnly, known = w.family(family)
		}
		switch {
		case !known:
			add("unknown event type %q; the types are %s, and a family's wildcard (%s)", t, strings.Join(w.typeNames(), ", "), strings.Join(w.wildcards(), ", "))
		case rootOnly && tenantID != "root":
			add("%s events belong to the root tenant's log; subscribe with --tenant root", t)
		case !slices.Contains(types, t):
			types = append(types, t)
		}
	}
	switch {
	case len(types) == 0 && len(errs) == 0:
		add("events is required: one or more of %s", strings.Join(w.typeNames(), ", "))
	case len(types) > MaxSubscribedTypes:
		add("%d event types; a subscription takes at most %d", len(types), MaxSubscribedTypes)
	}
	slices.Sort(types)
	return types, errs
}

// family reports whether some type of family (the part before the dot) is known, and whether
// all of them belong to the root tenant's log only.
func (w *Webhooks) family(family string) (rootOnly, known bool) {
	rootOnly = true
	for t, root := range w.Types {
		if Wildcard(t) == family+".*" {
			known, rootOnly = true, rootOnly && root
		}
	}
	return rootOnly, known
}

// wildcards returns the wildcards of the known types' families, sorted.
func (w *Webhooks) wildcards() []string {
	var out []string
	for t := range w.Types {
		if wc := Wildcard(t); wc != "" && !slices.Contains(out, wc) {
			out = append(out, wc)
		}
	}
	slices.Sort(out)
	return out
}

func (w *Webhooks) typeNames() []string {
	var out []string
	for t := range w.Types {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// newSecret returns a fresh signing secret: whsec_ and the base64 of 32 random bytes.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// addSecret stores a fresh current secret for subscription id and returns it.
func (w *Webhooks) addSecret(ctx context.Context, q store.Querier, subID string) (string, error) {
	secret, err := newSecret()
	if err != nil {
		return "", err
	}
	id := cubefleet.NewID("whs")
	sealed, err := w.Box.Seal([]byte(secret), id)
	if err != nil {
		return "", err
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO webhook_secrets (id, subscription_id, sealed, created_at, expires_at) VALUES ($1, $2, $3, $4, NULL)`,
		id, subID, sealed, w.now().UnixMilli()); err != nil {
		return "", fmt.Errorf("store webhook secret: %w", err)
	}
	return secret, nil
}

// RotateSecret gives tenantID's subscription id a new secret in q (a transaction, so the
// rotation is whole) and returns it (shown once); the secrets it had keep signing beside it for
// overlap (at most MaxSecretOverlap; DefaultSecretOverlap is the API's and CLI's default), so
// receivers can switch without losing a delivery. Overlap 0 rotates at once: the old secrets
// are deleted and the next attempt is signed under the new one only (for a leaked secret).
// Errors: NOT_FOUND, INVALID_INPUT at overlap.
func (w *Webhooks) RotateSecret(ctx context.Context, q store.Querier, tenantID, id string, overlap time.Duration) (*WithSecret, error) {
	if overlap < 0 || overlap > MaxSecretOverlap {
		return nil, cubefleet.Invalid("overlap", "overlap must be between 0 and %s", MaxSecretOverlap)
	}
	sub, err := GetSubscription(ctx, q, tenantID, id)
	if err != nil {
		return nil, err
	}
	now := w.now()
	until := now.Add(overlap).UnixMilli()
	if _, err := q.ExecContext(ctx, `UPDATE webhook_secrets SET expires_at = $1 WHERE subscription_id = $2 AND (expires_at IS NULL OR expires_at > $1)`, until, id); err != nil {
		return nil, fmt.Errorf("rotate webhook secret: %w", err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM webhook_secrets WHERE subscription_id = $1 AND expires_at <= $2`, id, now.UnixMilli()); err != nil {
		return nil, fmt.Errorf("rotate webhook secret: %w", err)
	}
	secret, err := w.addSecret(ctx, q, id)
	if err != nil {
		return nil, err
	}
	return &WithSecret{Subscription: *sub, Secret: secret, PreviousSecretExpiresAt: until}, nil
}

// signingSecrets returns the secrets that sign subscription id's deliveries at now: the
// current one first, then those in their overlap.
func signingSecrets(ctx context.Context, q store.Querier, box *secrets.Box, id string, now time.Time) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, sealed FROM webhook_secrets WHERE subscription_id = $1 AND (expires_at IS NULL OR expires_at > $2)
		ORDER BY CASE WHEN expires_at IS NULL THEN 0 ELSE 1 END, created_at DESC`, id, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("webhook secrets: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var sid, sealed string
		if err := rows.Scan(&sid, &sealed); err != nil {
			return nil, err
		}
		plain, err := box.Open(sealed, sid)
		if err != nil {
			return nil, err
		}
		out = append(out, string(plain))
	}
	return out, rows.Err()
}

// GetSubscription returns tenantID's subscription id, or NOT_FOUND.
func GetSubscription(ctx context.Context, q store.Querier, tenantID, id string) (*Subscription, error) {
	subs, err := listSubscriptions(ctx, q, `s.tenant_id = $1 AND s.id = $2`, tenantID, id)
	if err != nil {
		return nil, err
	}
	if len(subs) == 0 {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no webhook subscription %s; `cubefleet webhooks list --tenant %s` lists them", tenantID, id, tenantID)
	}
	return &subs[0], nil
}

// ListSubscriptions returns tenantID's subscriptions, oldest first.
func ListSubscriptions(ctx context.Context, q store.Querier, tenantID string) ([]Subscription, error) {
	return listSubscriptions(ctx, q, `s.tenant_id = $1`, tenantID)
}

func listSubscriptions(ctx context.Context, q store.Querier, where string, args ...any) ([]Subscription, error) {
	rows, err := q.QueryContext(ctx, `SELECT s.id, s.tenant_id, s.url, s.description, s.created_by, s.created_at, t.type
		FROM webhook_subscriptions s LEFT JOIN webhook_subscription_types t ON t.subscription_id = s.id
		WHERE `+where+` ORDER BY s.id, t.type`, args...)
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	defer rows.Close()
	out := []Subscription{}
	for rows.Next() {
		var s Subscription
		var typ sql.NullString
		if err := rows.Scan(&s.ID, &s.TenantID, &s.URL, &s.Description, &s.CreatedBy, &s.CreatedAt, &typ); err != nil {
			return nil, fmt.Errorf("list subscriptions: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].ID == s.ID {
			out[n-1].Events = append(out[n-1].Events, typ.String)
			continue
		}
		s.Events = []string{}
		if typ.Valid {
			s.Events = append(s.Events, typ.String)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// DeleteSubscription removes tenantID's subscription id with its secrets and deliveries (a
// delivery in flight is not recorded), or returns NOT_FOUND.
func DeleteSubscription(ctx context.Context, q store.Querier, tenantID, id string) (*Subscription, error) {
	sub, err := GetSubscription(ctx, q, tenantID, id)
	if err != nil {
		return nil, err
	}
	for _, stmt := range []string{
		`DELETE FROM webhook_subscription_types WHERE subscription_id = $1`,
		`DELETE FROM webhook_secrets WHERE subscription_id = $1`,
		`DELETE FROM webhook_deliveries WHERE subscription_id = $1`,
		`DELETE FROM webhook_subscriptions WHERE id = $1`,
	} {
		if _, err := q.ExecContext(ctx, stmt, id); err != nil {
			return nil, fmt.Errorf("delete subscription: %w", err)
		}
	}
	return sub, nil
}
