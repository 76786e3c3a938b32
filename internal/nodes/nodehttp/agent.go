package nodehttp

import (
	"errors"
	"net/http"
	"net/netip"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// agentCred parses and checks the credential of a node-agent call: a node credential or join
// token, or none from an allowed network. A refusal is audited and answered (ok false).
func (h *Handler) agentCred(w http.ResponseWriter, req *http.Request, method, nodeID string, peer netip.Addr) (credential, bool) {
	c, f := parseAuth(req.Header.Get("Authorization"))
	if f == nil && c.Kind == nodes.CredentialNone && !h.allowed(peer) {
		f = nodes.Unauthenticated("not_allowed", "node-agent calls need Authorization: Bearer <join token or node credential>; calls without credentials are accepted only from the networks in --node-agent-allow-unauthenticated")
	}
	if f == nil && method != "node-agent.register" && c.Kind != nodes.CredentialNode && c.Kind != nodes.CredentialNone {
		f = nodes.Unauthenticated("wrong_token_kind", "status reports and the work API authenticate with the node credential (cfn_...)")
	}
	if f != nil {
		h.refuse(req, method, nodeID, peer, principalOf(c, nodeID), f)
		writeRefusal(w, f)
		return credential{}, false
	}
	return c, true
}

// handleRegister is POST .../nodes/register (docs/nodes.md, "Node-agent API"): 200 with the
// NodeSnapshot, plus "node_credential" (shown once) when it joined with a join token
// (nodeapi.RegisterResponse).
func (h *Handler) handleRegister(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	peer := peerAddr(req)
	c, ok := h.agentCred(w, req, "node-agent.register", "", peer)
	if !ok {
		h.m.registers.WithLabelValues("refused").Inc()
		return
	}
	dc := h.dec.Get()
	defer h.dec.Put(dc)
	if err := readBody(req, dc, h.cfg.MaxBodyBytes); err != nil {
		h.m.registers.WithLabelValues("invalid").Inc()
		h.writeErr(ctx, w, err)
		return
	}
	var body nodeapi.RegisterRequest
	if err := dc.Register(&body); err != nil {
		h.m.registers.WithLabelValues("invalid").Inc()
		h.writeErr(ctx, w, err)
		return
	}
	got, err := h.reg.Register(ctx, &body, c.Credential, peer, make([]byte, 0, 2048))
	if err != nil {
		var f *nodes.Refusal
		if errors.As(err, &f) {
			h.m.registers.WithLabelValues("refused").Inc()
			h.refuse(req, "node-agent.register", body.NodeID, peer, principalOf(c, body.NodeID), f)
			writeRefusal(w, f)
			return
		}
		h.m.registers.WithLabelValues("invalid").Inc()
		h.writeErr(ctx, w, err)
		return
	}
	result := "ok"
	if got.Journaled {
		result = "ok_journaled"
	}
	h.m.registers.WithLabelValues(result).Inc()
	if u := got.Join; u != nil {
		h.audit(req, "node-agent.register", "", body.NodeID, nodes.Actor("join-token:"+u.TokenID),
			"joined pool "+u.PoolID+" with join token "+u.TokenID+"; from "+peer.String())
	}
	out := got.Answer
	if got.Credential != "" {
		out = append(out[:len(out)-1], `,"node_credential":`...)
		out = nodeapi.AppendString(out, got.Credential)
		out = append(out, '}')
	}
	writeRaw(w, http.StatusOK, out)
}

// handleStatus is POST .../nodes/{node_id}/status (docs/nodes.md, "Node-agent API"), the hot path:
// no database access, no global lock while encoding, a pooled decoder, request and buffers.
func (h *Handler) handleStatus(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	defer func() { h.m.reportTime.Observe(time.Since(start).Seconds()) }()
	ctx := req.Context()
	id := req.PathValue("node_id")
	peer := peerAddr(req)
	c, ok := h.agentCred(w, req, "node-agent.status", id, peer)
	if !ok {
		h.m.reportAuth.Inc()
		return
	}
	dc := h.dec.Get()
	defer h.dec.Put(dc)
	if err := readBody(req, dc, h.cfg.MaxBodyBytes); err != nil {
		if err == errTooLarge {
			h.m.reportLarge.Inc()
		} else {
			h.m.reportBad.Inc()
		}
		h.writeErr(ctx, w, err)
		return
	}
	sr := h.statusRequest()
	defer h.reports.Put(sr)
	if err := dc.Status(sr); err != nil {
		h.m.reportBad.Inc()
		h.writeErr(ctx, w, err)
		return
	}
	bp := h.buffer()
	defer h.bufs.Put(bp)
	out, err := h.reg.Report(ctx, id, sr, c.Credential, (*bp)[:0])
	if err != nil {
		var f *nodes.Refusal
		switch {
		case errors.As(err, &f):
			h.m.reportAuth.Inc()
			h.refuse(req, "node-agent.status", id, peer, principalOf(c, id), f)
			writeRefusal(w, f)
			return
		case cubefleet.IsCode(err, cubefleet.CodeNotFound):
			h.m.reportGone.Inc()
		case cubefleet.IsCode(err, cubefleet.CodeInvalidInput):
			h.m.reportBad.Inc()
		}
		h.writeErr(ctx, w, err)
		return
	}
	h.m.reportOK.Inc()
	*bp = out
	writeRaw(w, http.StatusOK, out)
}

// statusRequest returns a pooled, reset StatusRequest (its slices keep their room).
func (h *Handler) statusRequest() *nodeapi.StatusRequest {
	sr, _ := h.reports.Get().(*nodeapi.StatusRequest)
	if sr == nil {
		return &nodeapi.StatusRequest{}
	}
	sr.Reset()
	return sr
}

func (h *Handler) buffer() *[]byte {
	if bp, ok := h.bufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 4096)
	return &b
}

// audit records a successful change made through the routes, written at once.
func (h *Handler) audit(req *http.Request, method, permission, nodeID string, actor nodes.Actor, msg string) {
	h.cfg.Audit.Audit(audit.Entry{
		At: h.now(), TenantID: iam.RootTenant, PrincipalID: string(actor), Method: method, Permission: permission,
		Scope: iam.TenantScope(iam.RootTenant), Outcome: audit.OutcomeOK, Target: nodeID, RequestID: h.cfg.RequestID(req.Context()), Message: msg,
	}, true)
}
