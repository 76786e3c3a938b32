package iam

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

// sessionPrefix starts every console session token.
const sessionPrefix = "cfs_"

// CreateSession starts a web console session for p, who signed in with API key p.KeyID, valid
// for ttl; it returns the session token (stored only hashed) and its expiry (Unix ms). Expired
// sessions are removed on the way.
func CreateSession(ctx context.Context, q store.Querier, p *Principal, ttl time.Duration, now time.Time) (string, int64, error) {
	if p == nil || p.KeyID == "" {
		return "", 0, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "a session is made from an API key")
	}
	token, err := newToken()
	if err != nil {
		return "", 0, err
	}
	token = sessionPrefix + strings.TrimPrefix(token, TokenPrefix)
	expires := now.Add(ttl).UnixMilli()
	if _, err := q.ExecContext(ctx, `DELETE FROM iam_sessions WHERE expires_at <= $1`, now.UnixMilli()); err != nil {
		return "", 0, fmt.Errorf("create session: %w", err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO iam_sessions (token_hash, key_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		hashToken(token), p.KeyID, now.UnixMilli(), expires); err != nil {
		return "", 0, fmt.Errorf("create session: %w", err)
	}
	return token, expires, nil
}

// AuthenticateSession returns the principal of a console session token, with its grants as
// they are now. It returns UNAUTHENTICATED for an unknown or expired session, and for one
// whose API key was revoked or expired since.
func AuthenticateSession(ctx context.Context, q store.Querier, token string, now time.Time) (*Principal, error) {
	if !strings.HasPrefix(token, sessionPrefix) {
		return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "malformed session")
	}
	var p Principal
	var sessionExpires int64
	var expires, revoked sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT s.expires_at, k.id, k.expires_at, k.revoked_at, p.id, p.tenant_id, p.kind, p.name
		FROM iam_sessions s JOIN iam_keys k ON k.id = s.key_id JOIN iam_principals p ON p.id = k.principal_id WHERE s.token_hash = $1`, hashToken(token)).
		Scan(&sessionExpires, &p.KeyID, &expires, &revoked, &p.ID, &p.TenantID, &p.Kind, &p.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "unknown session: sign in again")
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate session: %w", err)
	}
	switch {
	case now.UnixMilli() >= sessionExpires:
		return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "the session expired: sign in again")
	case revoked.Valid:
		return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "the session's API key %s was revoked", p.KeyID)
	case expires.Valid && now.UnixMilli() >= expires.Int64:
		return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "the session's API key %s expired", p.KeyID)
	}
	if p.Grants, err = grantsOf(ctx, q, p.ID); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteSession ends the session of token (sign out); an unknown token is not an error.
func DeleteSession(ctx context.Context, q store.Querier, token string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM iam_sessions WHERE token_hash = $1`, hashToken(token)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
