package nodestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/store"
)

// CreateJoinToken makes a join token (nodes.Registry.NewJoinToken: the pool resolved, the rules
// of nodes.JoinTokenInput applied) and stores it through q (the caller's transaction), created
// by createdBy (a principal id). It returns the token and its secret (shown once; only its
// SHA-256 is stored). Errors: INVALID_INPUT naming the field (see NewJoinToken).
func (s *Store) CreateJoinToken(ctx context.Context, q store.Querier, in nodes.JoinTokenInput, createdBy string) (nodes.JoinToken, string, error) {
	t, secret, err := s.reg.NewJoinToken(ctx, in, createdBy)
	if err != nil {
		return nodes.JoinToken{}, "", err
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO nodes_join_tokens (id, hash, prefix, pool_id, ip, any_ip, uses, uses_left, expires_at, created_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		t.ID, nodes.HashToken(secret), t.Prefix, t.PoolID, t.IP, boolInt(t.AnyIP), t.Uses, t.Uses, t.ExpiresAt, t.CreatedAt, t.CreatedBy); err != nil {
		return nodes.JoinToken{}, "", fmt.Errorf("create join token: %w", err)
	}
	return t, secret, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// joinTokenCols are the columns a JoinToken is read from (never hash).
const joinTokenCols = `id, prefix, pool_id, ip, any_ip, uses, uses_left, expires_at, created_at, created_by, revoked_at, revoked_by`

// ledgerByID copies this process's ledger by token id.
func (s *Store) ledgerByID() map[string]tokenLedger {
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	out := make(map[string]tokenLedger, len(s.ledger))
	for _, l := range s.ledger {
		out[l.id] = *l
	}
	return out
}

// scanJoinToken reads one row of joinTokenCols at now; ledger (ledgerByID) adds the uses this
// replica took but has not written yet (at most a flush interval old).
func (s *Store) scanJoinToken(row interface{ Scan(...any) error }, now int64, ledger map[string]tokenLedger) (nodes.JoinToken, error) {
	var t nodes.JoinToken
	var anyIP int
	if err := row.Scan(&t.ID, &t.Prefix, &t.PoolID, &t.IP, &anyIP, &t.Uses, &t.UsesLeft, &t.ExpiresAt, &t.CreatedAt, &t.CreatedBy,
		&t.RevokedAt, &t.RevokedBy); err != nil {
		return nodes.JoinToken{}, err
	}
	t.AnyIP = anyIP == 1
	if l, ok := ledger[t.ID]; ok {
		t.UsesLeft = min(t.UsesLeft, l.usesLeft)
		if t.IP == "" && !t.AnyIP {
			t.IP = l.ip
		}
	}
	if p, ok := s.reg.Pool(t.PoolID); ok {
		t.Pool = p.Name
	}
	t.State = nodes.JoinTokenStatus(now, t.ExpiresAt, t.RevokedAt, t.UsesLeft)
	return t, nil
}

// ListJoinTokens lists the join tokens through q, oldest first: only the usable ones, or with
// all every one (used, expired and revoked too). Neither a token nor its hash is ever in the
// answer. UsesLeft counts this replica's uses not yet written, not another replica's (those
// within a second).
func (s *Store) ListJoinTokens(ctx context.Context, q store.Querier, all bool) ([]nodes.JoinToken, error) {
	now := s.now()
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
	out := []nodes.JoinToken{}
	ledger := s.ledgerByID()
	for rows.Next() {
		t, err := s.scanJoinToken(rows, now, ledger)
		if err != nil {
			return nil, fmt.Errorf("list join tokens: %w", err)
		}
		if !all && t.State != nodes.JoinTokenUsable { // used up by this replica since
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
func (s *Store) RevokeJoinToken(ctx context.Context, q store.Querier, id, by string) (nodes.JoinToken, error) {
	if id == "" {
		return nodes.JoinToken{}, cubefleet.Invalid("id", "id is required: the join token's id (jtk_...), as nodes.joinTokens.list shows it")
	}
	now := s.now()
	if _, err := q.ExecContext(ctx, `UPDATE nodes_join_tokens SET revoked_at = $2, revoked_by = $3 WHERE id = $1 AND revoked_at = 0`, id, now, by); err != nil {
		return nodes.JoinToken{}, fmt.Errorf("revoke join token %s: %w", id, err)
	}
	t, err := s.scanJoinToken(q.QueryRowContext(ctx, `SELECT `+joinTokenCols+` FROM nodes_join_tokens WHERE id = $1`, id), now, s.ledgerByID())
	if errors.Is(err, sql.ErrNoRows) {
		return nodes.JoinToken{}, cubefleet.Errorf(cubefleet.CodeNotFound, "join token %s not found", id)
	}
	if err != nil {
		return nodes.JoinToken{}, fmt.Errorf("revoke join token %s: %w", id, err)
	}
	return t, nil
}

// tokenLedger is this process's view of one join token, read from the database on its first
// use and kept in memory from then on: uses are taken here at once (so a registration never
// waits for a write) and written by the flusher with a conditional decrement that also catches
// a use another replica took first.
type tokenLedger struct {
	id        string
	poolID    string
	ip        string // the address it is bound to ("" until its first use binds it)
	anyIP     bool
	usesLeft  int
	expires   int64 // Unix ms
	revokedAt int64 // Unix ms; 0: not revoked (read from the database on every use)
}

// maxLedger bounds the join tokens kept in memory; expired ones are dropped first.
const maxLedger = 10000

// TakeJoin checks a join token (by hash) for a registration from peer of node nodeID at
// address host (its host_ip) and takes one use of it. Its state is read from the database on
// every use (a token another replica revoked, used or bound is seen at once); the uses this
// process took but has not written yet are kept in the ledger. A *nodes.Refusal is 401 when the token
// is unknown, revoked, expired, used up, or bound to another address than peer, and 403 when
// the token is bound to an address (by --ip or its first use, which is peer's) and the
// registration names another one in host or node_id: a bound token registers exactly the node
// whose node_id and host_ip are that address, so `--uses N` lets that node join again after a
// deletion but never adds a second node at the address. A token accepted from any address
// (--any-ip) registers any node.
func (s *Store) TakeJoin(ctx context.Context, hash string, peer, host netip.Addr, nodeID string) (nodes.JoinUse, error) {
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	now := s.now()
	l := s.ledger[hash]
	if l != nil {
		// The ledger keeps the uses this process took; the database says whether the token
		// was revoked meanwhile (on any replica), and what the others took and bound.
		var revokedAt int64
		var usesLeft int
		var ip string
		err := s.db.QueryRowContext(ctx, `SELECT revoked_at, uses_left, ip FROM nodes_join_tokens WHERE id = $1`, l.id).Scan(&revokedAt, &usesLeft, &ip)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			delete(s.ledger, hash)
			return nodes.JoinUse{}, nodes.Unauthenticated("join_token_unknown", "unknown join token")
		case err != nil:
			return nodes.JoinUse{}, fmt.Errorf("join token: %w", err)
		}
		l.revokedAt, l.usesLeft = revokedAt, min(l.usesLeft, usesLeft)
		if l.ip == "" {
			l.ip = ip
		}
	}
	if l == nil {
		l = &tokenLedger{}
		var anyIP int
		err := s.db.QueryRowContext(ctx, `SELECT id, pool_id, ip, any_ip, uses_left, expires_at, revoked_at FROM nodes_join_tokens WHERE hash = $1`, hash).
			Scan(&l.id, &l.poolID, &l.ip, &anyIP, &l.usesLeft, &l.expires, &l.revokedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return nodes.JoinUse{}, nodes.Unauthenticated("join_token_unknown", "unknown join token")
		}
		if err != nil {
			return nodes.JoinUse{}, fmt.Errorf("join token: %w", err)
		}
		l.anyIP = anyIP == 1
		if len(s.ledger) >= maxLedger {
			for h, e := range s.ledger {
				if e.expires <= now {
					delete(s.ledger, h)
				}
			}
			if len(s.ledger) >= maxLedger {
				clear(s.ledger)
			}
		}
		s.ledger[hash] = l
	}
	if l.revokedAt != 0 {
		return nodes.JoinUse{}, nodes.Unauthenticated("join_token_revoked", "join token %s was revoked", l.id)
	}
	if now >= l.expires {
		return nodes.JoinUse{}, nodes.Unauthenticated("join_token_expired", "join token %s expired", l.id)
	}
	if l.usesLeft <= 0 {
		return nodes.JoinUse{}, nodes.Unauthenticated("join_token_used", "join token %s was already used", l.id)
	}
	from := peer.String()
	if !l.anyIP && l.ip != "" && l.ip != from {
		return nodes.JoinUse{}, nodes.Unauthenticated("join_token_address", "join token %s is bound to another address", l.id)
	}
	if !l.anyIP {
		// Bound (or about to be bound) to peer: it registers that address only.
		id, idErr := netip.ParseAddr(nodeID)
		switch {
		case host != peer:
			return nodes.JoinUse{}, joinHostRefusal(l.id, from, l.ip == "", "host_ip "+host.String())
		case idErr != nil || id.Unmap() != peer: // a hostname id would let one address join as many nodes
			return nodes.JoinUse{}, joinHostRefusal(l.id, from, l.ip == "", "node_id "+nodeID)
		}
	}
	l.usesLeft--
	u := nodes.JoinUse{TokenID: l.id, IP: from, PoolID: l.poolID, Hash: hash}
	if !l.anyIP && l.ip == "" {
		l.ip, u.Bound = from, true // provisional: ReleaseJoin undoes it
	}
	return u, nil
}

// joinHostRefusal refuses a join whose token is bound to bound (firstUse: it would be bound by
// this use) but whose registration names another address (what: "host_ip X" or "node_id X"):
// 403, audited as forbidden.
func joinHostRefusal(tokenID, bound string, firstUse bool, what string) *nodes.Refusal {
	how := "is bound to " + bound
	if firstUse {
		how = "binds itself to the address of its first use, " + bound
	}
	return nodes.Forbidden("join_token_host_ip", "join token %s %s, so it registers only that address, not %s: a node registers with its own address as node_id and host_ip (CUBE_SANDBOX_NODE_IP) and joins from it", tokenID, how, what)
}

// ReleaseJoin gives back a use taken by TakeJoin when the registration failed before it was
// committed (a refusal: 409, a label rule), and the binding that use made: a token is bound to
// an address only by a registration that succeeds. Registrations hold the registry's lock from
// TakeJoin to here, so no other use came in between.
func (s *Store) ReleaseJoin(u nodes.JoinUse) {
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	if l := s.ledger[u.Hash]; l != nil {
		l.usesLeft++
		if u.Bound && l.ip == u.IP {
			l.ip = ""
		}
	}
}

// useJoinToken spends one use of join token id by a caller at ip (binding an unbound,
// IP-bound token to ip). It reports false when the token has no use left for ip.
func useJoinToken(ctx context.Context, tx *sql.Tx, id, ip string) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE nodes_join_tokens SET uses_left = uses_left - 1,
		ip = CASE WHEN ip = '' AND any_ip = 0 THEN $2 ELSE ip END
		WHERE id = $1 AND uses_left > 0 AND (any_ip = 1 OR ip = '' OR ip = $2)`, id, ip)
	if err != nil {
		return false, fmt.Errorf("use join token %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("use join token %s: %w", id, err)
	}
	return n > 0, nil
}
