package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
)

// RequestIDHeader carries the request id in both directions.
const RequestIDHeader = "X-Request-Id"

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/{method}", s.handleAPI)
	mux.HandleFunc("GET /api/v1/openapi.json", s.handleOpenAPI)
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.Handle(console.Prefix+"/", s.sys.Console)
	mux.Handle("GET "+console.Prefix, http.RedirectHandler(console.Prefix+"/", http.StatusMovedPermanently))
	if s.inLn == nil {
		s.sys.NodeRoutes.Routes(mux)
	}
	return s.withRequestID(mux)
}

// internalRoutes are the routes of --internal-listen: the node registry's node-agent and
// internal nodes routes, and /healthz.
func (s *Server) internalRoutes() http.Handler {
	mux := http.NewServeMux()
	s.sys.NodeRoutes.Routes(mux)
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	return s.withRequestID(mux)
}

type requestIDKey struct{}

// RequestID returns the request id ctx carries, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// withRequestID gives every request an id: the caller's X-Request-Id when it is 1-128 of
// letters, digits, '.', '_', ':', '-', a fresh `req_<ULID>` otherwise. The id goes back in the
// response header and into ctx, where the logger finds it.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if id == "" {
			id = r.Header.Get("X-RequestID") // CubeOps' other spelling (node-agent callers)
		}
		if !requestIDPattern.MatchString(id) {
			id = cubefleet.NewID("req")
		}
		w.Header().Set(RequestIDHeader, id)
		start := time.Now()
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		next.ServeHTTP(rw, r.WithContext(ctx))
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			s.log.DebugContext(ctx, "http", "method", r.Method, "path", r.URL.Path, "status", rw.status, "duration_ms", time.Since(start).Milliseconds())
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status for the request log.
func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap returns the server's ResponseWriter, for http.ResponseController (read and write
// deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestIDHandler adds the request id of the record's context to every log line.
type requestIDHandler struct{ slog.Handler }

// Handle adds request_id when ctx carries one.
func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the request id handling on the derived handler.
func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

// WithGroup keeps the request id handling on the derived handler.
func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// handleAPI runs one API method. It authenticates the caller from the request's head first: a
// request without a valid key is answered 401 and its body is never read. Then it reads the body
// (readBody: at most the method's MaxBody, one strict JSON object, empty means {}), waits for a
// slot of the work pool (a read or a write), runs the registry's Call, which decides the
// permission first, and encodes the answer; the slot is given back before the answer is
// written, within responseWriteTimeout.
func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	start := time.Now()
	name := r.PathValue("method")
	principal, keyID := "", ""
	var answer []byte
	err := func() error {
		p, err := s.authenticate(ctx, r)
		keyID = keyIDOf(p, err)
		if err != nil {
			closeUnread(w)
			return err
		}
		principal = p.ID
		m, ok := s.api.Lookup(name)
		if !ok {
			closeUnread(w)
			_, err := s.api.Call(ctx, p, RequestID(ctx), name, nil) // NOT_FOUND, in the table's words
			return err
		}
		body, giveBack, err := s.readBody(w, r, m.MaxBody)
		defer giveBack()
		if err != nil {
			return err
		}
		kind := workRead
		if m.Write {
			kind = workWrite
		}
		release, err := s.pool.acquire(ctx, kind)
		if err != nil {
			return err
		}
		release = sync.OnceFunc(release) // a long poll gives its slot back once it only waits (api.Idle)
		defer release()
		ctx := api.WithIdle(ctx, release)
		if s.hooks.working != nil {
			s.hooks.working(name)
		}
		out, err := s.api.Call(ctx, p, RequestID(ctx), name, body)
		if err != nil {
			return err
		}
		if out == nil {
			out = struct{}{}
		}
		if answer, err = json.Marshal(out); err != nil {
			return fmt.Errorf("encode the answer of %s: %w", name, err)
		}
		return nil
	}()
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(responseWriteTimeout))
	code := cubefleet.ErrorCode(err)
	status := http.StatusOK
	if err != nil {
		status = s.writeError(w, r, err)
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(append(answer, '\n'))
	}
	label := name
	if _, ok := s.api.Lookup(name); !ok {
		label = "unknown"
	}
	if code == "" {
		code = "OK"
	}
	elapsed := time.Since(start)
	s.metrics.observe(label, string(code), elapsed)
	s.log.InfoContext(ctx, "api", "method", name, "status", status, "code", string(code), "principal", principal, "key_id", keyID, "duration_ms", elapsed.Milliseconds())
}

