package nodes

import (
	"context"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
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

// JoinTokenInput is what a join token is made of: Pool is a pool id or a fleet name held by
// one pool; Uses how many registrations it allows (0: 1; the API and the CLI refuse an explicit
// 0); TTL its lifetime (0: DefaultJoinTokenTTL, at most MaxJoinTokenTTL); IP the one address it
// is accepted from and registers (nodeapi.ParseJoinTokenIP). Without IP the token binds itself to the
// address of its first successful registration, unless AnyIP.
type JoinTokenInput struct {
	Pool  string
	Uses  int
	TTL   time.Duration
	IP    string
	AnyIP bool
}

// JoinToken is a join token as the API shows it: never the token itself (shown once, at
// creation) nor its hash. Prefix is the token's first characters, to recognise it; Pool the
// pool's fleet name; Uses the registrations it allowed and UsesLeft those left; IP the address
// it is bound to ("" until its first successful registration binds it, or with AnyIP); State
// one of JoinTokenStates. Times are Unix milliseconds; RevokedAt and RevokedBy (a principal id)
// are set once it is revoked.
type JoinToken struct {
	ID        string         `json:"id"`
	Prefix    string         `json:"prefix"`
	PoolID    string         `json:"poolId"`
	Pool      string         `json:"pool,omitempty"`
	Uses      int            `json:"uses"`
	UsesLeft  int            `json:"usesLeft"`
	IP        string         `json:"ip,omitempty"`
	AnyIP     bool           `json:"anyIp,omitempty"`
	State     JoinTokenState `json:"state"`
	ExpiresAt int64          `json:"expiresAt"`
	CreatedAt int64          `json:"createdAt"`
	CreatedBy string         `json:"createdBy"`
	RevokedAt int64          `json:"revokedAt,omitempty"`
	RevokedBy string         `json:"revokedBy,omitempty"`
}

// NewJoinToken makes a join token of in, created by createdBy (a principal id), and its
// secret (shown once; store only its HashToken): it resolves the pool (ResolvePool) and applies
// the rules of JoinTokenInput. The caller stores it (nodestore.Store.CreateJoinToken). Errors:
// INVALID_INPUT naming the field (pool missing, unknown, archived or ambiguous; uses, ttl out of
// range; ip not an address a node can have, see nodeapi.ParseJoinTokenIP).
func (r *Registry) NewJoinToken(ctx context.Context, in JoinTokenInput, createdBy string) (JoinToken, string, error) {
	if in.Pool == "" {
		return JoinToken{}, "", cubefleet.Invalid("pool", "pool is required: the pool id or fleet name the node joins")
	}
	pool, err := r.ResolvePool(ctx, in.Pool)
	if err != nil {
		return JoinToken{}, "", err
	}
	if in.Uses == 0 {
		in.Uses = 1
	}
	if in.Uses < 1 || in.Uses > MaxJoinTokenUses {
		return JoinToken{}, "", cubefleet.Invalid("uses", "uses is 1 to %d", MaxJoinTokenUses)
	}
	if in.TTL == 0 {
		in.TTL = DefaultJoinTokenTTL
	}
	if in.TTL < time.Second || in.TTL > MaxJoinTokenTTL {
		return JoinToken{}, "", cubefleet.Invalid("ttlSeconds", "a join token lives 1 second to %s", MaxJoinTokenTTL)
	}
	ip := ""
	if in.IP != "" {
		if in.AnyIP {
			return JoinToken{}, "", cubefleet.Invalid("ip", "give ip or anyIp, not both")
		}
		a, err := nodeapi.ParseJoinTokenIP(in.IP)
		if err != nil {
			return JoinToken{}, "", cubefleet.Invalid("ip", "ip %s", err)
		}
		ip = a.String()
	}
	secret, err := newSecret(nodeapi.JoinTokenPrefix)
	if err != nil {
		return JoinToken{}, "", err
	}
	now := r.now()
	return JoinToken{
		ID: cubefleet.NewID("jtk"), Prefix: secret[:len(nodeapi.JoinTokenPrefix)+6], PoolID: pool.ID, Pool: pool.Name, Uses: in.Uses,
		UsesLeft: in.Uses, IP: ip, AnyIP: in.AnyIP, State: JoinTokenUsable, ExpiresAt: now + in.TTL.Milliseconds(), CreatedAt: now,
		CreatedBy: createdBy,
	}, secret, nil
}
