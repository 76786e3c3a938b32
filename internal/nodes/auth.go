package nodes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Token prefixes (the wire contract with `cubefleet agent`, docs/nodes.md). Secret scanners can
// find leaked tokens by them; the registry stores only their SHA-256.
const (
	// JoinTokenPrefix starts a join token: single-use by default, short-lived, bound to an
	// address; it registers a new node once.
	JoinTokenPrefix = "cfj_"
	// CredentialPrefix starts a node credential: issued once, in the answer to a registration
	// with a join token (field "node_credential"); the node's agent sends it on every call.
	CredentialPrefix = "cfn_"
	apiKeyPrefix     = "cfk_"
)

func newSecret(prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

func hashSecret(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func sameHash(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// ParseCIDRs parses --node-agent-allow-unauthenticated: comma-separated CIDRs (a bare address is
// a /32 or /128). "" is none.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR (like 10.0.0.0/24) or an address", part)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR like 10.0.0.0/24", part)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("%q is not aligned to its network: did you mean %s?", part, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// MinAllowPrefixBits is the shortest prefix --node-agent-allow-unauthenticated takes without
// a warning: a network wider than a /8 (0.0.0.0/0, ::/0, 0.0.0.0/1, ...) lets most of the
// internet in.
const MinAllowPrefixBits = 8

// BroadPrefixes returns the networks of ps shorter than MinAllowPrefixBits.
func BroadPrefixes(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.Bits() < MinAllowPrefixBits {
			out = append(out, p)
		}
	}
	return out
}

// FormatCIDRs renders networks as --node-agent-allow-unauthenticated takes them
// (comma-separated), "none" when there are none.
func FormatCIDRs(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// AllowWarning is the warning logged at start when --node-agent-allow-unauthenticated holds a
// network wider than a /8: what a caller there can do without credentials.
const AllowWarning = "--node-agent-allow-unauthenticated allows calls without credentials from very wide networks: anyone there can register nodes, report for nodes that registered without credentials, and list, cordon, uncordon, label and delete any node; list only the narrowest networks that hold stock Cubelets"

// peerAddr returns the address of the TCP peer of req (never a header: the node-agent routes
// are not meant to sit behind a proxy).
func peerAddr(req *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(req.RemoteAddr)
	if err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// allowed reports whether an unauthenticated call from peer is accepted.
func (r *Registry) allowed(peer netip.Addr) bool {
	if !peer.IsValid() {
		return false
	}
	for _, p := range r.cfg.AllowUnauthenticated {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// credKind is what a request's Authorization header carries.
type credKind int

const (
	credNone credKind = iota // no Authorization header
	credNode                 // a node credential (cfn_)
	credJoin                 // a join token (cfj_)
	credKey                  // an API key (cfk_)
)

// creds is a request's parsed Authorization header. hash is the SHA-256 of a node credential
// or join token; token is kept only for API keys (handed to iam).
type creds struct {
	kind  credKind
	hash  string
	token string
}

// parseAuth parses an Authorization header; a malformed or unknown kind of token is a refusal.
func parseAuth(h string) (creds, *refusal) {
	if h == "" {
		return creds{}, nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return creds{}, &refusal{code: "bad_credentials", msg: "the Authorization header must be Bearer <node credential or join token>"}
	}
	switch {
	case strings.HasPrefix(tok, CredentialPrefix):
		return creds{kind: credNode, hash: hashSecret(tok)}, nil
	case strings.HasPrefix(tok, JoinTokenPrefix):
		return creds{kind: credJoin, hash: hashSecret(tok)}, nil
	case strings.HasPrefix(tok, apiKeyPrefix):
		return creds{kind: credKey, token: tok}, nil
	}
	return creds{}, &refusal{code: "bad_credentials", msg: "unknown kind of token: want a node credential (cfn_), a join token (cfj_) or an API key (cfk_)"}
}

// refusal is why a call was refused: a short code (the metric's reason label) and a message
// for the caller and the audit row. It never holds a secret.
type refusal struct {
	code    string
	msg     string
	status  int    // HTTP status; 0 means 401
	outcome string // audit outcome; "" means "unauthenticated"
}

func (f *refusal) Error() string { return f.msg }

// httpStatus is the refusal's HTTP status.
func (f *refusal) httpStatus() int {
	if f.status != 0 {
		return f.status
	}
	return http.StatusUnauthorized
}

func unauthenticated(code, format string, args ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// refusalWindow is how long identical refusals (same method, node, peer and reason) are
// summarized into one audit row, so a storm (a deleted node reporting every second) costs one
// row a minute instead of one per call.
const refusalWindow = time.Minute

// maxRefusalKeys bounds the summary map; when full it starts over.
const maxRefusalKeys = 10000

type refusalLog struct {
	mu   sync.Mutex
	seen map[string]*refusalSeen
}

type refusalSeen struct {
	first      int64 // Unix ms of the audited refusal that opened the window
	suppressed int
}

// refuse counts and audits a refused call: the first of a kind in a window is audited at
// once (with how many identical refusals the previous window summarized) and logged; repeats
// only count until the window ends. The audit row is written by the flusher.
func (r *Registry) refuse(ctx context.Context, method, nodeID string, peer netip.Addr, principal string, f *refusal) {
	r.m.refusals.WithLabelValues(f.code).Inc()
	now := r.now()
	key := method + "\x00" + nodeID + "\x00" + peer.String() + "\x00" + f.code
	r.refused.mu.Lock()
	if r.refused.seen == nil || len(r.refused.seen) >= maxRefusalKeys {
		r.refused.seen = map[string]*refusalSeen{}
	}
	s := r.refused.seen[key]
	if s != nil && now-s.first < refusalWindow.Milliseconds() && now >= s.first {
		s.suppressed++
		r.refused.mu.Unlock()
		return
	}
	suppressed := 0
	if s != nil {
		suppressed = s.suppressed
	}
	r.refused.seen[key] = &refusalSeen{first: now}
	r.refused.mu.Unlock()
	if principal == "" {
		principal = "anonymous"
	}
	outcome := f.outcome
	if outcome == "" {
		outcome = "unauthenticated"
	}
	msg := f.msg + "; from " + peer.String()
	if suppressed > 0 {
		msg += fmt.Sprintf(" (%d identical refusals in the previous minute were not audited one by one)", suppressed)
	}
	r.log.WarnContext(ctx, "node call refused", "method", method, "node", nodeID, "peer", peer.String(), "reason", f.code, "status", f.httpStatus())
	r.w.addAudit(audit.Entry{
		At: now, TenantID: iam.RootTenant, PrincipalID: principal, Method: method, Scope: iam.TenantScope(iam.RootTenant),
		Outcome: outcome, Target: nodeID, RequestID: r.cfg.RequestID(ctx), Message: msg,
	})
}

// JoinTokenInput is what a join token is made of: Pool is a pool id or a fleet name held by
// one pool; Uses how many registrations it allows (0: 1; the API and the CLI refuse an explicit
// 0); TTL its lifetime (0: DefaultJoinTokenTTL, at most MaxJoinTokenTTL); IP the one address it
// is accepted from and registers (ParseJoinTokenIP). Without IP the token binds itself to the
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

// ParseJoinTokenIP parses the address a join token is bound to (--ip): an IP address a node
// can have, so not the unspecified address (0.0.0.0, ::), a multicast address, the IPv4
// broadcast address or an address with a zone; an IPv4-mapped IPv6 address is unmapped. The
// error reads after the flag or field name: `"224.0.0.1" is a multicast address, not a node's`.
func ParseJoinTokenIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if p := addrProblem(a); p != "" {
		return netip.Addr{}, fmt.Errorf("%q is %s, not a node's", s, p)
	}
	return a.Unmap(), nil
}

// CreateJoinToken makes a join token through q (the caller's transaction) and returns it and
// its secret (shown once; only its SHA-256 is stored). Errors: INVALID_INPUT naming the field
// (pool unknown, archived or ambiguous; uses, ttl out of range; ip not an address a node can
// have, see ParseJoinTokenIP).
func (r *Registry) CreateJoinToken(ctx context.Context, q store.Querier, in JoinTokenInput, createdBy string) (JoinToken, string, error) {
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
		a, err := ParseJoinTokenIP(in.IP)
		if err != nil {
			return JoinToken{}, "", cubefleet.Invalid("ip", "ip %s", err)
		}
		ip = a.String()
	}
	secret, err := newSecret(JoinTokenPrefix)
	if err != nil {
		return JoinToken{}, "", err
	}
	now := r.now()
	t := JoinToken{
		ID: cubefleet.NewID("jtk"), Prefix: secret[:len(JoinTokenPrefix)+6], PoolID: pool.ID, Pool: pool.Name, Uses: in.Uses,
		UsesLeft: in.Uses, IP: ip, AnyIP: in.AnyIP, State: JoinTokenUsable, ExpiresAt: now + in.TTL.Milliseconds(), CreatedAt: now,
		CreatedBy: createdBy,
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO nodes_join_tokens (id, hash, prefix, pool_id, ip, any_ip, uses, uses_left, expires_at, created_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		t.ID, hashSecret(secret), t.Prefix, t.PoolID, t.IP, boolInt(t.AnyIP), t.Uses, t.Uses, t.ExpiresAt, t.CreatedAt, t.CreatedBy); err != nil {
		return JoinToken{}, "", fmt.Errorf("create join token: %w", err)
	}
	return t, secret, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
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

// joinUse is one use of a join token, queued for the flusher.
type joinUse struct {
	tokenID string
	ip      string // the address the use came from (binds an unbound token)
	poolID  string
	hash    string
	bound   bool // this use bound the token to ip in the ledger (undone if it is released)
}

// maxLedger bounds the join tokens kept in memory; expired ones are dropped first.
const maxLedger = 10000

// takeJoin checks a join token (by hash) for a registration from peer of node nodeID at
// address host (its host_ip) and takes one use of it. Its state is read from the database on
// every use (a token another replica revoked, used or bound is seen at once); the uses this
// process took but has not written yet are kept in the ledger. A refusal is 401 when the token
// is unknown, revoked, expired, used up, or bound to another address than peer, and 403 when
// the token is bound to an address (by --ip or its first use, which is peer's) and the
// registration names another one in host or node_id: a bound token registers exactly the node
// whose node_id and host_ip are that address, so `--uses N` lets that node join again after a
// deletion but never adds a second node at the address. A token accepted from any address
// (--any-ip) registers any node.
func (r *Registry) takeJoin(ctx context.Context, hash string, peer, host netip.Addr, nodeID string) (joinUse, *refusal, error) {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	now := r.now()
	l := r.ledger[hash]
	if l != nil {
		// The ledger keeps the uses this process took; the database says whether the token
		// was revoked meanwhile (on any replica), and what the others took and bound.
		var revokedAt int64
		var usesLeft int
		var ip string
		err := r.db.QueryRowContext(ctx, `SELECT revoked_at, uses_left, ip FROM nodes_join_tokens WHERE id = $1`, l.id).Scan(&revokedAt, &usesLeft, &ip)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			delete(r.ledger, hash)
			return joinUse{}, unauthenticated("join_token_unknown", "unknown join token"), nil
		case err != nil:
			return joinUse{}, nil, fmt.Errorf("join token: %w", err)
		}
		l.revokedAt, l.usesLeft = revokedAt, min(l.usesLeft, usesLeft)
		if l.ip == "" {
			l.ip = ip
		}
	}
	if l == nil {
		l = &tokenLedger{}
		var anyIP int
		err := r.db.QueryRowContext(ctx, `SELECT id, pool_id, ip, any_ip, uses_left, expires_at, revoked_at FROM nodes_join_tokens WHERE hash = $1`, hash).
			Scan(&l.id, &l.poolID, &l.ip, &anyIP, &l.usesLeft, &l.expires, &l.revokedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return joinUse{}, unauthenticated("join_token_unknown", "unknown join token"), nil
		}
		if err != nil {
			return joinUse{}, nil, fmt.Errorf("join token: %w", err)
		}
		l.anyIP = anyIP == 1
		if len(r.ledger) >= maxLedger {
			for h, e := range r.ledger {
				if e.expires <= now {
					delete(r.ledger, h)
				}
			}
			if len(r.ledger) >= maxLedger {
				clear(r.ledger)
			}
		}
		r.ledger[hash] = l
	}
	if l.revokedAt != 0 {
		return joinUse{}, unauthenticated("join_token_revoked", "join token %s was revoked", l.id), nil
	}
	if now >= l.expires {
		return joinUse{}, unauthenticated("join_token_expired", "join token %s expired", l.id), nil
	}
	if l.usesLeft <= 0 {
		return joinUse{}, unauthenticated("join_token_used", "join token %s was already used", l.id), nil
	}
	from := peer.String()
	if !l.anyIP && l.ip != "" && l.ip != from {
		return joinUse{}, unauthenticated("join_token_address", "join token %s is bound to another address", l.id), nil
	}
	if !l.anyIP {
		// Bound (or about to be bound) to peer: it registers that address only.
		id, idErr := netip.ParseAddr(nodeID)
		switch {
		case host != peer:
			return joinUse{}, joinHostRefusal(l.id, from, l.ip == "", "host_ip "+host.String()), nil
		case idErr != nil || id.Unmap() != peer: // a hostname id would let one address join as many nodes
			return joinUse{}, joinHostRefusal(l.id, from, l.ip == "", "node_id "+nodeID), nil
		}
	}
	l.usesLeft--
	u := joinUse{tokenID: l.id, ip: from, poolID: l.poolID, hash: hash}
	if !l.anyIP && l.ip == "" {
		l.ip, u.bound = from, true // provisional: releaseJoin undoes it
	}
	return u, nil, nil
}

// joinHostRefusal refuses a join whose token is bound to bound (firstUse: it would be bound by
// this use) but whose registration names another address (what: "host_ip X" or "node_id X"):
// 403, audited as forbidden.
func joinHostRefusal(tokenID, bound string, firstUse bool, what string) *refusal {
	how := "is bound to " + bound
	if firstUse {
		how = "binds itself to the address of its first use, " + bound
	}
	return &refusal{code: "join_token_host_ip", status: http.StatusForbidden, outcome: audit.OutcomeForbidden,
		msg: fmt.Sprintf("join token %s %s, so it registers only that address, not %s: a node registers with its own address as node_id and host_ip (CUBE_SANDBOX_NODE_IP) and joins from it", tokenID, how, what)}
}

// releaseJoin gives back a use taken by takeJoin when the registration failed before it was
// queued (a refusal: 409, a label rule), and the binding that use made: a token is bound to an
// address only by a registration that succeeds. Registrations hold r.regMu from takeJoin to
// here, so no other use came in between.
func (r *Registry) releaseJoin(u joinUse) {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	if l := r.ledger[u.hash]; l != nil {
		l.usesLeft++
		if u.bound && l.ip == u.ip {
			l.ip = ""
		}
	}
}
