// Package iam holds tenants, principals (users and service accounts), API keys and grants, and
// decides whether a principal holds a permission on a scope (docs/iam.md; docs/server.md, "API
// conventions"). Keys are random 256-bit tokens stored as SHA-256 hashes and shown once.
package iam

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the iam module's migrations (`iam/0001_init`, `iam/0002_sessions`).
var Module = store.EmbeddedModule("iam", migrations)

// Grant is one permission on one scope, e.g. {compute:pools:create, tenant/acme}.
type Grant struct {
	Permission string `json:"permission"`
	Scope      string `json:"scope"`
}

// String renders the grant as PERMISSION@SCOPE, the CLI's form.
func (g Grant) String() string { return g.Permission + "@" + g.Scope }

// ParseGrant parses PERMISSION@SCOPE. It returns INVALID_INPUT when the form is wrong.
func ParseGrant(s string) (Grant, error) {
	perm, scope, ok := strings.Cut(s, "@")
	if !ok || perm == "" || scope == "" {
		return Grant{}, cubefleet.Invalid("grant", "grant %q is not PERMISSION@SCOPE (e.g. compute:fleet:admin@compute-fleet/global)", s)
	}
	return Grant{Permission: perm, Scope: scope}, nil
}

// Principal is an authenticated user or service account with the grants it holds.
type Principal struct {
	ID       string  `json:"id"`
	TenantID string  `json:"tenantId"`
	Kind     string  `json:"kind"` // "user" or "service"
	Name     string  `json:"name"`
	Grants   []Grant `json:"grants"`
	KeyID    string  `json:"keyId,omitempty"`
}

// Decide returns nil when p holds permission on scope, and a FORBIDDEN error naming both
// otherwise. It reads no storage: the grants were loaded with the principal.
func Decide(p *Principal, permission, scope string) error {
	if p == nil {
		return NoCredentials()
	}
	for _, g := range p.Grants {
		if permMatches(g.Permission, permission) && scopeMatches(g.Scope, scope) {
			return nil
		}
	}
	return &cubefleet.Error{
		Code:    cubefleet.CodeForbidden,
		Message: fmt.Sprintf("%s (%s) lacks %s on %s; a key needs the grant %s@%s", p.Name, p.ID, permission, scope, permission, scope),
		Details: map[string]any{"permission": permission, "scope": scope},
	}
}

// NoCredentials returns the error of a call that carries no credentials at all: UNAUTHENTICATED,
// saying how to send an API key.
func NoCredentials() error {
	return cubefleet.Errorf(cubefleet.CodeUnauthenticated, "no credentials: send Authorization: Bearer <api key>")
}

// Tenant is a customer (or the platform itself: "root").
type Tenant struct {
	ID        string `json:"id"`
	CreatedAt int64  `json:"createdAt"` // Unix ms
}

// CreateTenant creates tenant id (1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or
// digit). It returns INVALID_INPUT for a bad id and CONFLICT when it exists.
func CreateTenant(ctx context.Context, q store.Querier, id string, now time.Time) (Tenant, error) {
	if !fieldrules.Name.Match(id) {
		return Tenant{}, cubefleet.Invalid("id", "tenant id %q must be 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", id)
	}
	t := Tenant{ID: id, CreatedAt: now.UnixMilli()}
	if _, err := q.ExecContext(ctx, `INSERT INTO iam_tenants (id, created_at) VALUES ($1, $2)`, t.ID, t.CreatedAt); err != nil {
		if store.IsUniqueViolation(err) {
			return Tenant{}, cubefleet.Errorf(cubefleet.CodeConflict, "tenant %s exists", id)
		}
		return Tenant{}, fmt.Errorf("create tenant: %w", err)
	}
	return t, nil
}

