package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// AgentPrefixes are the node-agent API's mount points (spec §1.1): the current one and the two
// earlier ones, served as aliases.
var AgentPrefixes = []string{"/internal/v1/node-agent", "/internal/node-agent/v1", "/internal/meta"}

// NodesPrefix is the internal nodes API (spec §2.1).
const NodesPrefix = "/internal/v1/nodes"

// maxInternalBody bounds the bodies of the isolation and labels routes.
const maxInternalBody = 64 << 10

// Routes adds the node-agent routes (under every AgentPrefixes entry: readyz, nodes/register,
// nodes/{node_id}/status) and the internal nodes routes (GET list and one node, isolation,
// labels, delete) to mux. Answers follow CubeOps byte for byte where a stock client reads them:
// every 2xx is one compact JSON object (or, for the list, array); errors are
// {"error":"<message>","code":"<CODE>"}.
func (r *Registry) Routes(mux *http.ServeMux) {
	for _, p := range AgentPrefixes {
		mux.HandleFunc("GET "+p+"/readyz", r.handleReadyz)
		mux.HandleFunc("POST "+p+"/nodes/register", r.handleRegister)
		mux.HandleFunc("POST "+p+"/nodes/{node_id}/status", r.handleStatus)
	}
	mux.HandleFunc("GET "+NodesPrefix, r.handleList)
	mux.HandleFunc("GET "+NodesPrefix+"/{node_id}", r.handleGet)
	mux.HandleFunc("PUT "+NodesPrefix+"/{node_id}/isolation", r.handleIsolation(true))
	mux.HandleFunc("DELETE "+NodesPrefix+"/{node_id}/isolation", r.handleIsolation(false))
	mux.HandleFunc("PUT "+NodesPrefix+"/{node_id}/labels", r.handleLabels)
	mux.HandleFunc("DELETE "+NodesPrefix+"/{node_id}/labels/{key...}", r.handleUnlabel)
	mux.HandleFunc("DELETE "+NodesPrefix+"/{node_id}", r.handleDelete)
}

// Handler returns a handler serving Routes.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	r.Routes(mux)
	return mux
}

// writeRaw writes a JSON body with status.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

var jsonContentType = []string{"application/json; charset=utf-8"}

// errorJSON is the error body of the node routes: CubeOps' {"error":"<message>"} plus our code.
type errorJSON struct {
	Error string         `json:"error"`
	Code  cubefleet.Code `json:"code,omitempty"`
}

