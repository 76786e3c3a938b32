package server

import (
	"context"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// errorLogEvery is how often, at most, the HTTP servers' own error lines of one kind (TLS
// handshake failures, for one) are logged; the rest are counted into the next line.
const errorLogEvery = time.Minute

// newErrorLog returns the *log.Logger an http.Server writes its own errors to (TLS handshake
// failures, malformed requests): each line goes to the server's log at level WARN, but lines of
// one kind (the text before " from ", e.g. "http: TLS handshake error") are logged at most once
// per errorLogEvery, the next one saying how many were left out, so 10,000 nodes that do not
// trust the certificate cannot flood the log.
func newErrorLog(l *slog.Logger, now func() time.Time) *log.Logger {
	return log.New(&errorLogWriter{log: l, now: now, last: map[string]errorLogKind{}}, "", 0)
}

// errorLogWriter rate-limits the lines of newErrorLog.
type errorLogWriter struct {
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	last map[string]errorLogKind
}

// errorLogKind is when a kind of line was last logged and how many were left out since.
type errorLogKind struct {
	at      time.Time
	skipped int
}

// maxErrorLogKinds bounds the kinds remembered; beyond it the oldest are forgotten.
const maxErrorLogKinds = 64

// Write takes one line of the http.Server's log and logs it unless a line of its kind was
// logged less than errorLogEvery ago. It never fails.
func (w *errorLogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	kind, _, _ := strings.Cut(line, " from ")
	now := w.now()
	w.mu.Lock()
	k, seen := w.last[kind]
	if seen && now.Sub(k.at) < errorLogEvery {
		k.skipped++
		w.last[kind] = k
		w.mu.Unlock()
		return len(p), nil
	}
	if !seen && len(w.last) >= maxErrorLogKinds {
		for old, v := range w.last {
			if now.Sub(v.at) >= errorLogEvery {
				delete(w.last, old)
			}
		}
	}
	w.last[kind] = errorLogKind{at: now}
	w.mu.Unlock()
	attrs := []any{"error", line}
	if k.skipped > 0 {
		attrs = append(attrs, "similar_not_logged", k.skipped, "in", now.Sub(k.at).Round(time.Second).String())
	}
	w.log.Log(context.Background(), slog.LevelWarn, "http server", attrs...)
	return len(p), nil
}