// ListTenants returns every tenant, ordered by id.
func ListTenants(ctx context.Context, q store.Querier) ([]Tenant, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, created_at FROM iam_tenants ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	defer rows.Close()
	out := []Tenant{}
	for rows.Next() {
		var t Tenant
		if err := rows.Scan(&t.ID, &t.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TenantExists reports whether tenant id exists.
func TenantExists(ctx context.Context, q store.Querier, id string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM iam_tenants WHERE id = $1`, id).Scan(&n)
	return n > 0, err
}

// Key is an API key as listings show it; the token itself is shown only once, at creation.
type Key struct {
	ID            string  `json:"id"`
	PrincipalID   string  `json:"principalId"`
	PrincipalName string  `json:"principalName"`
	TenantID      string  `json:"tenantId"`
	Prefix        string  `json:"prefix"` // the token's first characters, to recognise it
	Grants        []Grant `json:"grants"`
	CreatedAt     int64   `json:"createdAt"`           // Unix ms
	CreatedBy     string  `json:"createdBy"`           // principal id
	ExpiresAt     *int64  `json:"expiresAt,omitempty"` // Unix ms
	RevokedAt     *int64  `json:"revokedAt,omitempty"` // Unix ms
}

// TokenPrefix starts every API key, so secret scanners can find leaked keys.
const TokenPrefix = "cfk_"

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewServiceKey is the input of CreateServiceKey.
type NewServiceKey struct {
	TenantID string
	Name     string        // the service account's name
	Grants   []Grant       // at least one
	TTL      time.Duration // 0: never expires
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._ -]{0,62}$`)

// CreateServiceKey creates a service account in in.TenantID holding in.Grants and one API key
// for it, and returns the key and its token (shown once). creator must itself hold every grant
// it gives (no escalation); grants must name permissions of cat on scopes of their form, and
// a principal outside the root tenant may hold grants only on its own tenant. Errors:
// INVALID_INPUT (with the grant's index in details.path), NOT_FOUND for an unknown tenant,
// FORBIDDEN for a grant the creator does not hold.
func CreateServiceKey(ctx context.Context, q store.Querier, cat Catalogue, creator *Principal, in NewServiceKey, now time.Time) (Key, string, error) {
	if !namePattern.MatchString(in.Name) {
		return Key{}, "", cubefleet.Invalid("name", "name %q must be 1-63 of letters, digits, '.', '_', '-', ' '", in.Name)
	}
	if len(in.Grants) == 0 {
		return Key{}, "", cubefleet.Invalid("grants", "a key needs at least one grant (PERMISSION@SCOPE); `cubefleet keys permissions` lists them")
	}
	if in.TTL < 0 {
		return Key{}, "", cubefleet.Invalid("ttlSeconds", "a key's lifetime must be positive")
	}
	ok, err := TenantExists(ctx, q, in.TenantID)
	if err != nil {
		return Key{}, "", err
	}
	if !ok {
		return Key{}, "", cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s does not exist", in.TenantID)
	}
	for i, g := range in.Grants {
		if err := checkGrant(cat, in.TenantID, g); err != nil {
			return Key{}, "", cubefleet.Invalid(fmt.Sprintf("grants[%d]", i), "%s", err)
		}
		if id, ok := strings.CutPrefix(g.Scope, scopeTenantPfx); ok && id != "*" {
			if ok, err := TenantExists(ctx, q, id); err != nil {
				return Key{}, "", err
			} else if !ok {
				return Key{}, "", cubefleet.Invalid(fmt.Sprintf("grants[%d]", i), "tenant %s does not exist; `cubefleet tenants list` shows the tenants", id)
			}
		}
		if creator != nil && !holds(cat, creator, g) {
			return Key{}, "", cubefleet.Errorf(cubefleet.CodeForbidden, "you cannot grant %s: you do not hold it", g)
		}
	}
	kind := "service"
	principalID := cubefleet.NewID("svc")
	createdBy := "bootstrap"
	if creator != nil {
		createdBy = creator.ID
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO iam_principals (id, tenant_id, kind, name, created_at) VALUES ($1, $2, $3, $4, $5)`,
		principalID, in.TenantID, kind, in.Name, now.UnixMilli()); err != nil {
		return Key{}, "", fmt.Errorf("create principal: %w", err)
	}
	seen := map[Grant]bool{}
	for _, g := range in.Grants {
		if seen[g] {
			continue
		}
		seen[g] = true
		if _, err := q.ExecContext(ctx, `INSERT INTO iam_grants (principal_id, permission, scope) VALUES ($1, $2, $3)`, principalID, g.Permission, g.Scope); err != nil {
			return Key{}, "", fmt.Errorf("create grant: %w", err)
		}
	}
	token, err := newToken()
	if err != nil {
		return Key{}, "", err
	}
	k := Key{
		ID: cubefleet.NewID("key"), PrincipalID: principalID, PrincipalName: in.Name, TenantID: in.TenantID,
		Prefix: token[:len(TokenPrefix)+6], CreatedAt: now.UnixMilli(), CreatedBy: createdBy,
	}
	for g := range seen {
		k.Grants = append(k.Grants, g)
	}
	sortGrants(k.Grants)
	if in.TTL > 0 {
		exp := now.Add(in.TTL).UnixMilli()
		k.ExpiresAt = &exp
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO iam_keys (id, principal_id, token_hash, prefix, created_at, created_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, principalID, hashToken(token), k.Prefix, k.CreatedAt, k.CreatedBy, k.ExpiresAt); err != nil {
		return Key{}, "", fmt.Errorf("create key: %w", err)
	}
	return k, token, nil
}

// checkGrant checks that g names a permission of cat on a scope of its form, valid for a
// principal of tenantID.
func checkGrant(cat Catalogue, tenantID string, g Grant) error {
	info, ok := cat.Lookup(g.Permission)
	if !ok {
		return fmt.Errorf("unknown permission %q; `cubefleet keys permissions` lists them", g.Permission)
	}
	if info.RootOnly && tenantID != RootTenant {
		return fmt.Errorf("%s can be held only by root-tenant principals", g.Permission)
	}
	switch info.Scope {
	case ScopeFormTenant:
		id, ok := strings.CutPrefix(g.Scope, scopeTenantPfx)
		if !ok || (id != "*" && !fieldrules.Name.Match(id)) {
			return fmt.Errorf("%s is granted on tenant/<id>, not %q", g.Permission, g.Scope)
		}
		if tenantID != RootTenant && id != tenantID {
			return fmt.Errorf("a principal of tenant %s may hold grants only on tenant/%s", tenantID, tenantID)
		}
	default:
		if g.Scope != info.Scope {
			return fmt.Errorf("%s is granted only on %s, not %q", g.Permission, info.Scope, g.Scope)
		}
	}
	return nil
}

// holds reports whether p's grants cover g entirely (used to refuse escalation). A wildcard
// grant ("compute:pools:*") is held when p holds it, or every permission of cat it covers.
func holds(cat Catalogue, p *Principal, g Grant) bool {
	if holdsExactly(p, g) {
		return true
	}
	if !strings.HasSuffix(g.Permission, ":*") {
		return false
	}
	covered := 0
	for _, c := range cat {
		if permMatches(g.Permission, c.Permission) {
			covered++
			if !holdsExactly(p, Grant{Permission: c.Permission, Scope: g.Scope}) {
				return false
			}
		}
	}
	return covered > 0
}

func holdsExactly(p *Principal, g Grant) bool {
	for _, h := range p.Grants {
		permOK := permMatches(h.Permission, g.Permission) || h.Permission == g.Permission
		scopeOK := scopeMatches(h.Scope, g.Scope) || h.Scope == g.Scope
		if permOK && scopeOK {
			return true
		}
	}
	return false
}

// The causes (cubefleet.Error.Err) of Authenticate's UNAUTHENTICATED errors for a token that
// names no key; a known key it refuses has a *KeyRefused.
var (
	ErrMalformedKey = errors.New("malformed API key")
	ErrUnknownKey   = errors.New("unknown API key")
)

// KeyRefused is the cause of Authenticate's UNAUTHENTICATED error for a key it knows and
// refuses: who the key belongs to, and why (Reason "revoked" or "expired"). It never holds the
// token.
type KeyRefused struct {
	KeyID, PrincipalID, TenantID string
	Reason                       string
}

// Error says which key was refused and why.
func (k *KeyRefused) Error() string { return "API key " + k.KeyID + " " + k.Reason }

// Authenticate returns the principal that token belongs to, with its grants. It returns
// UNAUTHENTICATED for an unknown, revoked or expired key, with ErrMalformedKey, ErrUnknownKey
// or a *KeyRefused as its cause (errors.Is, errors.As); the message never repeats the token.
func Authenticate(ctx context.Context, q store.Querier, token string, now time.Time) (*Principal, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return nil, &cubefleet.Error{Code: cubefleet.CodeUnauthenticated, Message: "malformed API key", Err: ErrMalformedKey}
	}
	var p Principal
	var expires, revoked sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT k.id, k.expires_at, k.revoked_at, p.id, p.tenant_id, p.kind, p.name
		FROM iam_keys k JOIN iam_principals p ON p.id = k.principal_id WHERE k.token_hash = $1`, hashToken(token)).
		Scan(&p.KeyID, &expires, &revoked, &p.ID, &p.TenantID, &p.Kind, &p.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &cubefleet.Error{Code: cubefleet.CodeUnauthenticated, Message: "unknown API key", Err: ErrUnknownKey}
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	refused := func(reason, msg string) error {
		return &cubefleet.Error{Code: cubefleet.CodeUnauthenticated, Message: msg,
			Err: &KeyRefused{KeyID: p.KeyID, PrincipalID: p.ID, TenantID: p.TenantID, Reason: reason}}
	}
	if revoked.Valid {
		return nil, refused("revoked", "API key "+p.KeyID+" was revoked")
	}
	if expires.Valid && now.UnixMilli() >= expires.Int64 {
		return nil, refused("expired", "API key "+p.KeyID+" expired")
	}
	p.Grants, err = grantsOf(ctx, q, p.ID)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func grantsOf(ctx context.Context, q store.Querier, principalID string) ([]Grant, error) {
	rows, err := q.QueryContext(ctx, `SELECT permission, scope FROM iam_grants WHERE principal_id = $1 ORDER BY permission, scope`, principalID)
	if err != nil {
		return nil, fmt.Errorf("load grants: %w", err)
	}
	defer rows.Close()
	var out []Grant
	for rows.Next() {
		var g Grant
		if err := rows.Scan(&g.Permission, &g.Scope); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// ListKeys returns the keys of tenantID's principals, newest first.
func ListKeys(ctx context.Context, q store.Querier, tenantID string) ([]Key, error) {
	rows, err := q.QueryContext(ctx, `SELECT k.id, k.principal_id, p.name, p.tenant_id, k.prefix, k.created_at, k.created_by, k.expires_at, k.revoked_at
		FROM iam_keys k JOIN iam_principals p ON p.id = k.principal_id WHERE p.tenant_id = $1 ORDER BY k.created_at DESC, k.id DESC`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	out := []Key{}
	for rows.Next() {
		var k Key
		var exp, rev sql.NullInt64
		if err := rows.Scan(&k.ID, &k.PrincipalID, &k.PrincipalName, &k.TenantID, &k.Prefix, &k.CreatedAt, &k.CreatedBy, &exp, &rev); err != nil {
			return nil, err
		}
		if exp.Valid {
			k.ExpiresAt = &exp.Int64
		}
		if rev.Valid {
			k.RevokedAt = &rev.Int64
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	for i := range out {
		if out[i].Grants, err = grantsOf(ctx, q, out[i].PrincipalID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RevokeKey revokes key id of tenantID. It returns NOT_FOUND when the tenant has no such key;
// revoking a revoked key is a no-op.
func RevokeKey(ctx context.Context, q store.Querier, tenantID, id string, now time.Time) error {
	res, err := q.ExecContext(ctx, `UPDATE iam_keys SET revoked_at = COALESCE(revoked_at, $1)
		WHERE id = $2 AND principal_id IN (SELECT id FROM iam_principals WHERE tenant_id = $3)`, now.UnixMilli(), id, tenantID)
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no key %s", tenantID, id)
	}
	return nil
}

// Initialized reports whether the root tenant has a principal (Bootstrap or `server init` ran).
func Initialized(ctx context.Context, q store.Querier) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM iam_principals WHERE tenant_id = $1`, RootTenant).Scan(&n); err != nil {
		return false, fmt.Errorf("check initialization: %w", err)
	}
	return n > 0, nil
}

// ErrInitialized is returned by Bootstrap when the root tenant already has a principal.
var ErrInitialized = errors.New("already initialized: the root tenant has principals")

// Bootstrap creates the root tenant and its first administrator (a service account "admin"
// holding cat.AdminGrants: every permission of the catalogue) with one API key, and returns the
// key and its token. It returns ErrInitialized when the root tenant already has a principal.
func Bootstrap(ctx context.Context, q store.Querier, cat Catalogue, now time.Time) (Key, string, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM iam_principals WHERE tenant_id = $1`, RootTenant).Scan(&n); err != nil {
		return Key{}, "", fmt.Errorf("bootstrap: %w", err)
	}
	if n > 0 {
		return Key{}, "", ErrInitialized
	}
	if ok, err := TenantExists(ctx, q, RootTenant); err != nil {
		return Key{}, "", err
	} else if !ok {
		if _, err := CreateTenant(ctx, q, RootTenant, now); err != nil {
			return Key{}, "", err
		}
	}
	return CreateServiceKey(ctx, q, cat, nil, NewServiceKey{TenantID: RootTenant, Name: "admin", Grants: cat.AdminGrants()}, now)
}

func sortGrants(gs []Grant) {
	slices.SortFunc(gs, func(a, b Grant) int { return strings.Compare(a.String(), b.String()) })
}

// PrincipalNames returns the name of each principal of ids that exists (its key's name, as
// `keys create --name` gave it), by id: what pages show instead of a principal id.
func PrincipalNames(ctx context.Context, q store.Querier, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		if _, ok := out[id]; ok || id == "" {
			continue
		}
		var name string
		err := q.QueryRowContext(ctx, `SELECT name FROM iam_principals WHERE id = $1`, id).Scan(&name)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("principal names: %w", err)
		}
		out[id] = name
	}
	return out, nil
}
