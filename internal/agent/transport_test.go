package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestScrubNetError(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"read tcp 127.0.0.1:33616->127.0.0.1:3010: read: connection reset by peer", "read tcp 127.0.0.1:3010: read: connection reset by peer"},
		{"write tcp 10.0.0.5:41000->10.0.0.1:3010: write: broken pipe", "write tcp 10.0.0.1:3010: write: broken pipe"},
		{"read tcp [::1]:5555->[::1]:3010: i/o timeout", "read tcp [::1]:3010: i/o timeout"},
		{"dial tcp 10.0.0.1:3010: connect: connection refused", "dial tcp 10.0.0.1:3010: connect: connection refused"},
		{"EOF", "EOF"},
	} {
		err := scrubNetError(&net.OpError{Op: "x", Err: errors.New(tc.in)})
		got := strings.TrimPrefix(err.Error(), "x: ")
		if got != tc.want {
			t.Errorf("scrubNetError(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// errors.Is still sees the cause.
	err := scrubNetError(&net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 33616},
		Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3010}, Err: syscall.ECONNRESET})
	if err.Error() != "read tcp 127.0.0.1:3010: connection reset by peer" || !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("scrubbed %q, is ECONNRESET %v", err, errors.Is(err, syscall.ECONNRESET))
	}
}

// resetConn answers a request by resetting its connection (RST, not FIN).
func resetConn(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// TestTransportErrorLoggedOnce: a status report that fails with the same transport error
// every period is logged once, although every attempt comes from another local port.
func TestTransportErrorLoggedOnce(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1")
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "a status report", func() bool { return len(cp.CallsTo("/status")) > 0 })
	cp.SetRaw(func(w http.ResponseWriter, req *http.Request) bool {
		if !strings.HasSuffix(req.URL.Path, "/status") {
			return false
		}
		cp.Record(req, nil)
		resetConn(w)
		return true
	})
	n := len(cp.CallsTo("/status"))
	testkit.WaitFor(t, 10*time.Second, "6 reset status reports", func() bool { return len(cp.CallsTo("/status")) >= n+6 })
	testkit.WaitFor(t, 10*time.Second, "a failing health", func() bool { return r.a.Health().State == StateFailing })
	logs := r.logs.String()
	if n := strings.Count(logs, `"msg":"status report failed"`); n != 1 {
		t.Errorf("%d log lines for the same failure, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs, "->") || strings.Contains(r.a.Health().Error, "->") {
		t.Errorf("the local address is in the error:\n%s", logs)
	}
	if strings.Contains(logs, "speaks HTTPS") {
		t.Errorf("a plain-HTTP server's reset was taken for TLS:\n%s", logs)
	}
}

// TestPlainHTTPToTLSServer: an agent given http:// for an HTTPS control plane is refused at
// every attempt (a 400 or a reset, depending on timing); it says once what to set, and its
// health says it too.
func TestPlainHTTPToTLSServer(t *testing.T) {
	srv, _ := agenttest.TLSServer(t, "", http.NotFoundHandler())
	plain := "http://" + srv.Listener.Addr().String()
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", plain))
	testkit.WaitFor(t, 10*time.Second, "5 registration attempts", func() bool { return len(r.sleeps()) >= 5 })
	if h := r.a.Health(); h.State != StateRegistering || !strings.Contains(h.Error, hintHTTPS) {
		t.Errorf("health %+v, want the hint %q", h, hintHTTPS)
	}
	logs := r.logs.String()
	if n := strings.Count(logs, `"msg":"registration failed; retrying"`); n != 1 {
		t.Errorf("%d log lines for %d identical failures, want 1:\n%s", n, len(r.sleeps()), logs)
	}
	if !strings.Contains(logs, "the control plane speaks HTTPS: set CUBEFLEET_CONTROL_PLANE_TLS=1 (and CUBEFLEET_CA_FILE") {
		t.Errorf("the log does not say what to set:\n%s", logs)
	}

	// The same with a reset to a large request and to a small one (whichever the server does).
	det := &tlsDetector{}
	for _, size := range []int{10, 200_000} {
		wc := newWireClient([]string{plain}, &http.Client{}, det)
		_, err := wc.post(context.Background(), nodeapi.StatusPath("127.0.0.1"), "", &nodeapi.StatusRequest{RequestID: strings.Repeat("x", size)})
		if err == nil || !strings.Contains(err.Error(), hintHTTPS) || strings.Contains(err.Error(), "->") {
			t.Errorf("a %d-byte request: %v", size, err)
		}
	}
}
