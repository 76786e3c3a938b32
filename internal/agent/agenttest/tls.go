package agenttest

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// TLSServer starts an HTTPS server for h on addr (127.0.0.1:0 when empty) with a certificate
// for 127.0.0.1 and localhost signed by a new test CA, until the test ends, and returns it and
// the pool of CAs that trusts it (the system's plus the test CA, as Config.RootCAs holds them).
// Handshake errors are not logged: they are what such tests provoke.
func TLSServer(t testing.TB, addr string, h http.Handler) (*httptest.Server, *x509.CertPool) {
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
	return srv, roots
}
