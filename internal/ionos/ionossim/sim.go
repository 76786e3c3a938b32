// Package ionossim is a loopback simulator of the IONOS Cloud API v6 subset a Cube fleet tool
// uses (docs/ionos.md, "Simulate"). It serves /cloudapi/v6 with the official SDK's
// own model types, so the SDK (github.com/ionos-cloud/sdk-go/v6) decodes every response; it
// supports depth, offset/limit, asynchronous writes followed through /requests/{id}/status,
// metadata.state BUSY while a request runs, the CUBE rules IONOS enforces, a default
// catalogue (CUBE templates, images with aliases, locations), request counting by method and
// path, fault injection, JSON state fixtures and a hook when a server reaches RUNNING.
//
// It is a test double for our own tools, not a model of every IONOS behaviour: what it
// leaves out is listed in docs/ionos.md. A Sim is safe for concurrent use.
package ionossim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
)

// BasePath is the path prefix the simulator serves, as the real API does.
const BasePath = "/cloudapi/v6"

// Default durations of an asynchronous request.
const (
	DefaultQueueDelay  = 10 * time.Millisecond  // QUEUED before RUNNING
	DefaultRunDuration = 100 * time.Millisecond // RUNNING before DONE
)

// maxBody is the largest request body the simulator reads (1 MiB).
const maxBody = 1 << 20

// Options configures a Sim. The zero value is usable.
type Options struct {
	// Authorize, when set, decides whether a bearer token is accepted (see AcceptToken); when
	// nil any non-empty Bearer or Basic credential is. A missing or refused credential is
	// answered 401. Tokens are never logged.
	Authorize func(bearer string) bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// QueueDelay is how long a new request stays QUEUED. Zero means DefaultQueueDelay;
	// negative means none.
	QueueDelay time.Duration
	// RunDuration is how long a request then stays RUNNING. Zero means
	// DefaultRunDuration; negative means none.
	RunDuration time.Duration
	// OnRunning, when set, is called each time a server reaches vmState RUNNING (created,
	// resumed or started), with a copy of the server and its data center id. It runs on the
	// goroutine that advanced the simulator (an API call or the Listen ticker) after the
	// simulator's lock is released, so it may call the simulator; it should not block long.
	OnRunning func(datacenterID string, srv Server)
	// Logger receives one debug line per API call (method, path, status); nil discards.
	Logger *slog.Logger
}

// Sim is the simulator: an http.Handler over a State.
type Sim struct {
	opts Options
	mux  *http.ServeMux

	mu      sync.Mutex
	st      *State
	counts  map[string]int
	faults  []*Fault
	stuck   map[string]bool
	nextMAC uint32
	nextIP  uint32
}

// New returns a simulator with an empty world and the default catalogue.
func New(opts Options) *Sim {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.QueueDelay == 0 {
		opts.QueueDelay = DefaultQueueDelay
	}
	if opts.RunDuration == 0 {
		opts.RunDuration = DefaultRunDuration
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sim{opts: opts, counts: map[string]int{}, stuck: map[string]bool{}}
	st := &State{}
	_ = st.normalise(s.now()) // an empty state always normalises
	s.st = st
	s.routes()
	return s
}

func (s *Sim) now() time.Time { return s.opts.Now().UTC().Truncate(time.Millisecond) }

// Load replaces the simulator's world with st after filling its defaults (see DecodeState).
// The simulator keeps st; the caller must not change it afterwards. It returns an error, and
// keeps the old world, when st is inconsistent.
func (s *Sim) Load(st *State) error {
	if err := st.normalise(s.now()); err != nil {
		return err
	}
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	return nil
}

// LoadState replaces the world with the JSON fixture read from r (see DecodeState).
func (s *Sim) LoadState(r io.Reader) error {
	st, err := DecodeState(r, s.now())
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	return nil
}

// SaveState writes the world as a JSON fixture that LoadState reads back; a catalogue equal
// to the default one is left out (it is restored on load).
func (s *Sim) SaveState(w io.Writer) error {
	st := s.Snapshot()
	if reflect.DeepEqual(st.Templates, DefaultTemplates()) {
		st.Templates = nil
	}
	if reflect.DeepEqual(st.Images, DefaultImages()) {
		st.Images = nil
	}
	if reflect.DeepEqual(st.Locations, DefaultLocations()) {
		st.Locations = nil
	}
	return EncodeState(w, st)
}

// Snapshot returns a deep copy of the world, for tests to inspect.
func (s *Sim) Snapshot() *State {
	s.mu.Lock()
	b, err := json.Marshal(s.st)
	s.mu.Unlock()
	if err != nil {
		panic(fmt.Sprintf("ionossim: state does not encode: %v", err)) // only plain data: unreachable
	}
	var out State
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("ionossim: state does not decode: %v", err))
	}
	return &out
}

