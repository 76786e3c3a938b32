package capool_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// TestClientTrustsTheBundle: a client with ClientConfig(Load(ca.pem)) reaches a TLS server on
// 127.0.0.1 whose certificate that CA signed; one with the system's CAs alone does not, and
// neither reaches a server that speaks only TLS 1.1.
func TestClientTrustsTheBundle(t *testing.T) {
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	defer srv.Close()

	roots, err := capool.Load(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	get := func(cfg *tls.Config) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(capool.ClientConfig(roots)); err != nil {
		t.Fatalf("with the CA bundle: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	if err := get(capool.ClientConfig(nil)); !errors.As(err, &unknown) {
		t.Errorf("with the system's CAs only: %v, want an unknown authority", err)
	}

	old := httptest.NewUnstartedServer(srv.Config.Handler)
	old.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MaxVersion: tls.VersionTLS11}
	old.Config.ErrorLog = srv.Config.ErrorLog
	old.StartTLS()
	defer old.Close()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: capool.ClientConfig(roots)}}
	if resp, err := hc.Get(old.URL); err == nil {
		resp.Body.Close()
		t.Error("the client spoke TLS 1.1")
	}
	if cfg := capool.ClientConfig(roots); cfg.MinVersion != tls.VersionTLS12 || cfg.InsecureSkipVerify {
		t.Errorf("ClientConfig = MinVersion %x, InsecureSkipVerify %v", cfg.MinVersion, cfg.InsecureSkipVerify)
	}
}

// TestLoadRefusals: a file without a PEM certificate is refused naming the file and what it
// must hold; a missing file is the os error.
func TestLoadRefusals(t *testing.T) {
	dir := t.TempDir()
	_, files := tlstest.Write(t, dir)
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{files.Key, junk, empty} {
		_, err := capool.Load(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+" holds no PEM certificate") || !strings.Contains(err.Error(), "BEGIN CERTIFICATE") {
			t.Errorf("Load(%s): %v", filepath.Base(path), err)
		}
	}
	if _, err := capool.Load(filepath.Join(dir, "missing.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}
