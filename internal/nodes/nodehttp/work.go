package nodehttp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// The work API (nodeapi work.go; docs/sandboxes.md, "The work API"): the long poll
// `cubefleet agent` holds for its node's assignments and the sandbox events it sends back. Both
// take the node's own credential only (401 otherwise; 403 for a stock Cubelet's node, which is
// registry-only; 404 for a node that is not registered, called without one), need a nonce
// (nodeapi.NonceHeader; 400 otherwise), and every answer made once the node is known carries the
// control plane's proof over the nonce, the node id and the exact body (nodeapi.ProofHeader),
// keyed with the hash of the node's credential the registry keeps.

// Work is the control plane's side of the work API (sandboxes.Service).
type Work interface {
	// Work answers a work request of node: its queued assignments, held up to req.WaitMS while
	// there are none.
	Work(ctx context.Context, node string, req *nodeapi.WorkRequest) (*nodeapi.WorkResponse, error)
	// SandboxEvent takes in an event of sandbox id from node; NOT_FOUND when the control plane
	// runs no such sandbox there.
	SandboxEvent(ctx context.Context, node, id string, ev *nodeapi.SandboxEvent) error
	// SandboxOutput takes in a chunk of the output of running sandbox id from node; NOT_FOUND
	// when the control plane runs no such sandbox there.
	SandboxOutput(ctx context.Context, node, id string, out *nodeapi.SandboxOutput) error
}

// maxWorkBody bounds a work request's body (1 MiB: 10,000 ids of 128 bytes, twice, fit).
const maxWorkBody = 1 << 20

// DefaultMaxEventBytes bounds a sandbox event's body when Config.MaxEventBytes is 0: two
// streams of 1 MiB in base64, and room for the rest (3 MiB).
const DefaultMaxEventBytes = 3 << 20

// MaxEventBytesFor returns the body limit of sandbox events carrying at most resultMaxBytes of
// each output stream (and its cut marker): both streams in base64, and 64 KiB for the rest.
func MaxEventBytesFor(resultMaxBytes int64) int64 {
	stream := resultMaxBytes + int64(nodeapi.MaxTruncationMarkerLen)
	return 2*((stream+2)/3*4) + 64<<10
}

// workRoutes adds the work routes under nodeapi.AgentPrefix to mux.
func (h *Handler) workRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+nodeapi.AgentPrefix+nodeapi.RouteWork, h.handleWork)
	mux.HandleFunc("POST "+nodeapi.AgentPrefix+nodeapi.RouteSandboxEvent, h.handleSandboxEvent)
	mux.HandleFunc("POST "+nodeapi.AgentPrefix+nodeapi.RouteSandboxOutput, h.handleSandboxOutput)
}

// workCall authenticates a work-API call of the node its path names, reads its body (at most
// limit bytes) and decodes it with decode; ok is false when it answered the call itself. prove
// proves and writes an answer for the call.
func (h *Handler) workCall(w http.ResponseWriter, req *http.Request, method string, limit int64, decode func(*nodeapi.Decoder) error) (node string, prove func(int, []byte), ok bool) {
	ctx := req.Context()
	node = req.PathValue("node_id")
	peer := peerAddr(req)
	c, ok := h.agentCred(w, req, method, node, peer)
	if !ok {
		h.m.work.WithLabelValues("refused").Inc()
		return "", nil, false
	}
	hash, err := h.reg.AuthenticateWork(ctx, node, c.Credential)
	if err != nil {
		h.m.work.WithLabelValues("refused").Inc()
		var f *nodes.Refusal
		if errors.As(err, &f) {
			h.refuse(req, method, node, peer, principalOf(c, node), f)
			writeRefusal(w, f)
			return "", nil, false
		}
		h.writeErr(ctx, w, err)
		return "", nil, false
	}
	nonce := req.Header.Get(nodeapi.NonceHeader)
	if !nodeapi.ValidNonce(nonce) {
		h.m.work.WithLabelValues("invalid").Inc()
		writeError(w, http.StatusBadRequest, cubefleet.CodeInvalidInput, "work API calls carry a fresh "+nodeapi.NonceHeader+": 16 to 64 characters of base64url")
		return "", nil, false
	}
	key, err := hex.DecodeString(hash)
	if err != nil {
		h.writeErr(ctx, w, err)
		return "", nil, false
	}
	prove = func(status int, out []byte) {
		w.Header().Set(nodeapi.ProofHeader, nodeapi.Proof(key, nonce, node, out))
		writeRaw(w, status, out)
	}
	dc := h.dec.Get()
	defer h.dec.Put(dc)
	err = readBody(req, dc, limit)
	if err == nil {
		err = decode(dc)
	}
	if err != nil {
		h.m.work.WithLabelValues("invalid").Inc()
		h.proveErr(ctx, prove, err)
		return "", nil, false
	}
	return node, prove, true
}