// Count returns how many calls reached the simulator with method and path (the URL path
// without query, e.g. "/cloudapi/v6/datacenters/ID/servers"), faulted calls included.
func (s *Sim) Count(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[method+" "+path]
}

// Counts returns a copy of all call counts keyed "METHOD /path".
func (s *Sim) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// Total returns the number of calls of every method and path.
func (s *Sim) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.counts {
		n += v
	}
	return n
}

// ResetCounts sets every call count to zero.
func (s *Sim) ResetCounts() {
	s.mu.Lock()
	s.counts = map[string]int{}
	s.mu.Unlock()
}

// Fault makes matching calls misbehave. A call matches when Method is empty or equal, Path is
// empty or a prefix of the call's path below BasePath (e.g. "/datacenters/ID/servers"), Target
// is empty, "*" or a suffix of that path ("servers/{id}": see ParseFault), and IfField is
// empty or a member of the call's JSON body. Times is how many calls it affects (0 means every
// call until ClearFaults). The first matching fault wins; faults with StuckFor are matched
// besides that.
type Fault struct {
	Method string
	Path   string
	// Target matches the end of the call's path, segment by segment ("{id}" any one).
	Target string
	// IfField matches only calls whose JSON body has a member of that name at any depth.
	IfField string
	// StuckFor keeps the asynchronous requests the matching calls create RUNNING (their
	// resources BUSY) that long instead of Options.RunDuration; with Target "requests", every
	// call that creates one matches.
	StuckFor time.Duration
	// Status, when set, is answered instead of handling the call: 429 and 503 carry
	// RetryAfter (seconds or an HTTP date) when set, a 3xx carries Location (default: a path
	// on the simulator that serves nothing), any other status an IONOS error body.
	Status     int
	RetryAfter string
	Location   string
	// Applied makes the simulator handle the call (the write takes effect) and then answer
	// Status anyway: a write whose outcome the client cannot know.
	Applied bool
	// Latency delays the answer.
	Latency time.Duration
	// FailRequest accepts the write but ends its asynchronous request FAILED (a create is
	// rolled back, a delete leaves the resource in place).
	FailRequest bool
	Times       int

	used int
}

// InjectFault adds f to the simulator's faults.
func (s *Sim) InjectFault(f Fault) {
	s.mu.Lock()
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// ClearFaults removes every fault and every StickBusy mark.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	s.faults = nil
	s.stuck = map[string]bool{}
	s.mu.Unlock()
}

// StickBusy keeps the resource with id (a data center, server, NIC, volume, security group,
// NAT gateway, ALB, forwarding rule or target group) in metadata.state BUSY, and every request
// touching it RUNNING, until ClearFaults: a provider operation that never finishes.
func (s *Sim) StickBusy(id string) {
	s.mu.Lock()
	s.stuck[id] = true
	s.mu.Unlock()
}

// matchFault returns the first fault (without StuckFor) matching a call, counting its use, and
// the StuckFor of the longest stuck fault that matches it (each counting its use).
func (s *Sim) matchFault(method, path string, body []byte) (*Fault, time.Duration) {
	var first *Fault
	var stuck time.Duration
	for _, f := range s.faults {
		if f.Times > 0 && f.used >= f.Times {
			continue
		}
		target := f.Target
		if f.StuckFor > 0 && target == "requests" {
			target = "*"
		}
		if f.Method != "" && f.Method != method || !strings.HasPrefix(path, f.Path) || !matchesTarget(target, path) ||
			f.IfField != "" && !hasMember(body, f.IfField) {
			continue
		}
		switch {
		case f.StuckFor > 0 && method != http.MethodGet:
			f.used++
			stuck = max(stuck, f.StuckFor)
		case f.StuckFor == 0 && first == nil:
			f.used++
			c := *f
			first = &c
		}
	}
	return first, stuck
}

