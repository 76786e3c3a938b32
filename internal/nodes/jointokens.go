package nodes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

// JoinTokenState is where a join token stands, from [JoinTokenStatus].
type JoinTokenState string

// The join token states.
const (
	// JoinTokenUsable: not revoked, not expired, uses left.
	JoinTokenUsable JoinTokenState = "usable"
	// JoinTokenUsed: every use was taken.
	JoinTokenUsed JoinTokenState = "used"
	// JoinTokenExpired: its lifetime ended.
	JoinTokenExpired JoinTokenState = "expired"
	// JoinTokenRevoked: revoked (nodes.joinTokens.revoke); this wins over the others.
	JoinTokenRevoked JoinTokenState = "revoked"
)

// JoinTokenStatus is the join token state rule at now (Unix ms): revoked when revokedAt is not
// 0, else expired once now reaches expiresAt, else used when no use is left, else usable.
func JoinTokenStatus(now, expiresAt, revokedAt int64, usesLeft int) JoinTokenState {
	switch {
	case revokedAt != 0:
		return JoinTokenRevoked
	case now >= expiresAt:
		return JoinTokenExpired
	case usesLeft <= 0:
		return JoinTokenUsed
	}
	return JoinTokenUsable
}

// joinTokenCols are the columns a JoinToken is read from (never hash).
const joinTokenCols = `id, prefix, pool_id, ip, any_ip, uses, uses_left, expires_at, created_at, created_by, revoked_at, revoked_by`

// ledgerByID copies this process's ledger by token id.
func (r *Registry) ledgerByID() map[string]tokenLedger {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	out := make(map[string]tokenLedger, len(r.ledger))
	for _, l := range r.ledger {
		out[l.id] = *l
	}
	return out
}

// scanJoinToken reads one row of joinTokenCols at now; ledger (ledgerByID) adds the uses this
// replica took but has not written yet (at most a flush interval old).
func (r *Registry) scanJoinToken(row interface{ Scan(...any) error }, now int64, ledger map[string]tokenLedger) (JoinToken, error) {
	var t JoinToken
	var anyIP int
	if err := row.Scan(&t.ID, &t.Prefix, &t.PoolID, &t.IP, &anyIP, &t.Uses, &t.UsesLeft, &t.ExpiresAt, &t.CreatedAt, &t.CreatedBy,
		&t.RevokedAt, &t.RevokedBy); err != nil {
		return JoinToken{}, err
	}
	t.AnyIP = anyIP == 1
	if l, ok := ledger[t.ID]; ok {
		t.UsesLeft = min(t.UsesLeft, l.usesLeft)
		if t.IP == "" && !t.AnyIP {
			t.IP = l.ip
		}
	}
	if p, ok := r.pools.Load().byID[t.PoolID]; ok {
		t.Pool = p.Name
	}
	t.State = JoinTokenStatus(now, t.ExpiresAt, t.RevokedAt, t.UsesLeft)
	return t, nil
}

// ListJoinTokens lists the join tokens through q, oldest first: only the usable ones, or with
// all every one (used, expired and revoked too). Neither a token nor its hash is ever in the
// answer. UsesLeft counts this replica's uses not yet written, not another replica's (those
// within a second).
func (r *Registry) ListJoinTokens(ctx context.Context, q store.Querier, all bool) ([]JoinToken, error) {
	now := r.now()
	query := `SELECT ` + joinTokenCols + ` FROM nodes_join_tokens`
	var args []any
	if !all {
		query += ` WHERE revoked_at = 0 AND expires_at > $1 AND uses_left > 0`
		args = append(args, now)
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list join tokens: %w", err)
	}
	defer rows.Close()
	out := []JoinToken{}
	ledger := r.ledgerByID()
	for rows.Next() {
		t, err := r.scanJoinToken(rows, now, ledger)
		if err != nil {
			return nil, fmt.Errorf("list join tokens: %w", err)
		}
		if !all && t.State != JoinTokenUsable { // used up by this replica since
			continue
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list join tokens: %w", err)
	}
	return out, nil
}

// RevokeJoinToken revokes join token id through q (the caller's transaction), recording by (a
// principal id) and the time, and returns it. It is idempotent: revoking a revoked token
// changes nothing (the first revocation's time and principal stand), and a used or expired
// token can be revoked too. Every replica reads the revocation when the token is next used, so
// it is refused everywhere (401 "join token ... was revoked"). Nodes that joined with it stay.
// Errors: INVALID_INPUT without an id, NOT_FOUND for an unknown one.
func (r *Registry) RevokeJoinToken(ctx context.Context, q store.Querier, id, by string) (JoinToken, error) {
	if id == "" {
		return JoinToken{}, cubefleet.Invalid("id", "id is required: the join token's id (jtk_...), as nodes.joinTokens.list shows it")
	}
	now := r.now()
	if _, err := q.ExecContext(ctx, `UPDATE nodes_join_tokens SET revoked_at = $2, revoked_by = $3 WHERE id = $1 AND revoked_at = 0`, id, now, by); err != nil {
		return JoinToken{}, fmt.Errorf("revoke join token %s: %w", id, err)
	}
	t, err := r.scanJoinToken(q.QueryRowContext(ctx, `SELECT `+joinTokenCols+` FROM nodes_join_tokens WHERE id = $1`, id), now, r.ledgerByID())
	if errors.Is(err, sql.ErrNoRows) {
		return JoinToken{}, cubefleet.Errorf(cubefleet.CodeNotFound, "join token %s not found", id)
	}
	if err != nil {
		return JoinToken{}, fmt.Errorf("revoke join token %s: %w", id, err)
	}
	return t, nil
}