// writeError writes the error body; '<', '>' and '&' stay as they are (a message says
// "must be >= 0"), the body is JSON all the same.
func writeError(w http.ResponseWriter, status int, code cubefleet.Code, msg string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(errorJSON{Error: msg, Code: code})
	writeRaw(w, status, bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// CodeSandboxCheckFailed is the code of the internal delete route's 502 (upstream's
// ErrSandboxCheckFailed, spec §2.1): without force=true, a node that is not Ready cannot be
// deleted, because its sandbox count is unknown. It is the internal routes' own code; the
// public API (nodes.delete) answers the same refusal 409 CONFLICT.
const CodeSandboxCheckFailed cubefleet.Code = "SANDBOX_CHECK_FAILED"

// writeErr maps err to its status (INVALID_INPUT 400, UNAUTHENTICATED 401, FORBIDDEN 403,
// NOT_FOUND 404, CONFLICT 409, PAYLOAD_TOO_LARGE 413; a failed sandbox check 502 with code
// SANDBOX_CHECK_FAILED) and writes it; anything else is a 500 without details, logged.
func (r *Registry) writeErr(ctx context.Context, w http.ResponseWriter, err error) {
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code == cubefleet.CodeInternal {
		r.log.ErrorContext(ctx, "node route failed", "err", err)
		writeError(w, http.StatusInternalServerError, cubefleet.CodeInternal, "internal error; the server log has the cause")
		return
	}
	status := http.StatusInternalServerError
	switch e.Code {
	case cubefleet.CodeInvalidInput:
		status = http.StatusBadRequest
	case cubefleet.CodeUnauthenticated:
		status = http.StatusUnauthorized
	case cubefleet.CodeForbidden:
		status = http.StatusForbidden
	case cubefleet.CodeNotFound:
		status = http.StatusNotFound
	case cubefleet.CodeConflict:
		status = http.StatusConflict
		if errors.Is(err, errSandboxCheck) {
			writeError(w, http.StatusBadGateway, CodeSandboxCheckFailed, e.Message)
			return
		}
	case cubefleet.CodePayloadTooLarge:
		status = http.StatusRequestEntityTooLarge
	}
	writeError(w, status, e.Code, e.Message)
}

// writeRefusal writes a refusal (401, 403 or 409).
func writeRefusal(w http.ResponseWriter, f *refusal) {
	code := cubefleet.CodeUnauthenticated
	switch f.httpStatus() {
	case http.StatusForbidden:
		code = cubefleet.CodeForbidden
	case http.StatusConflict:
		code = cubefleet.CodeConflict
	}
	if code == cubefleet.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cubefleet-node-agent"`)
	}
	writeError(w, f.httpStatus(), code, f.msg)
}

var errTooLarge = &cubefleet.Error{Code: cubefleet.CodePayloadTooLarge, Message: "request body too large"}

// readBody reads req's body into buf, refusing more than limit bytes (PAYLOAD_TOO_LARGE).
func readBody(req *http.Request, buf *bytes.Buffer, limit int64) error {
	if req.ContentLength > limit {
		return errTooLarge
	}
	if _, err := buf.ReadFrom(io.LimitReader(req.Body, limit+1)); err != nil {
		return cubefleet.Invalid("", "invalid body: %v", err)
	}
	if int64(buf.Len()) > limit {
		return errTooLarge
	}
	return nil
}

// readyCache remembers the store's last answer for a second, so thousands of nodes polling
// readyz at start-up cost one query a second.
type readyCache struct {
	mu sync.Mutex
	at time.Time
	ok bool
}

var (
	readyOK       = []byte(`{"ret":{"ret_code":200,"ret_msg":"ok"}}`)
	readyNotReady = []byte(`{"ret":{"ret_code":503,"ret_msg":"the store does not answer"}}`)
)

// handleReadyz answers the legacy `ret` envelope (spec §1.2), but only while the store answers:
// 200 {"ret":{"ret_code":200,"ret_msg":"ok"}}, else 503.
func (r *Registry) handleReadyz(w http.ResponseWriter, req *http.Request) {
	r.readyz.mu.Lock()
	defer r.readyz.mu.Unlock()
	if time.Since(r.readyz.at) > time.Second {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		r.readyz.ok = r.db.Ping(ctx) == nil
		cancel()
		r.readyz.at = time.Now()
	}
	if r.readyz.ok {
		writeRaw(w, http.StatusOK, readyOK)
		return
	}
	writeRaw(w, http.StatusServiceUnavailable, readyNotReady)
}

// agentCreds parses and checks the credentials of a node-agent call: a node credential or
// join token, or none from an allowed network. A refusal is audited and answered.
func (r *Registry) agentCreds(w http.ResponseWriter, req *http.Request, method, nodeID string, peer netip.Addr) (creds, bool) {
	c, f := parseAuth(req.Header.Get("Authorization"))
	if f == nil && c.kind == credNone && !r.allowed(peer) {
		f = unauthenticated("not_allowed", "node-agent calls need Authorization: Bearer <join token or node credential>; calls without credentials are accepted only from the networks in --node-agent-allow-unauthenticated")
	}
	if f == nil && method == "node-agent.status" && c.kind != credNode && c.kind != credNone {
		f = unauthenticated("wrong_token_kind", "status reports authenticate with the node credential (cfn_...)")
	}
	if f != nil {
		r.refuse(req.Context(), method, nodeID, peer, principalOf(c, nodeID), f)
		writeRefusal(w, f)
		return creds{}, false
	}
	return c, true
}

func principalOf(c creds, nodeID string) string {
	switch c.kind {
	case credNode:
		return "node:" + nodeID
	case credJoin:
		return "join-token"
	case credKey:
		return "api-key"
	}
	return "anonymous"
}

// handleRegister is POST .../nodes/register (spec §1.3): 200 with the NodeSnapshot, plus
// "node_credential" (shown once) when it joined with a join token.
func (r *Registry) handleRegister(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	peer := peerAddr(req)
	c, ok := r.agentCreds(w, req, "node-agent.register", "", peer)
	if !ok {
		r.m.registers.WithLabelValues("refused").Inc()
		return
	}
	dc := r.dec.get()
	defer r.dec.put(dc)
	if err := readBody(req, &dc.buf, r.cfg.MaxBodyBytes); err != nil {
		r.m.registers.WithLabelValues("invalid").Inc()
		r.writeErr(ctx, w, err)
		return
	}
	var body RegisterRequest
	if err := decodeRegister(dc, &body); err != nil {
		r.m.registers.WithLabelValues("invalid").Inc()
		r.writeErr(ctx, w, err)
		return
	}
	n, credential, err := r.register(ctx, &body, c, peer)
	if err != nil {
		var f *refusal
		if errors.As(err, &f) {
			r.m.registers.WithLabelValues("refused").Inc()
			r.refuse(ctx, "node-agent.register", body.NodeID, peer, principalOf(c, body.NodeID), f)
			writeRefusal(w, f)
			return
		}
		r.m.registers.WithLabelValues("invalid").Inc()
		r.writeErr(ctx, w, err)
		return
	}
	n.mu.Lock()
	out := r.appendSnapshot(make([]byte, 0, 2048), n, r.now())
	n.mu.Unlock()
	if credential != "" {
		out = append(out[:len(out)-1], `,"node_credential":"`...)
		out = append(out, credential...)
		out = append(out, `"}`...)
	}
	writeRaw(w, http.StatusOK, out)
}

// handleStatus is POST .../nodes/{node_id}/status (spec §1.4), the hot path: no database
// access, no global lock while encoding, a pooled decoder and buffers.
func (r *Registry) handleStatus(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	defer func() { r.m.reportTime.Observe(time.Since(start).Seconds()) }()
	ctx := req.Context()
	id := req.PathValue("node_id")
	peer := peerAddr(req)
	c, ok := r.agentCreds(w, req, "node-agent.status", id, peer)
	if !ok {
		r.m.reportAuth.Inc()
		return
	}
	dc := r.dec.get()
	defer r.dec.put(dc)
	if err := readBody(req, &dc.buf, r.cfg.MaxBodyBytes); err != nil {
		if err == errTooLarge {
			r.m.reportLarge.Inc()
		} else {
			r.m.reportBad.Inc()
		}
		r.writeErr(ctx, w, err)
		return
	}
	sr := r.statusRequest()
	defer r.statuses.Put(sr)
	if err := decodeStatus(dc, sr); err != nil {
		r.m.reportBad.Inc()
		r.writeErr(ctx, w, err)
		return
	}
	bp := r.buffer()
	defer r.bufs.Put(bp)
	out, err := r.report(ctx, id, sr, c, peer, (*bp)[:0])
	if err != nil {
		var re *refusalError
		if errors.As(err, &re) {
			writeRefusal(w, re.f)
			return
		}
		r.writeErr(ctx, w, err)
		return
	}
	*bp = out
	writeRaw(w, http.StatusOK, out)
}

// statusRequest returns a pooled, reset StatusRequest (its raw fields keep their capacity).
func (r *Registry) statusRequest() *StatusRequest {
	sr, _ := r.statuses.Get().(*StatusRequest)
	if sr == nil {
		return &StatusRequest{}
	}
	*sr = StatusRequest{
		Conditions: sr.Conditions[:0], Images: sr.Images[:0], LocalTemplates: sr.LocalTemplates[:0],
		Versions: sr.Versions[:0], HostFacts: sr.HostFacts[:0],
	}
	return sr
}

func (r *Registry) buffer() *[]byte {
	if bp, ok := r.bufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 4096)
	return &b
}

