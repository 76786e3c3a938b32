// Package nodehttp is the node registry's HTTP edge: the node-agent routes a stock Cubelet and
// `cubefleet agent` call (readyz, register, status, under every nodeapi.AgentPrefixes entry) and
// the internal nodes routes CubeMaster-style readers and operators call (list, get, isolation,
// labels, delete under nodeapi.NodesPrefix), byte-compatible with CubeOps where a stock client
// reads them (docs/nodes.md, "Node-agent API" and "Internal nodes API").
//
// It authenticates every call (a node credential, a join token, an API key, or none from the
// networks the operator allows), audits refusals (summarized per peer address and reason: one
// row a minute with the count, however the calls vary) and the changes made through the
// internal routes, keeps the full node list encoded between changes,
// and answers errors in CubeOps' body (nodeapi.ErrorBody) with the status of
// cubefleet.HTTPStatus, except the internal delete route's 502 SANDBOX_CHECK_FAILED. The state
// is the registry's (internal/nodes); the audit rows go through the registry's store.
package nodehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
)

// DefaultMaxBodyBytes bounds a node-agent request body (4 MiB); larger is 413.
const DefaultMaxBodyBytes = 4 << 20

// maxInternalBody bounds the bodies of the isolation and labels routes (64 KiB).
const maxInternalBody = 64 << 10

// Auditor takes the audit rows of the routes (nodestore.Store): with now the row is written at
// once (a change), without it at the next flush (a refusal).
type Auditor interface {
	Audit(e audit.Entry, now bool)
}

// Pinger answers nil while the database answers (store.DB); readyz follows it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config configures a Handler. Registry, Audit and DB are required; every other field has a
// usable zero value.
type Config struct {
	// Registry is the node registry the routes read and change.
	Registry *nodes.Registry
	// Audit takes the audit rows of refused calls and of changes through the internal routes.
	Audit Auditor
	// DB is what readyz asks whether the control plane can take nodes.
	DB Pinger
	// AllowUnauthenticated lists the networks (--node-agent-allow-unauthenticated) from which
	// calls without credentials (stock Cubelets, CubeMaster-style readers, cubeopscli) are
	// accepted. Empty: none. A network wider than a /8 is logged (AllowWarning) by New.
	AllowUnauthenticated []netip.Prefix
	// Authenticate resolves an API key (iam.TokenPrefix) on the internal nodes routes; nil
	// means API keys are not accepted there.
	Authenticate func(ctx context.Context, token string) (*iam.Principal, error)
	// RequestID returns the request id of a request's context, for audit rows; nil means none.
	RequestID func(ctx context.Context) string
	// MaxBodyBytes bounds node-agent request bodies (413 beyond). Zero means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Now is the clock of audit rows and refusal summaries (the registry's); nil means
	// time.Now.
	Now func() time.Time
	// Log receives the routes' log lines (never a secret); nil discards them.
	Log *slog.Logger
	// Work is the control plane's side of the work API (sandboxes.Service); nil answers the
	// work routes 501 UNSUPPORTED.
	Work Work
	// MaxEventBytes bounds a sandbox event's body (413 beyond): MaxEventBytesFor the result
	// limit. Zero means DefaultMaxEventBytes.
	MaxEventBytes int64
}

// Handler serves the node-agent and internal nodes routes. Create it with New, serve it (or
// add its Routes to a mux), and run its list cache with Run. It is safe for concurrent use.
//
// Locks: each is a leaf (nothing else is taken while it is held): the readyz cache's, the
// refusal summary's (audit.Summary), and the list cache's build lock and snapshot locks
// (listCache).
type Handler struct {
	cfg     Config
	reg     *nodes.Registry
	log     *slog.Logger
	mux     *http.ServeMux
	m       *metrics
	dec     nodeapi.DecoderPool
	reports sync.Pool // *nodeapi.StatusRequest
	bufs    sync.Pool // *[]byte: status answers
	lists   sync.Pool // *[]byte: selected node lists (?ids=, ?score_only=)
	listing listCache
	refused *audit.Summary // refusals, summarized per peer and reason
	readyz  readyCache
}

