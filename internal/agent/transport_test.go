package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/tlstest"
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
	cp := newFakeCP(t, "cfj_join1")
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", cp.srv.URL))
	waitFor(t, "a status report", func() bool { return len(cp.callsTo("/status")) > 0 })
	cp.mu.Lock()
	cp.raw = func(w http.ResponseWriter, req *http.Request) bool {
		if !strings.HasSuffix(req.URL.Path, "/status") {
			return false
		}
		cp.record(req, nil)
		resetConn(w)
		return true
	}
	cp.mu.Unlock()
	n := len(cp.callsTo("/status"))
	waitFor(t, "6 reset status reports", func() bool { return len(cp.callsTo("/status")) >= n+6 })
	waitFor(t, "a failing health", func() bool { return r.a.Health().State == StateFailing })
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

// tlsServer starts an HTTPS server on addr (127.0.0.1:0 when empty) with a certificate for
// 127.0.0.1 and localhost signed by a new test CA, and returns it and the CA's pool.
func tlsServer(t *testing.T, addr string, h http.Handler) (*httptest.Server, *Config) {
	t.Helper()
	_, files := tlstest.Write(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake errors are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots, err := capool.Load(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	return srv, &Config{RootCAs: roots, CAFile: files.CA}
}

// TestPlainHTTPToTLSServer: an agent given http:// for an HTTPS control plane is refused at
// every attempt (a 400 or a reset, depending on timing); it says once what to set, and its
// health says it too.
func TestPlainHTTPToTLSServer(t *testing.T) {
	srv, _ := tlsServer(t, "", http.NotFoundHandler())
	plain := "http://" + srv.Listener.Addr().String()
	r := startAgent(t, testConfig(t.TempDir(), "cfj_join1", plain))
	waitFor(t, "5 registration attempts", func() bool { return len(r.sleeps()) >= 5 })
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

// TestCheckHints: the firewall hint goes only with errors that mean "not reachable"; an HTTP
// answer or a TLS failure gets its own advice.
func TestCheckHints(t *testing.T) {
	const firewall = "check the firewall"
	refused := "http://" + closedAddr(t)
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"starting"}`)
	}))
	t.Cleanup(unavailable.Close)
	ready := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"ret":{"ret_code":200}}`) })
	good, trust := tlsServer(t, "", ready)
	// A certificate for 127.0.0.1 served on 127.0.0.3: it does not name the address used.
	other, _ := tlsServer(t, "127.0.0.3:0", ready)
	for _, tc := range []struct {
		name     string
		endpoint string
		trust    bool
		want     []string
		not      []string
	}{
		{"connection refused", refused, false, []string{"connection refused", firewall}, nil},
		{"an HTTP answer", unavailable.URL, false, []string{"HTTP 503 starting"}, []string{firewall}},
		{"plain HTTP to HTTPS", "http://" + good.Listener.Addr().String(), true, []string{hintHTTPS}, []string{firewall}},
		{"unknown CA", good.URL, false, []string{"certificate signed by unknown authority", "set CUBEFLEET_CA_FILE"}, []string{firewall}},
		{"name mismatch", strings.Replace(other.URL, "127.0.0.1", "127.0.0.3", 1), true,
			[]string{"x509: certificate is valid for 127.0.0.1, not 127.0.0.3", "the control plane's TLS certificate does not name the address used, 127.0.0.3: reissue it"},
			[]string{firewall, "CUBEFLEET_CA_FILE"}},
		{"ok", good.URL, true, []string{"ready"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), "", tc.endpoint)
			if tc.trust {
				cfg.RootCAs = trust.RootCAs
			}
			results, _ := Check(context.Background(), cfg, CheckOptions{})
			d := results[1].Detail
			for _, w := range tc.want {
				if !strings.Contains(d, w) {
					t.Errorf("%s\nwant it to contain %q", results[1], w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(d, w) {
					t.Errorf("%s\nwant it not to contain %q", results[1], w)
				}
			}
		})
	}
}
