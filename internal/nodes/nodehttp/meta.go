package nodehttp

import "net/http"

// CubeMaster's surface, for the one-click scripts (docs/nodes.md, "CubeMaster's routes"): its
// health route answers like readyz, and its node listing is the registry's NodeSnapshots in the
// `ret` envelope. Only the listing needs credentials (those of the internal nodes routes).
// Every answer, a refusal or an error included, is in that envelope with ret_code the HTTP
// status.

// handleMetaList is GET /internal/meta/nodes: {"ret":{"ret_code":200,...},"data":[...]}, the
// NodeSnapshot of every node sorted by node id.
func (h *Handler) handleMetaList(w http.ResponseWriter, req *http.Request) {
	if _, ok := h.authorize(w, req, "internal.meta.nodes.list", "nodes:list", "", writeRet); !ok {
		return
	}
	bp, _ := h.lists.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer h.lists.Put(bp)
	*bp = h.reg.AppendMetaList((*bp)[:0])
	writeRaw(w, http.StatusOK, *bp)
}

// handleMetaGet is GET /internal/meta/nodes/{node_id}: the node's NodeSnapshot in the envelope;
// an unknown node is 404 with ret_code 404.
func (h *Handler) handleMetaGet(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id := req.PathValue("node_id")
	if _, ok := h.authorize(w, req, "internal.meta.nodes.get", "nodes:get", id, writeRet); !ok {
		return
	}
	out, err := h.reg.AppendMetaNode(ctx, make([]byte, 0, 2048), id)
	if err != nil {
		h.writeErrAs(ctx, w, err, writeRet)
		return
	}
	writeRaw(w, http.StatusOK, out)
}
