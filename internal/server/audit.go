package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// The audit trail the transport keeps itself: the traces of refused API keys.

// Refused API keys leave a trace. Every refused authentication is counted in
// cubefleet_api_auth_failures_total by reason; a key the server knows but refuses (revoked or
// expired) is also audited in its tenant, naming the key, its principal and the call, and
// summarized like the node routes' refusals (audit.Summary: one row at once, then one a minute
// with the count); the call's log line names the key id. An unknown key names no tenant to
// audit in, and is only counted. No token is ever logged or audited.

// Reasons of cubefleet_api_auth_failures_total.
const (
	authNoCredentials = "no_credentials" // no Authorization header
	authBadHeader     = "bad_header"     // not Bearer <key>
	authMalformedKey  = "malformed_key"  // not an API key (cfk_...)
	authUnknownKey    = "unknown_key"
)

// keyTraceFlushEvery is how often Serve writes the summaries of refused keys whose window
// ended.
const keyTraceFlushEvery = 10 * time.Second

// authenticateKey returns the principal of API key token, used for method from peer (either
// may be ""), counting and tracing a refusal.
func (s *Server) authenticateKey(ctx context.Context, token, method, peer string) (*iam.Principal, error) {
	p, err := iam.Authenticate(ctx, s.db, token, s.cfg.Now())
	if err == nil || !cubefleet.IsCode(err, cubefleet.CodeUnauthenticated) {
		return p, err
	}
	var refused *iam.KeyRefused
	switch {
	case errors.As(err, &refused):
		s.metrics.authFailures.WithLabelValues(refused.Reason + "_key").Inc()
		s.traceKey(ctx, refused, method, peer)
	case errors.Is(err, iam.ErrUnknownKey):
		s.metrics.authFailures.WithLabelValues(authUnknownKey).Inc()
	default:
		s.metrics.authFailures.WithLabelValues(authMalformedKey).Inc()
	}
	return nil, err
}

// authenticateNamed is authenticateKey without a peer: the key check the control plane's
// console and node routes use (controlplane.Config.Authenticate).
func (s *Server) authenticateNamed(ctx context.Context, token, method string) (*iam.Principal, error) {
	return s.authenticateKey(ctx, token, method, "")
}

// traceKey audits a refused key (summarized per key and reason).
func (s *Server) traceKey(ctx context.Context, k *iam.KeyRefused, method, peer string) {
	msg := "API key " + k.KeyID + " was " + k.Reason + " and is still used"
	if peer != "" {
		msg += "; from " + peer
	}
	e := audit.Entry{
		At: s.cfg.Now().UnixMilli(), TenantID: k.TenantID, PrincipalID: k.PrincipalID, Method: method,
		Outcome: "unauthenticated", Target: k.KeyID, RequestID: RequestID(ctx), Message: msg,
	}
	if row, ok := s.keyTraces.Note(k.KeyID+" "+k.Reason, e); ok {
		s.writeTrace(ctx, row)
	}
}

// flushKeyTraces writes the summaries of refused keys whose window ended.
func (s *Server) flushKeyTraces(ctx context.Context) {
	for _, row := range s.keyTraces.Flush() {
		s.writeTrace(ctx, row)
	}
}

func (s *Server) writeTrace(ctx context.Context, row audit.Entry) {
	if err := audit.Record(context.WithoutCancel(ctx), s.db, row); err != nil {
		s.log.ErrorContext(ctx, "audit a refused API key", "key_id", row.Target, "err", err)
	}
}

// keyTraceLoop flushes the refused keys' summaries every keyTraceFlushEvery until ctx ends,
// and then writes those still open.
func (s *Server) keyTraceLoop(ctx context.Context) {
	t := time.NewTicker(keyTraceFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, row := range s.keyTraces.Drain() {
				s.writeTrace(ctx, row)
			}
			return
		case <-t.C:
			s.flushKeyTraces(ctx)
		}
	}
}

// peerOf returns the address of the request's TCP peer.
func peerOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// keyIDOf returns the id of the key p authenticated with, or of the key err refused, or "".
func keyIDOf(p *iam.Principal, err error) string {
	var refused *iam.KeyRefused
	switch {
	case p != nil:
		return p.KeyID
	case errors.As(err, &refused):
		return refused.KeyID
	}
	return ""
}

// bearer returns the token of an Authorization header "Bearer <token>", or the reason of
// cubefleet_api_auth_failures_total it fails for.
func bearer(h string) (token, failure string) {
	if h == "" {
		return "", authNoCredentials
	}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", authBadHeader
	}
	return token, ""
}
