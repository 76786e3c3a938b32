package nodehttp

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

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
func (h *Handler) allowed(peer netip.Addr) bool {
	if !peer.IsValid() {
		return false
	}
	for _, p := range h.cfg.AllowUnauthenticated {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// credential is a request's parsed Authorization header: what the registry sees, and the API
// key itself (handed to iam; the registry never sees a token).
type credential struct {
	nodes.Credential
	apiKey string
}

// parseAuth parses an Authorization header; a malformed or unknown kind of token is a refusal.
func parseAuth(hd string) (credential, *nodes.Refusal) {
	if hd == "" {
		return credential{}, nil
	}
	scheme, tok, ok := strings.Cut(hd, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return credential{}, nodes.Unauthenticated("bad_credentials", "the Authorization header must be Bearer <node credential or join token>")
	}
	switch {
	case strings.HasPrefix(tok, nodeapi.CredentialPrefix):
		return credential{Credential: nodes.Credential{Kind: nodes.CredentialNode, Hash: nodes.HashToken(tok)}}, nil
	case strings.HasPrefix(tok, nodeapi.JoinTokenPrefix):
		return credential{Credential: nodes.Credential{Kind: nodes.CredentialJoin, Hash: nodes.HashToken(tok)}}, nil
	case strings.HasPrefix(tok, iam.TokenPrefix):
		return credential{Credential: nodes.Credential{Kind: nodes.CredentialAPIKey}, apiKey: tok}, nil
	}
	return credential{}, nodes.Unauthenticated("bad_credentials", "unknown kind of token: want a node credential (cfn_), a join token (cfj_) or an API key (cfk_)")
}

// principalOf names the caller in the audit row of a refusal.
func principalOf(c credential, nodeID string) string {
	switch c.Kind {
	case nodes.CredentialNode:
		return string(nodes.NodeActor(nodeID))
	case nodes.CredentialJoin:
		return "join-token"
	case nodes.CredentialAPIKey:
		return "api-key"
	}
	return "anonymous"
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
// only count until the window ends. The audit row is written at the next flush.
func (h *Handler) refuse(req *http.Request, method, nodeID string, peer netip.Addr, principal string, f *nodes.Refusal) {
	ctx := req.Context()
	h.m.refusals.WithLabelValues(f.Reason).Inc()
	now := h.now()
	key := method + "\x00" + nodeID + "\x00" + peer.String() + "\x00" + f.Reason
	h.refused.mu.Lock()
	if h.refused.seen == nil || len(h.refused.seen) >= maxRefusalKeys {
		h.refused.seen = map[string]*refusalSeen{}
	}
	s := h.refused.seen[key]
	if s != nil && now-s.first < refusalWindow.Milliseconds() && now >= s.first {
		s.suppressed++
		h.refused.mu.Unlock()
		return
	}
	suppressed := 0
	if s != nil {
		suppressed = s.suppressed
	}
	h.refused.seen[key] = &refusalSeen{first: now}
	h.refused.mu.Unlock()
	if principal == "" {
		principal = "anonymous"
	}
	msg := f.Message + "; from " + peer.String()
	if suppressed > 0 {
		msg += fmt.Sprintf(" (%d identical refusals in the previous minute were not audited one by one)", suppressed)
	}
	h.log.WarnContext(ctx, "node call refused", "method", method, "node", nodeID, "peer", peer.String(), "reason", f.Reason, "status", statusOf(f))
	h.cfg.Audit.Audit(audit.Entry{
		At: now, TenantID: iam.RootTenant, PrincipalID: principal, Method: method, Scope: iam.TenantScope(iam.RootTenant),
		Outcome: f.Outcome(), Target: nodeID, RequestID: h.cfg.RequestID(ctx), Message: msg,
	}, false)
}