// errNodeNotFound is the heartbeat of a node that is not registered (spec §1.4: 404; our agent
// registers again on it).
var errNodeNotFound = cubefleet.Errorf(cubefleet.CodeNotFound, "node not found")

// report applies one status report and appends the answer to dst. A refused call is audited
// here and returned as *refusalError.
func (r *Registry) report(ctx context.Context, id string, sr *StatusRequest, c creds, peer netip.Addr, dst []byte) ([]byte, error) {
	n, err := r.find(ctx, id)
	if err != nil {
		return nil, err
	}
	var f *refusal
	switch {
	case n == nil && c.kind == credNode:
		f = r.credentialRefusal(id, c.hash)
	case n == nil:
		r.m.reportGone.Inc()
		return nil, errNodeNotFound
	}
	if f == nil {
		now := r.now()
		r.catchUp(n, now)
		n.mu.Lock()
		switch {
		case n.deleted:
			n.mu.Unlock()
			if c.kind == credNode {
				f = r.credentialRefusal(id, c.hash)
				break
			}
			r.m.reportGone.Inc()
			return nil, errNodeNotFound
		case c.kind == credNode && (n.credHash == "" || !sameHash(n.credHash, c.hash)):
			n.mu.Unlock()
			f = r.credentialRefusal(id, c.hash)
		case c.kind == credNone && n.credHash != "":
			n.mu.Unlock()
			f = unauthenticated("credential_required", "node %s joined with a join token and authenticates with its node credential", id)
		default:
			ch, err := r.applyStatus(n, sr, now)
			if err != nil {
				n.mu.Unlock()
				r.m.reportBad.Inc()
				return nil, err
			}
			drain := r.settleDrain(n, now) // a draining node that now runs no sandboxes is drained
			dst = r.appendSnapshot(dst, n, now)
			n.mu.Unlock()
			n.statusDirty.Store(true)
			if ch.registration {
				r.w.markReg(n)
			}
			r.applyDrain(n, drain, now)
			if ch.listed {
				r.listGen.Add(1)
			}
			r.m.reportOK.Inc()
			return dst, nil
		}
	}
	r.m.reportAuth.Inc()
	r.refuse(ctx, "node-agent.status", id, peer, principalOf(c, id), f)
	return nil, &refusalError{f}
}