// New returns the routes of cfg.Registry. It logs AllowWarning (level WARN, naming the
// networks) when cfg.AllowUnauthenticated holds a network wider than a /8.
func New(cfg Config) (*Handler, error) {
	if cfg.Registry == nil || cfg.Audit == nil || cfg.DB == nil {
		return nil, errors.New("nodehttp: Config.Registry, Audit and DB are required")
	}
	if cfg.RequestID == nil {
		cfg.RequestID = func(context.Context) string { return "" }
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, reg: cfg.Registry, log: cfg.Log, m: newMetrics(), refused: audit.NewSummary(refusalWindow, maxRefusalKeys, cfg.Now)}
	if broad := BroadPrefixes(cfg.AllowUnauthenticated); len(broad) > 0 {
		h.log.Warn(AllowWarning, "networks", FormatCIDRs(broad), "allowlist", FormatCIDRs(cfg.AllowUnauthenticated))
	}
	h.mux = http.NewServeMux()
	h.Routes(h.mux)
	return h, nil
}

// Routes adds the node-agent routes (under every nodeapi.AgentPrefixes entry: readyz,
// nodes/register, nodes/{node_id}/status), the work API (under nodeapi.AgentPrefix: work and
// sandbox events; work.go), CubeMaster's surface (GET nodeapi.CubeMasterHealthPath,
// nodeapi.MetaNodesPath and one node under it) and the internal nodes routes (GET list and one
// node, isolation, labels, delete) to mux. Answers follow CubeOps byte for byte where a stock
// client reads them: every 2xx is one compact JSON object (or, for the list, array); errors are
// nodeapi.ErrorBody.
func (h *Handler) Routes(mux *http.ServeMux) {
	for _, p := range nodeapi.AgentPrefixes {
		mux.HandleFunc("GET "+p+nodeapi.RouteReadyz, h.handleReadyz)
		mux.HandleFunc("POST "+p+nodeapi.RouteRegister, h.handleRegister)
		mux.HandleFunc("POST "+p+nodeapi.RouteStatus, h.handleStatus)
	}
	h.workRoutes(mux)
	mux.HandleFunc("GET "+nodeapi.CubeMasterHealthPath, h.handleReadyz)
	mux.HandleFunc("GET "+nodeapi.MetaNodesPath, h.handleMetaList)
	mux.HandleFunc("GET "+nodeapi.MetaNodesPath+nodeapi.RouteNode, h.handleMetaGet)
	mux.HandleFunc("GET "+nodeapi.NodesPrefix, h.handleList)
	mux.HandleFunc("GET "+nodeapi.NodesPrefix+nodeapi.RouteNode, h.handleGet)
	mux.HandleFunc("PUT "+nodeapi.NodesPrefix+nodeapi.RouteIsolation, h.handleIsolation(true))
	mux.HandleFunc("DELETE "+nodeapi.NodesPrefix+nodeapi.RouteIsolation, h.handleIsolation(false))
	mux.HandleFunc("PUT "+nodeapi.NodesPrefix+nodeapi.RouteLabels, h.handleLabels)
	mux.HandleFunc("DELETE "+nodeapi.NodesPrefix+nodeapi.RouteLabel, h.handleUnlabel)
	mux.HandleFunc("DELETE "+nodeapi.NodesPrefix+nodeapi.RouteNode, h.handleDelete)
}

// ServeHTTP serves Routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) { h.mux.ServeHTTP(w, req) }

// Run keeps the full node list encoded (listCache) until ctx ends: it builds it at once and
// then every listRefresh, off the request path. It also writes the summaries of refusals
// every refusalFlushEvery (FlushRefusals), and those still open when ctx ends.
func (h *Handler) Run(ctx context.Context) {
	h.refreshList()
	done := make(chan struct{})
	go func() { nodes.Every(ctx, refusalFlushEvery, h.FlushRefusals); close(done) }()
	nodes.Every(ctx, listRefresh, h.refreshList)
	<-done
	h.drainRefusals()
}

func (h *Handler) now() int64 { return h.cfg.Now().UnixMilli() }