// unavailableRetry is the Retry-After of an UNAVAILABLE answer (2 s): about how long a
// PostgreSQL restart or failover takes to accept connections again.
const unavailableRetry = 2 * time.Second

// responseWriteTimeout bounds how long an API answer may take to write: a client that does not
// read it for that long loses its connection (and the server the answer it held).
const responseWriteTimeout = time.Minute

// authenticate returns the principal of the request's bearer key, or UNAUTHENTICATED: no
// Authorization header, one that is not Bearer <key>, or a key that is unknown, revoked or
// expired (counted, and traced: authenticateKey).
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*iam.Principal, error) {
	token, failure := bearer(r.Header.Get("Authorization"))
	switch failure {
	case authNoCredentials:
		s.metrics.authFailures.WithLabelValues(failure).Inc()
		return nil, iam.NoCredentials()
	case authBadHeader:
		s.metrics.authFailures.WithLabelValues(failure).Inc()
		return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "the Authorization header must be Bearer <api key>")
	}
	return s.authenticateKey(ctx, token, r.PathValue("method"), peerOf(r))
}

// writeError writes err with its status and returns the status. An error without a code whose
// cause is an unreachable database (store.IsUnreachable) is UNAVAILABLE with Retry-After.
// INTERNAL errors (and other errors without a code) never show their cause: it is logged with
// the request id instead.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) int {
	ctx := r.Context()
	var e *cubefleet.Error
	body := contract.ErrorDetail{Code: cubefleet.CodeInternal}
	switch {
	case errors.As(err, &e) && e.Code != cubefleet.CodeInternal:
		body.Code, body.Message, body.Details = e.Code, e.Message, e.Details
	case store.IsUnreachable(err):
		body.Code, body.Message = cubefleet.CodeUnavailable, "the control plane's database is unreachable; retry shortly"
		s.log.WarnContext(ctx, "database unreachable", "method", r.PathValue("method"), "err", err)
	default:
		body.Message = "internal error; the server log has the cause under request id " + RequestID(ctx)
		s.log.ErrorContext(ctx, "internal error", "method", r.PathValue("method"), "err", err)
	}
	status := cubefleet.HTTPStatus(body.Code)
	switch body.Code {
	case cubefleet.CodeUnauthenticated:
		w.Header().Set("WWW-Authenticate", `Bearer realm="cubefleet"`)
	case cubefleet.CodeResourceExhausted:
		w.Header().Set("Retry-After", "1")
	case cubefleet.CodeUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(int(unavailableRetry/time.Second)))
	}
	if ra, ok := body.Details["retryAfterSeconds"].(int); ok && ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ra))
	}
	writeJSON(w, status, contract.ErrorBody{Error: body})
	return status
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"INTERNAL","message":"internal error: the response could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// handleHealthz answers 200 while the process serves: {"status":"ok"}, with "dev":true on a
// --dev server, so a CLI without a key can say where a --dev server keeps it.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"status": "ok"}
	if s.cfg.Dev {
		body["dev"] = true
	}
	writeJSON(w, http.StatusOK, body)
}

// handleReadyz answers 200 only when the store answers a query within 2 s.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		s.log.WarnContext(r.Context(), "not ready: the store does not answer", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "the database does not answer"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.openapi)
}