// refusalError carries a refusal already audited to the handler, which answers it.
type refusalError struct{ f *refusal }

func (e *refusalError) Error() string { return e.f.msg }

// internalAuth decides a call on the internal nodes routes (spec §2.1 with cubefleet's auth):
// an API key holding permission on tenant/root; a node credential for its own node (reading
// and isolating it, not deleting it); or no credentials from an allowed network. A refusal is
// audited and answered.
func (r *Registry) internalAuth(w http.ResponseWriter, req *http.Request, method, permission, nodeID string) (Actor, bool) {
	ctx := req.Context()
	peer := peerAddr(req)
	c, f := parseAuth(req.Header.Get("Authorization"))
	var actor Actor
	if f == nil {
		switch c.kind {
		case credNone:
			if r.allowed(peer) {
				actor = Actor("anonymous@" + peer.String())
			} else {
				f = unauthenticated("not_allowed", "the internal nodes API needs Authorization: Bearer <API key> (or a node credential for its own node); calls without credentials are accepted only from the networks in --node-agent-allow-unauthenticated")
			}
		case credKey:
			if r.cfg.Authenticate == nil {
				f = unauthenticated("api_key", "API keys are not accepted here")
				break
			}
			p, err := r.cfg.Authenticate(ctx, c.token)
			if err != nil {
				if cubefleet.ErrorCode(err) != cubefleet.CodeUnauthenticated {
					r.writeErr(ctx, w, err)
					return "", false
				}
				f = unauthenticated("bad_credentials", "%s", errMessage(err))
				break
			}
			if err := iam.Decide(p, permission, iam.TenantScope(iam.RootTenant)); err != nil {
				f = &refusal{code: "forbidden", status: http.StatusForbidden, outcome: audit.OutcomeForbidden, msg: errMessage(err)}
				r.refuse(ctx, method, nodeID, peer, p.ID, f)
				writeRefusal(w, f)
				return "", false
			}
			actor = Actor(p.ID)
		case credNode:
			n := r.node(nodeID)
			var hash string
			if n != nil {
				n.mu.Lock()
				hash = n.credHash
				n.mu.Unlock()
			}
			switch {
			case nodeID == "" || n == nil || hash == "" || !sameHash(hash, c.hash):
				f = r.credentialRefusal(nodeID, c.hash)
			case permission == "nodes:delete":
				f = &refusal{code: "forbidden", status: http.StatusForbidden, outcome: audit.OutcomeForbidden,
					msg: "a node credential cannot delete its node: use an API key holding nodes:delete"}
			default:
				actor = Actor("node:" + nodeID)
			}
		case credJoin:
			f = unauthenticated("wrong_token_kind", "join tokens only register nodes")
		}
	}
	if f != nil {
		r.refuse(ctx, method, nodeID, peer, principalOf(c, nodeID), f)
		writeRefusal(w, f)
		return "", false
	}
	return actor, true
}

