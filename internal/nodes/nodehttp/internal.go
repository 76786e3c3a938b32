package nodehttp

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// internalAuth decides a call on the internal nodes routes (docs/nodes.md, "Internal nodes API"
// with cubefleet's auth): an API key holding permission on tenant/root; a node credential for its
// own node (reading and isolating it, not deleting it); or no credentials from an allowed network.
// A refusal is audited and answered (ok false).
func (h *Handler) internalAuth(w http.ResponseWriter, req *http.Request, method, permission, nodeID string) (nodes.Actor, bool) {
	return h.authorize(w, req, method, permission, nodeID, writeError)
}

// authorize is internalAuth answering a refusal in answer's shape (writeRet on CubeMaster's
// routes).
func (h *Handler) authorize(w http.ResponseWriter, req *http.Request, method, permission, nodeID string, answer answerFunc) (nodes.Actor, bool) {
	ctx := req.Context()
	peer := peerAddr(req)
	c, f := parseAuth(req.Header.Get("Authorization"))
	var actor nodes.Actor
	if f == nil {
		switch c.Kind {
		case nodes.CredentialNone:
			if h.allowed(peer) {
				actor = nodes.Actor("anonymous@" + peer.String())
			} else {
				f = nodes.Unauthenticated("not_allowed", "the internal nodes API needs Authorization: Bearer <API key> (or a node credential for its own node); calls without credentials are accepted only from the networks in --node-agent-allow-unauthenticated")
			}
		case nodes.CredentialAPIKey:
			if h.cfg.Authenticate == nil {
				f = nodes.Unauthenticated("api_key", "API keys are not accepted here")
				break
			}
			p, err := h.cfg.Authenticate(ctx, c.apiKey)
			if err != nil {
				if cubefleet.ErrorCode(err) != cubefleet.CodeUnauthenticated {
					h.writeErrAs(ctx, w, err, answer)
					return "", false
				}
				f = nodes.Unauthenticated("bad_credentials", "%s", errMessage(err))
				break
			}
			if err := iam.Decide(p, permission, iam.TenantScope(iam.RootTenant)); err != nil {
				f = nodes.Forbidden("forbidden", "%s", errMessage(err))
				h.refuse(req, method, nodeID, peer, p.ID, f)
				writeRefusalAs(w, f, answer)
				return "", false
			}
			actor = nodes.Actor(p.ID)
		case nodes.CredentialNode:
			err := h.reg.CheckCredential(nodeID, c.Hash)
			switch {
			case err != nil:
				if !errors.As(err, &f) {
					h.writeErrAs(ctx, w, err, answer)
					return "", false
				}
			case permission == "nodes:delete":
				f = nodes.Forbidden("forbidden", "a node credential cannot delete its node: use an API key holding nodes:delete")
			default:
				actor = nodes.NodeActor(nodeID)
			}
		case nodes.CredentialJoin:
			f = nodes.Unauthenticated("wrong_token_kind", "join tokens only register nodes")
		}
	}
	if f != nil {
		h.refuse(req, method, nodeID, peer, principalOf(c, nodeID), f)
		writeRefusalAs(w, f, answer)
		return "", false
	}
	return actor, true
}