// writeRaw writes a JSON body with status.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	hd := w.Header()
	hd["Content-Type"] = jsonContentType
	hd["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

var jsonContentType = []string{"application/json; charset=utf-8"}

// writeError writes the error body; '<', '>' and '&' stay as they are (a message says
// "must be >= 0"), the body is JSON all the same.
func writeError(w http.ResponseWriter, status int, code cubefleet.Code, msg string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(nodeapi.ErrorBody{Error: msg, Code: code})
	writeRaw(w, status, bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// writeErr answers err with the status of its code (cubefleet.HTTPStatus), except a failed
// sandbox check (nodes.ErrSandboxCheck): 502 nodeapi.CodeSandboxCheckFailed. Anything without
// a code (or INTERNAL) is a 500 without details, logged.
func (h *Handler) writeErr(ctx context.Context, w http.ResponseWriter, err error) {
	h.writeErrAs(ctx, w, err, writeError)
}

// answerFunc writes an error answer in one of the two shapes: writeError (the node-agent and
// internal nodes routes' {"error","code"}) or writeRet (CubeMaster's routes' `ret` envelope).
type answerFunc func(w http.ResponseWriter, status int, code cubefleet.Code, msg string)

// writeErrAs is writeErr in answer's shape.
func (h *Handler) writeErrAs(ctx context.Context, w http.ResponseWriter, err error, answer answerFunc) {
	var e *cubefleet.Error
	if !errors.As(err, &e) || e.Code == cubefleet.CodeInternal {
		h.log.ErrorContext(ctx, "node route failed", "err", err)
		answer(w, http.StatusInternalServerError, cubefleet.CodeInternal, "internal error; the server log has the cause")
		return
	}
	if errors.Is(err, nodes.ErrSandboxCheck) {
		answer(w, http.StatusBadGateway, nodeapi.CodeSandboxCheckFailed, e.Message)
		return
	}
	answer(w, cubefleet.HTTPStatus(e.Code), e.Code, e.Message)
}

// writeRet answers an error on CubeMaster's routes (docs/nodes.md, "CubeMaster's routes") in
// its envelope: {"ret":{"ret_code":<HTTP status>,"ret_msg":"<message>"}}, with that status.
func writeRet(w http.ResponseWriter, status int, _ cubefleet.Code, msg string) {
	body, _ := json.Marshal(nodeapi.NewRetReply(status, msg))
	writeRaw(w, status, body)
}

// writeRefusal answers a refusal with its code's status; a 401 names the Bearer scheme.
func writeRefusal(w http.ResponseWriter, f *nodes.Refusal) { writeRefusalAs(w, f, writeError) }

// writeRefusalAs is writeRefusal in answer's shape.
func writeRefusalAs(w http.ResponseWriter, f *nodes.Refusal, answer answerFunc) {
	if f.Code == cubefleet.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cubefleet-node-agent"`)
	}
	answer(w, statusOf(f), f.Code, f.Message)
}

var errTooLarge = &cubefleet.Error{Code: cubefleet.CodePayloadTooLarge, Message: "request body too large"}

// body is where a request body is read to: a nodeapi.Decoder or a bytes.Buffer.
type body interface {
	io.ReaderFrom
	Len() int
}

// readBody reads req's body into dst, refusing more than limit bytes (PAYLOAD_TOO_LARGE).
func readBody(req *http.Request, dst body, limit int64) error {
	if req.ContentLength > limit {
		return errTooLarge
	}
	if _, err := dst.ReadFrom(io.LimitReader(req.Body, limit+1)); err != nil {
		return cubefleet.Invalid("", "invalid body: %v", err)
	}
	if int64(dst.Len()) > limit {
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
	readyOK, _       = json.Marshal(nodeapi.NewRetReply(http.StatusOK, "ok"))
	readyNotReady, _ = json.Marshal(nodeapi.NewRetReply(http.StatusServiceUnavailable, "the store does not answer"))
)

// handleReadyz answers the legacy `ret` envelope (docs/nodes.md, "Node-agent API"), but only while
// the store answers: 200 {"ret":{"ret_code":200,"ret_msg":"ok"}}, else 503.
func (h *Handler) handleReadyz(w http.ResponseWriter, req *http.Request) {
	h.readyz.mu.Lock()
	defer h.readyz.mu.Unlock()
	if time.Since(h.readyz.at) > time.Second {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		h.readyz.ok = h.cfg.DB.Ping(ctx) == nil
		cancel()
		h.readyz.at = time.Now()
	}
	if h.readyz.ok {
		writeRaw(w, http.StatusOK, readyOK)
		return
	}
	writeRaw(w, http.StatusServiceUnavailable, readyNotReady)
}

// statusOf is the HTTP status a refusal is answered with.
func statusOf(f *nodes.Refusal) int { return cubefleet.HTTPStatus(f.Code) }