// bodyFaults reports whether a fault looks at request bodies. Callers hold s.mu.
func (s *Sim) bodyFaults() bool {
	for _, f := range s.faults {
		if f.IfField != "" {
			return true
		}
	}
	return false
}

type ctxKey int

const (
	failRequestKey ctxKey = 1
	stuckForKey    ctxKey = 2
)

// ServeHTTP serves one API call: it counts it, advances asynchronous requests, checks the
// credential, applies any fault and then handles the call.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		s.opts.Logger.Debug("ionossim", "method", r.Method, "path", r.URL.Path, "status", sw.status)
	}()
	s.mu.Lock()
	s.counts[r.Method+" "+r.URL.Path]++
	var body []byte
	if s.bodyFaults() && r.Body != nil { // read once here, handed on to the handler
		s.mu.Unlock()
		body, _ = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
	}
	f, stuck := s.matchFault(r.Method, strings.TrimPrefix(r.URL.Path, BasePath), body)
	s.mu.Unlock()
	s.Advance()
	if stuck > 0 {
		r = r.WithContext(context.WithValue(r.Context(), stuckForKey, stuck))
	}

	if !s.authorized(r) {
		writeError(sw, http.StatusUnauthorized, "315", "Unauthorized")
		return
	}
	if f != nil && f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	if f != nil && f.FailRequest {
		r = r.WithContext(context.WithValue(r.Context(), failRequestKey, true))
	}
	if f == nil || f.Status == 0 {
		s.mux.ServeHTTP(sw, r)
		return
	}
	if f.Applied {
		s.mux.ServeHTTP(&discardWriter{h: http.Header{}}, r)
	}
	switch {
	case f.Status >= 300 && f.Status < 400:
		loc := f.Location
		if loc == "" {
			loc = "http://" + r.Host + BasePath + "/redirected"
		}
		sw.Header().Set("Location", loc)
		sw.WriteHeader(f.Status)
	default:
		if f.RetryAfter != "" {
			sw.Header().Set("Retry-After", f.RetryAfter)
		}
		writeError(sw, f.Status, "0", fmt.Sprintf("simulated fault: %d %s", f.Status, http.StatusText(f.Status)))
	}
}

func (s *Sim) authorized(r *http.Request) bool {
	if _, _, ok := r.BasicAuth(); ok && s.opts.Authorize == nil {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	return s.opts.Authorize == nil || s.opts.Authorize(tok)
}

// AcceptToken returns an Options.Authorize that accepts exactly token, compared in constant
// time.
func AcceptToken(token string) func(string) bool {
	return func(bearer string) bool {
		return subtle.ConstantTimeCompare([]byte(bearer), []byte(token)) == 1
	}
}

// Advance moves every asynchronous request forward to the clock's current time, applies what
// completed requests do, and runs the OnRunning hook for servers that reached RUNNING. Every
// API call advances the simulator first; Listen also advances it every 10 ms.
func (s *Sim) Advance() {
	s.mu.Lock()
	events := s.advanceLocked(s.now())
	s.mu.Unlock()
	if s.opts.OnRunning == nil {
		return
	}
	for _, e := range events {
		s.opts.OnRunning(e.dc, e.srv)
	}
}

type runningEvent struct {
	dc  string
	srv Server
}

// ---- responses ----

type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first status written.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// discardWriter swallows a response (Fault.Applied).
type discardWriter struct{ h http.Header }

// Header, Write and WriteHeader implement http.ResponseWriter by discarding.
func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// apiError is the IONOS error body: httpStatus and a list of messages (errorCode, message).
type apiError struct {
	HTTPStatus int          `json:"httpStatus"`
	Messages   []apiMessage `json:"messages"`
}

type apiMessage struct {
	ErrorCode string `json:"errorCode"`
	Message   string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{HTTPStatus: status, Messages: []apiMessage{{ErrorCode: code, Message: msg}}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