// proveErr answers err as writeErr does, proven.
func (h *Handler) proveErr(ctx context.Context, prove func(int, []byte), err error) {
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code == cubefleet.CodeInternal {
		h.log.ErrorContext(ctx, "work route failed", "err", err)
		e = &cubefleet.Error{Code: cubefleet.CodeInternal, Message: "internal error; the server log has the cause"}
	}
	out, _ := json.Marshal(nodeapi.ErrorBody{Error: e.Message, Code: e.Code})
	prove(cubefleet.HTTPStatus(e.Code), out)
}

// handleWork is POST .../nodes/{node_id}/work: the long poll.
func (h *Handler) handleWork(w http.ResponseWriter, req *http.Request) {
	if h.cfg.Work == nil {
		writeError(w, http.StatusNotImplemented, cubefleet.CodeUnsupported, "this control plane runs no sandboxes")
		return
	}
	ctx := req.Context()
	var wr nodeapi.WorkRequest
	node, prove, ok := h.workCall(w, req, "node-agent.work", maxWorkBody, func(d *nodeapi.Decoder) error { return d.Work(&wr) })
	if !ok {
		return
	}
	resp, err := h.cfg.Work.Work(ctx, node, &wr)
	if err != nil {
		if ctx.Err() != nil {
			return // the agent went away
		}
		h.m.work.WithLabelValues("error").Inc()
		h.proveErr(ctx, prove, err)
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		h.proveErr(ctx, prove, err)
		return
	}
	h.m.work.WithLabelValues("ok").Inc()
	h.m.assignments.Add(float64(len(resp.Assignments)))
	prove(http.StatusOK, out)
}

// handleSandboxEvent is POST .../nodes/{node_id}/sandboxes/{sandbox_id}/events.
func (h *Handler) handleSandboxEvent(w http.ResponseWriter, req *http.Request) {
	if h.cfg.Work == nil {
		writeError(w, http.StatusNotImplemented, cubefleet.CodeUnsupported, "this control plane runs no sandboxes")
		return
	}
	ctx := req.Context()
	limit := h.cfg.MaxEventBytes
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	id := req.PathValue("sandbox_id")
	var ev nodeapi.SandboxEvent
	node, prove, ok := h.workCall(w, req, "node-agent.sandbox-event", limit, func(d *nodeapi.Decoder) error {
		if err := checkSandboxID(id); err != nil {
			return err
		}
		return d.SandboxEvent(&ev)
	})
	if !ok {
		h.m.events.WithLabelValues("refused_or_invalid").Inc()
		return
	}
	if err := h.cfg.Work.SandboxEvent(ctx, node, id, &ev); err != nil {
		h.m.events.WithLabelValues(string(cubefleet.ErrorCode(err))).Inc()
		h.proveErr(ctx, prove, err)
		return
	}
	h.m.events.WithLabelValues("ok").Inc()
	prove(http.StatusOK, []byte("{}"))
}

// maxOutputBody bounds a sandbox output chunk's body: two chunks of nodeapi.MaxOutputChunk in
// base64, and 4 KiB for the rest.
const maxOutputBody = 2*(nodeapi.MaxOutputChunk+2)/3*4 + 4<<10

// handleSandboxOutput is POST .../nodes/{node_id}/sandboxes/{sandbox_id}/output.
func (h *Handler) handleSandboxOutput(w http.ResponseWriter, req *http.Request) {
	if h.cfg.Work == nil {
		writeError(w, http.StatusNotImplemented, cubefleet.CodeUnsupported, "this control plane runs no sandboxes")
		return
	}
	ctx := req.Context()
	id := req.PathValue("sandbox_id")
	var out nodeapi.SandboxOutput
	node, prove, ok := h.workCall(w, req, "node-agent.sandbox-output", maxOutputBody, func(d *nodeapi.Decoder) error {
		if err := checkSandboxID(id); err != nil {
			return err
		}
		return d.SandboxOutput(&out)
	})
	if !ok {
		return
	}
	if err := h.cfg.Work.SandboxOutput(ctx, node, id, &out); err != nil {
		h.proveErr(ctx, prove, err)
		return
	}
	prove(http.StatusOK, []byte("{}"))
}

// checkSandboxID checks the sandbox id of a work route's path: INVALID_INPUT naming sandbox_id.
func checkSandboxID(id string) error {
	if !nodeapi.ValidSandboxID(id) {
		return cubefleet.Invalid("sandbox_id", "sandbox_id in the path is not a sandbox id")
	}
	return nil
}