func errMessage(err error) string {
	var e *cubefleet.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// auditOK records a successful change made through the internal routes.
func (r *Registry) auditOK(ctx context.Context, method, permission, nodeID string, actor Actor, msg string) {
	r.w.addAudit(audit.Entry{
		At: r.now(), TenantID: iam.RootTenant, PrincipalID: string(actor), Method: method, Permission: permission,
		Scope: iam.TenantScope(iam.RootTenant), Outcome: audit.OutcomeOK, Target: nodeID, RequestID: r.cfg.RequestID(ctx), Message: msg,
	})
	r.w.kick()
}

// handleList is GET /internal/v1/nodes (spec §2.1): a compact JSON array of SchedulerNode sorted
// by node id; ?ids=a,b selects (unknown ids skipped), ?score_only=true reduces each entry. The
// full list is answered from the registry's listing cache (listCache) when it is current.
func (r *Registry) handleList(w http.ResponseWriter, req *http.Request) {
	if _, ok := r.internalAuth(w, req, "internal.nodes.list", "nodes:list", ""); !ok {
		return
	}
	q := req.URL.Query()
	if !q.Has("ids") && !q.Has("score_only") {
		s := r.cachedList()
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
	bp, _ := r.lists.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer r.lists.Put(bp)
	*bp = r.appendList((*bp)[:0], want, scoreOnly)
	writeRaw(w, http.StatusOK, *bp)
}

// appendList appends the SchedulerNode array of the nodes in want (nil: every node).
func (r *Registry) appendList(out []byte, want map[string]bool, scoreOnly bool) []byte {
	start := time.Now()
	out = append(out, '[')
	now := r.now()
	first := true
	for _, n := range r.nodes() {
		if want != nil && !want[n.id] {
			continue
		}
		n.mu.Lock()
		if n.deleted {
			n.mu.Unlock()
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = r.appendScheduler(out, n, now, scoreOnly)
		n.mu.Unlock()
	}
	r.m.listTime.Observe(time.Since(start).Seconds())
	return append(out, ']')
}

// Listing cache. CubeMaster-style readers poll the whole list every second; encoding 10,000
// nodes takes tens of milliseconds of CPU, and longer on a busy machine. So the full list is
// kept encoded: a GET answers it while it reflects the current set of nodes and their static
// fields (listGen) and is at most listMaxAge old, and the registry's loop rebuilds it every
// listRefresh, off the request path, from the start (so even the first GET after a start or
// a quiet spell finds it ready). A node added, removed, cordoned, relabelled or changing state
// makes the next GET build afresh unless the loop got there first. Two buffers take turns
// (some 18 MB each for 10,000 nodes), so rebuilding makes no garbage; keeping the list warm
// costs about 2% of one core at 10,000 nodes.
const (
	// listBytesPerNode is the room a listed node's JSON takes (a Cubelet's is some 1.8 KB).
	listBytesPerNode = 2048
	listMaxAge       = time.Second
	listRefresh      = 500 * time.Millisecond
)

// listCache is the encoded full list: the current snapshot and a spare buffer.
type listCache struct {
	build sync.Mutex // serializes builds; guards spare
	cur   atomic.Pointer[listSnapshot]
	spare *listSnapshot
}

// listSnapshot is one encoded list. Readers hold mu (shared) while they write body out; a
// build holds it (exclusive) while it refills a spare snapshot.
type listSnapshot struct {
	mu   sync.RWMutex
	gen  uint64
	at   time.Time
	body []byte
}

func (s *listSnapshot) fresh(gen uint64, maxAge time.Duration) bool {
	return s.gen == gen && time.Since(s.at) <= maxAge
}

// cachedList returns the full list, from the cache when it is current, read-locked: the caller
// writes s.body out and then calls s.mu.RUnlock.
func (r *Registry) cachedList() *listSnapshot {
	if s := r.listing.cur.Load(); s != nil {
		s.mu.RLock()
		if s.fresh(r.listGen.Load(), listMaxAge) {
			return s
		}
		s.mu.RUnlock()
	}
	return r.buildList(false, true)
}

// buildList encodes the full list into the spare buffer and makes it current. Concurrent
// callers share one build; refresh (the background loop) builds only when the current list is
// older than listRefresh. With rlock the current snapshot is returned read-locked.
func (r *Registry) buildList(refresh, rlock bool) *listSnapshot {
	c := &r.listing
	c.build.Lock()
	defer c.build.Unlock()
	gen := r.listGen.Load()
	maxAge := listMaxAge
	if refresh {
		maxAge = listRefresh
	}
	if s := c.cur.Load(); s != nil && s.fresh(gen, maxAge) {
		if rlock {
			s.mu.RLock()
		}
		return s // built while this caller waited
	}
	next := c.spare
	if next == nil || !next.mu.TryLock() { // still being written out: take a new buffer
		next = &listSnapshot{}
		next.mu.Lock()
	}
	next.gen, next.at = gen, time.Now()
	if want := r.Len()*listBytesPerNode + 64; cap(next.body) < want {
		next.body = make([]byte, 0, want) // sized once, so appending never doubles it
	}
	next.body = r.appendList(next.body[:0], nil, false)
	c.spare = c.cur.Swap(next)
	next.mu.Unlock()
	if rlock {
		next.mu.RLock()
	}
	return next
}

// refreshList rebuilds the cached list unless it is current (Run calls it at the start and
// every listRefresh).
func (r *Registry) refreshList() {
	if r.Len() > 0 {
		r.buildList(true, false)
	}
}

// handleGet is GET /internal/v1/nodes/{node_id}: one SchedulerNode, 404 when unknown.
func (r *Registry) handleGet(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id := req.PathValue("node_id")
	if _, ok := r.internalAuth(w, req, "internal.nodes.get", "nodes:get", id); !ok {
		return
	}
	n, err := r.live(ctx, id)
	if err != nil {
		r.writeErr(ctx, w, err)
		return
	}
	n.mu.Lock()
	out := r.appendScheduler(make([]byte, 0, 2048), n, r.now(), req.URL.Query().Get("score_only") == "true")
	n.mu.Unlock()
	writeRaw(w, http.StatusOK, out)
}

// writeSnapshot answers n's NodeSnapshot.
func (r *Registry) writeSnapshot(w http.ResponseWriter, n *node) {
	n.mu.Lock()
	out := r.appendSnapshot(make([]byte, 0, 2048), n, r.now())
	n.mu.Unlock()
	writeRaw(w, http.StatusOK, out)
}

// decodeInternal decodes an optional JSON object body of the internal routes into v.
func (r *Registry) decodeInternal(req *http.Request, v any) error {
	var dc decoder
	if err := readBody(req, &dc.buf, maxInternalBody); err != nil {
		return err
	}
	if len(bytes.TrimSpace(dc.buf.Bytes())) == 0 {
		return nil
	}
	return dc.decode(v)
}

// handleIsolation is PUT (cordon) and DELETE (uncordon) /internal/v1/nodes/{node_id}/isolation
// (spec §2.1): optional body {"detail":"<=200 runes"}; idempotent; 200 with the NodeSnapshot.
// A node's own credential may lift or change only a cordon it set itself: 403 (audited),
// naming who set it, for an operator's.
func (r *Registry) handleIsolation(on bool) http.HandlerFunc {
	method, permission := "internal.nodes.isolate", "nodes:cordon"
	if !on {
		method, permission = "internal.nodes.unisolate", "nodes:uncordon"
	}
	return func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		id := req.PathValue("node_id")
		actor, ok := r.internalAuth(w, req, method, permission, id)
		if !ok {
			return
		}
		var body struct {
			Detail string `json:"detail"`
		}
		if err := r.decodeInternal(req, &body); err != nil {
			r.writeErr(ctx, w, err)
			return
		}
		n, err := r.setCordon(ctx, id, on, body.Detail, actor)
		if errors.Is(err, errOperatorCordon) { // a node touching an operator's cordon: audited
			f := &refusal{code: "operator_cordon", status: http.StatusForbidden, outcome: audit.OutcomeForbidden, msg: errMessage(err)}
			r.refuse(ctx, method, id, peerAddr(req), string(actor), f)
			writeRefusal(w, f)
			return
		}
		if err != nil {
			r.writeErr(ctx, w, err)
			return
		}
		r.auditOK(ctx, method, permission, id, actor, body.Detail)
		r.writeSnapshot(w, n)
	}
}

// handleLabels is PUT /internal/v1/nodes/{node_id}/labels (spec §2.1): {"labels":{...}} merged
// into the node's labels; the reserved label is 403, a rule broken or more than 64 labels 400.
func (r *Registry) handleLabels(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id := req.PathValue("node_id")
	actor, ok := r.internalAuth(w, req, "internal.nodes.label", "nodes:label", id)
	if !ok {
		return
	}
	var body struct {
		Labels map[string]string `json:"labels"`
	}
	if err := r.decodeInternal(req, &body); err != nil {
		r.writeErr(ctx, w, err)
		return
	}
	n, err := r.relabel(ctx, id, body.Labels, nil)
	if err != nil {
		r.writeErr(ctx, w, err)
		return
	}
	r.auditOK(ctx, "internal.nodes.label", "nodes:label", id, actor, "")
	r.writeSnapshot(w, n)
}

// handleUnlabel is DELETE /internal/v1/nodes/{node_id}/labels/{key} (spec §2.1); the key may
// hold a slash (kubernetes.io/arch). The reserved label is 403; an absent key is a no-op.
func (r *Registry) handleUnlabel(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id, key := req.PathValue("node_id"), req.PathValue("key")
	actor, ok := r.internalAuth(w, req, "internal.nodes.unlabel", "nodes:label", id)
	if !ok {
		return
	}
	n, err := r.relabel(ctx, id, nil, []string{key})
	if err != nil {
		r.writeErr(ctx, w, err)
		return
	}
	r.auditOK(ctx, "internal.nodes.unlabel", "nodes:label", id, actor, key)
	r.writeSnapshot(w, n)
}

// handleDelete is DELETE /internal/v1/nodes/{node_id}[?force=true] (spec §2.1): 409 unless
// isolated; without force 502 SANDBOX_CHECK_FAILED when its sandbox count cannot be trusted
// (not Ready) and 409 while it runs sandboxes, both saying to add force=true; 200 with the
// snapshot from before the delete.
func (r *Registry) handleDelete(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	id := req.PathValue("node_id")
	actor, ok := r.internalAuth(w, req, "internal.nodes.delete", "nodes:delete", id)
	if !ok {
		return
	}
	force := req.URL.Query().Get("force") == "true"
	n, err := r.deleteNode(ctx, id, force, actor, forceQuery)
	if err != nil {
		r.writeErr(ctx, w, err)
		return
	}
	msg := ""
	if force {
		msg = "force"
	}
	r.auditOK(ctx, "internal.nodes.delete", "nodes:delete", id, actor, msg)
	r.writeSnapshot(w, n)
}
