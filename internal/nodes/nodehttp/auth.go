package nodehttp

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
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

// refusalWindow is how long the refusals of one peer for one reason are summarized into one
// audit row, so a storm (a deleted node reporting every second, a client without credentials
// naming another node on every call) costs one row a minute instead of one per call.
const refusalWindow = time.Minute

// maxRefusalKeys bounds the peers and reasons summarized one by one; past it, the refusals of
// further peers share one summary (audit.Summary).
const maxRefusalKeys = 10000

// refusalFlushEvery is how often Run writes the summaries of the windows that ended.
const refusalFlushEvery = 10 * time.Second

// refusalPeer is the peer address refusals are summarized by: the address itself for IPv4,
// its /64 for IPv6 (one host holds a /64, and would otherwise count as 2^64 peers).
func refusalPeer(peer netip.Addr) string {
	if peer.Is6() {
		p, _ := peer.Prefix(64)
		return p.String()
	}
	return peer.String()
}

// refuse counts and audits a refused call. Refusals are summarized per peer and reason
// (audit.Summary): the first of a quiet peer is audited (and logged) at once, the others count
// until the window ends and are then one row with their count, the last call's method and
// node, written at the next flush.
func (h *Handler) refuse(req *http.Request, method, nodeID string, peer netip.Addr, principal string, f *nodes.Refusal) {
	ctx := req.Context()
	h.m.refusals.WithLabelValues(f.Reason).Inc()
	if principal == "" {
		principal = "anonymous"
	}
	e := audit.Entry{
		At: h.now(), TenantID: iam.RootTenant, PrincipalID: principal, Method: method, Scope: iam.TenantScope(iam.RootTenant),
		Outcome: f.Outcome(), Target: nodeID, RequestID: h.cfg.RequestID(ctx), Message: f.Message + "; from " + peer.String(),
	}
	row, ok := h.refused.Note(refusalPeer(peer)+" "+f.Reason, e)
	if !ok {
		return
	}
	h.log.WarnContext(ctx, "node call refused", "method", method, "node", nodeID, "peer", peer.String(), "reason", f.Reason, "status", statusOf(f), "calls", row.Count)
	h.cfg.Audit.Audit(row, false)
}

// FlushRefusals queues the audit rows of the refusal summaries whose window ended (written at
// the store's next flush). Run calls it every 10 seconds.
func (h *Handler) FlushRefusals() {
	for _, row := range h.refused.Flush() {
		h.cfg.Audit.Audit(row, false)
	}
}

// drainRefusals queues the audit rows of every refusal summary, its window ended or not: Run
// calls it as it returns, so the refusals counted before a stop are written.
func (h *Handler) drainRefusals() {
	for _, row := range h.refused.Drain() {
		h.cfg.Audit.Audit(row, false)
	}
}
