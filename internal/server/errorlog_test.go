package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestErrorLogRateLimit: the HTTP servers' own error lines are logged once a minute per kind,
// the next one counting those left out; another kind is logged at once.
func TestErrorLogRateLimit(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := newErrorLog(slog.New(slog.NewTextHandler(&out, nil)), func() time.Time { return now })
	for i := range 1000 {
		l.Printf("http: TLS handshake error from 127.0.0.%d:4000: remote error: tls: bad certificate", i%250)
	}
	l.Printf("http: superfluous response.WriteHeader call from x")
	now = now.Add(61 * time.Second)
	l.Printf("http: TLS handshake error from 127.0.0.1:4000: EOF")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines logged, want 3:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[0], "bad certificate") || !strings.Contains(lines[1], "superfluous") {
		t.Errorf("first lines:\n%s", out.String())
	}
	if !strings.Contains(lines[2], "similar_not_logged=999") || !strings.Contains(lines[2], "EOF") {
		t.Errorf("the line after a minute does not count the 999 left out:\n%s", lines[2])
	}
}
