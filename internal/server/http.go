package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/iam"
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
	mux.Handle(console.Prefix+"/", s.console)
	mux.Handle("GET "+console.Prefix, http.RedirectHandler(console.Prefix+"/", http.StatusMovedPermanently))
	if s.inLn == nil {
		s.nodeHTTP.Routes(mux)
	}
	return s.withRequestID(mux)
}

// internalRoutes are the routes of --internal-listen: the node registry's node-agent and
// internal nodes routes, and /healthz.
func (s *Server) internalRoutes() http.Handler {
	mux := http.NewServeMux()
	s.nodeHTTP.Routes(mux)
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

// handleAPI runs one API method: body (at most MaxBodyBytes, one JSON object; empty means
// {}), bearer authentication, then the registry's Call, which decides the permission first.
func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	start := time.Now()
	name := r.PathValue("method")
	principal := ""
	out, err := func() (any, error) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return nil, cubefleet.Errorf(cubefleet.CodePayloadTooLarge, "the request body is larger than %d bytes", MaxBodyBytes)
			}
			return nil, cubefleet.Errorf(cubefleet.CodeInvalidInput, "reading the request body: %v", err)
		}
		body = bytes.TrimSpace(body)
		if len(body) == 0 {
			body = []byte("{}")
		}
		if body[0] != '{' || !json.Valid(body) {
			return nil, cubefleet.Invalid("", "the request body must be one JSON object")
		}
		p, err := s.authenticate(ctx, r)
		if err != nil {
			return nil, err
		}
		if p != nil {
			principal = p.ID
		}
		return s.api.Call(ctx, p, RequestID(ctx), name, body)
	}()
	code := cubefleet.ErrorCode(err)
	status := http.StatusOK
	if err != nil {
		status = s.writeError(w, r, err)
	} else {
		if out == nil {
			out = struct{}{}
		}
		writeJSON(w, http.StatusOK, out)
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
	s.log.InfoContext(ctx, "api", "method", name, "status", status, "code", string(code), "principal", principal, "duration_ms", elapsed.Milliseconds())
}

// authenticate returns the principal of the request's bearer key, nil without an
// Authorization header, or UNAUTHENTICATED.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*iam.Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, nil
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "the Authorization header must be Bearer <api key>")
	}
	return iam.Authenticate(ctx, s.db, strings.TrimSpace(token), s.cfg.Now())
}

// errorBody is the wire form of an error: {"error":{"code","message","details"}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    cubefleet.Code `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// writeError writes err with its status and returns the status. INTERNAL errors (and errors
// without a code) never show their cause: it is logged with the request id instead.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) int {
	ctx := r.Context()
	var e *cubefleet.Error
	body := errorDetail{Code: cubefleet.CodeInternal}
	if errors.As(err, &e) && e.Code != cubefleet.CodeInternal {
		body.Code, body.Message, body.Details = e.Code, e.Message, e.Details
	} else {
		body.Message = "internal error; the server log has the cause under request id " + RequestID(ctx)
		s.log.ErrorContext(ctx, "internal error", "method", r.PathValue("method"), "err", err)
	}
	status := cubefleet.HTTPStatus(body.Code)
	if body.Code == cubefleet.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cubefleet"`)
	}
	if ra, ok := body.Details["retryAfterSeconds"].(int); ok && ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ra))
	}
	writeJSON(w, status, errorBody{Error: body})
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