// errMessage is the message an error shows a caller.
func errMessage(err error) string {
	var e *cubefleet.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// handleList is GET /internal/v1/nodes (docs/nodes.md, "Internal nodes API"): a compact JSON array
// of SchedulerNode sorted by node id; ?ids=a,b selects (unknown ids skipped), ?score_only=true
// reduces each entry. The full list is answered from the listing cache (listCache) when it is
// current.
func (h *Handler) handleList(w http.ResponseWriter, req *http.Request) {
	if _, ok := h.internalAuth(w, req, "internal.nodes.list", "nodes:list", ""); !ok {
		return
	}
	q := req.URL.Query()
	if !q.Has("ids") && !q.Has("score_only") {
		s := h.cachedList()
		defer s.mu.RUnlock()
		writeRaw(w, http.StatusOK, s.body)
		return
	}
	scoreOnly := q.Get("score_only") == "true"
	var want map[string]bool
	if ids := q.Get("ids"); q.Has("ids") {
		want = map[string]bool{}
		for _, id := range strings.Split(ids, ",") {
			if id = strings.TrimSpace(id); id != "" {
				want[id] = true
			}
		}
	}
	bp, _ := h.lists.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer h.lists.Put(bp)
	*bp = h.appendList((*bp)[:0], want, scoreOnly)
	writeRaw(w, http.StatusOK, *bp)
}

// handleGet is GET /internal/v1/nodes/{node_id}: one SchedulerNode, 404 when unknown.
func (h *Handler) handleGet(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id := req.PathValue("node_id")
	if _, ok := h.internalAuth(w, req, "internal.nodes.get", "nodes:get", id); !ok {
		return
	}
	out, err := h.reg.AppendNode(ctx, make([]byte, 0, 2048), id, req.URL.Query().Get("score_only") == "true")
	if err != nil {
		h.writeErr(ctx, w, err)
		return
	}
	writeRaw(w, http.StatusOK, out)
}

// decodeInternal decodes an optional JSON object body of the internal routes into v.
func decodeInternal(req *http.Request, v any) error {
	var b bytes.Buffer
	if err := readBody(req, &b, maxInternalBody); err != nil {
		return err
	}
	return nodeapi.DecodeObject(b.Bytes(), v)
}

// handleIsolation is PUT (cordon) and DELETE (uncordon) /internal/v1/nodes/{node_id}/isolation
// (docs/nodes.md, "Internal nodes API"): optional body nodeapi.IsolationRequest; idempotent; 200
// with the NodeSnapshot. A node's own credential may lift or change only a cordon it set itself:
// 403 (audited), naming who set it, for an operator's.
func (h *Handler) handleIsolation(on bool) http.HandlerFunc {
	method, permission := "internal.nodes.isolate", "nodes:cordon"
	if !on {
		method, permission = "internal.nodes.unisolate", "nodes:uncordon"
	}
	return func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		id := req.PathValue("node_id")
		actor, ok := h.internalAuth(w, req, method, permission, id)
		if !ok {
			return
		}
		var body nodeapi.IsolationRequest
		if err := decodeInternal(req, &body); err != nil {
			h.writeErr(ctx, w, err)
			return
		}
		out, err := h.reg.Isolate(ctx, id, on, body.Detail, actor, make([]byte, 0, 2048))
		if errors.Is(err, nodes.ErrOperatorCordon) { // a node touching an operator's cordon: audited
			f := nodes.Forbidden("operator_cordon", "%s", errMessage(err))
			h.refuse(req, method, id, peerAddr(req), string(actor), f)
			writeRefusal(w, f)
			return
		}
		if err != nil {
			h.writeErr(ctx, w, err)
			return
		}
		h.audit(req, method, permission, id, actor, body.Detail)
		writeRaw(w, http.StatusOK, out)
	}
}

// handleLabels is PUT /internal/v1/nodes/{node_id}/labels (docs/nodes.md, "Internal nodes API"):
// nodeapi.LabelsRequest, merged into the node's labels; the reserved label is 403, a rule broken or
// more than 64 labels 400.
func (h *Handler) handleLabels(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id := req.PathValue("node_id")
	actor, ok := h.internalAuth(w, req, "internal.nodes.label", "nodes:label", id)
	if !ok {
		return
	}
	var body nodeapi.LabelsRequest
	if err := decodeInternal(req, &body); err != nil {
		h.writeErr(ctx, w, err)
		return
	}
	out, err := h.reg.Relabel(ctx, id, body.Labels, nil, make([]byte, 0, 2048))
	if err != nil {
		h.writeErr(ctx, w, err)
		return
	}
	h.audit(req, "internal.nodes.label", "nodes:label", id, actor, "")
	writeRaw(w, http.StatusOK, out)
}

// handleUnlabel is DELETE /internal/v1/nodes/{node_id}/labels/{key} (docs/nodes.md, "Internal nodes
// API"); the key may hold a slash (kubernetes.io/arch). The reserved label is 403; an absent key is
// a no-op.
func (h *Handler) handleUnlabel(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id, key := req.PathValue("node_id"), req.PathValue("key")
	actor, ok := h.internalAuth(w, req, "internal.nodes.unlabel", "nodes:label", id)
	if !ok {
		return
	}
	out, err := h.reg.Relabel(ctx, id, nil, []string{key}, make([]byte, 0, 2048))
	if err != nil {
		h.writeErr(ctx, w, err)
		return
	}
	h.audit(req, "internal.nodes.unlabel", "nodes:label", id, actor, key)
	writeRaw(w, http.StatusOK, out)
}

// handleDelete is DELETE /internal/v1/nodes/{node_id}[?force=true] (docs/nodes.md, "Internal nodes
// API"): 409 unless isolated; without force 502 SANDBOX_CHECK_FAILED when its sandbox count cannot
// be trusted (not Ready) and 409 while it runs sandboxes, both saying to add force=true; 200 with
// the snapshot from before the delete.
func (h *Handler) handleDelete(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id := req.PathValue("node_id")
	actor, ok := h.internalAuth(w, req, "internal.nodes.delete", "nodes:delete", id)
	if !ok {
		return
	}
	force := req.URL.Query().Get("force") == "true"
	out, err := h.reg.Remove(ctx, id, force, actor, make([]byte, 0, 2048))
	if err != nil {
		h.writeErr(ctx, w, err)
		return
	}
	msg := ""
	if force {
		msg = "force"
	}
	h.audit(req, "internal.nodes.delete", "nodes:delete", id, actor, msg)
	writeRaw(w, http.StatusOK, out)
}
