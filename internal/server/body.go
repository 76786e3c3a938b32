package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// Request bodies of the API (POST /api/v1/<method>) cost memory only to callers with a valid
// key: the key is checked from the request's head, and the body is read after that, under the
// method's cap (api.Method.MaxBody), decoded as it arrives (strictjson.Read), paid for from
// one budget of buffered body bytes shared by every request, and only while it keeps arriving
// at a minimum rate.

// Defaults of the request body limits (Config.BodyBudget, BodyMinRate, BodyRateGrace).
const (
	// DefaultBodyBudget is the budget of buffered API request body bytes (64 MiB).
	DefaultBodyBudget = 64 << 20
	// DefaultBodyMinRate is the minimum rate of a request body, in bytes per second.
	DefaultBodyMinRate = 1024
	// DefaultBodyRateGrace is how long any part of a body may take before the rate counts.
	DefaultBodyRateGrace = 5 * time.Second
)

// bodyChunk bounds one read of a body of unknown length, which is paid for as it arrives.
const bodyChunk = 32 << 10

// errBodyBudget is the answer to a body that does not fit the budget.
var errBodyBudget = &cubefleet.Error{Code: cubefleet.CodeResourceExhausted,
	Message: "the server holds as many request body bytes as it may (--api-body-budget): retry shortly"}

// errBodyRate is a body that arrived too slowly; the connection is closed after the answer.
var errBodyRate = errors.New("the request body arrived too slowly")

// bodyBudget is the budget of buffered request body bytes.
type bodyBudget struct {
	sem   *semaphore.Weighted
	size  int64
	inUse atomic.Int64 // bytes taken, for the metrics
}

func newBodyBudget(size int64) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(size), size: size}
}

// collectors returns cubefleet_api_body_budget_bytes (the budget's size) and
// cubefleet_api_body_bytes_in_use (what requests hold now).
func (b *bodyBudget) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cubefleet_api_body_budget_bytes",
			Help: "The budget of buffered API request body bytes (--api-body-budget)."}, func() float64 { return float64(b.size) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cubefleet_api_body_bytes_in_use",
			Help: "API request body bytes held by requests now, out of cubefleet_api_body_budget_bytes."}, func() float64 { return float64(b.inUse.Load()) }),
	}
}

// take takes n bytes if they are free now.
func (b *bodyBudget) take(n int64) bool {
	if n <= 0 {
		return true
	}
	if !b.sem.TryAcquire(n) {
		return false
	}
	b.inUse.Add(n)
	return true
}

func (b *bodyBudget) give(n int64) {
	if n > 0 {
		b.inUse.Add(-n)
		b.sem.Release(n)
	}
}

// bodyReader reads a request body for strictjson.Read: it pays for what it reads from the
// budget (all of a Content-Length at once, else a chunk at a time) and holds the body to the
// minimum rate: in every window of grace, at least rate × grace bytes, or the rest of the body,
// must arrive, or the read fails on a deadline. Credit never piles up: a body that was quick at
// first may not stall later.
type bodyReader struct {
	r        io.Reader
	rc       *http.ResponseController
	budget   *bodyBudget
	held     int64 // bytes taken from the budget
	prepaid  bool  // held covers the whole body (its Content-Length)
	rate     int64 // bytes per second; <= 0: no rate
	grace    time.Duration
	window   time.Time // when the current window started
	inWindow int64     // bytes read in it
	err      error     // the budget's or the rate's refusal
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if !b.prepaid {
		p = p[:min(len(p), bodyChunk)]
		if !b.budget.take(int64(len(p))) {
			b.err = errBodyBudget
			return 0, b.err
		}
		b.held += int64(len(p))
	}
	if b.rate > 0 {
		now := time.Now()
		if b.window.IsZero() || float64(b.inWindow) >= float64(b.rate)*b.grace.Seconds() {
			b.window, b.inWindow = now, 0
		}
		b.rc.SetReadDeadline(b.window.Add(b.grace))
	}
	n, err := b.r.Read(p)
	b.inWindow += int64(n)
	if !b.prepaid {
		b.budget.give(int64(len(p) - n))
		b.held -= int64(len(p) - n)
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		b.err = errBodyRate
		return n, b.err
	}
	return n, err
}

// readBody reads the body of a request to a method that takes at most limit bytes, for a
// caller already authenticated. It returns the body and a release func that gives its bytes
// back to the budget (call it when the body is no longer used, even on an error). Errors:
// PAYLOAD_TOO_LARGE (a Content-Length over limit, answered before reading), RESOURCE_EXHAUSTED
// (the budget), INVALID_INPUT (strictjson, or the rate: the connection is then closed).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, func(), error) {
	br := &bodyReader{r: r.Body, rc: http.NewResponseController(w), budget: s.budget, rate: s.cfg.BodyMinRate, grace: s.cfg.BodyRateGrace}
	release := func() { br.budget.give(br.held) }
	if r.ContentLength > limit {
		s.metrics.bodyRefusals.WithLabelValues("too_large").Inc()
		closeUnread(w)
		return nil, release, cubefleet.Errorf(cubefleet.CodePayloadTooLarge, "the request body is %d bytes; %s takes at most %d", r.ContentLength, r.PathValue("method"), limit)
	}
	if r.ContentLength > 0 {
		if !s.budget.take(r.ContentLength) {
			s.metrics.bodyRefusals.WithLabelValues("budget").Inc()
			closeUnread(w)
			return nil, release, errBodyBudget
		}
		br.held, br.prepaid = r.ContentLength, true
	}
	body, err := strictjson.Read(br, limit, r.ContentLength)
	if br.rate > 0 {
		br.rc.SetReadDeadline(time.Time{}) // the handler may outlast the window
	}
	switch {
	case err == nil:
		return body, release, nil
	case br.err == errBodyBudget:
		s.metrics.bodyRefusals.WithLabelValues("budget").Inc()
		closeUnread(w)
		return nil, release, errBodyBudget
	case br.err == errBodyRate:
		s.metrics.bodyRefusals.WithLabelValues("too_slow").Inc()
		closeUnread(w)
		return nil, release, cubefleet.Invalid("", "the request body arrived slower than %d bytes a second; the connection is closed: send the body as fast as you send its head", br.rate)
	case cubefleet.IsCode(err, cubefleet.CodePayloadTooLarge):
		s.metrics.bodyRefusals.WithLabelValues("too_large").Inc()
		closeUnread(w)
	case !cubefleet.IsCode(err, cubefleet.CodeInvalidInput):
		// The connection broke (the client went away): nothing of it is worth reading.
		closeUnread(w)
		return nil, release, cubefleet.Invalid("", "reading the request body: %v", err)
	}
	return nil, release, err
}

// unreadGrace is how long the server goes on reading a refused request's unread body after the
// answer (up to 256 KiB, net/http's limit; a larger rest is not read at all), so that a client
// still sending it reads the answer instead of a reset connection.
const unreadGrace = time.Second

// closeUnread makes the answer to a request whose body is left unread the connection's last:
// the server does not read it to find a next request, and drains at most what arrives within
// unreadGrace.
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(unreadGrace))
}
