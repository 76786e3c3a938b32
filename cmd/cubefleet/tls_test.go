package main_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// TestTLSProcess drives the built binary: `cubefleet server --tls-cert --tls-key` with
// --internal-listen serves HTTPS on both listeners; the CLI works with --ca-file and without
// it fails with exit 1 and a message naming the URL and --ca-file; plain HTTP gets a 400 on
// both listeners; and replacing the certificate files (as an operator rotating them would) is
// seen by the next connection, with no restart.
func TestTLSProcess(t *testing.T) {
	dir := t.TempDir()
	ca, files := tlstest.Write(t, dir)
	internal := freeAddr(t)
	c := startServerCA(t, "", files.CA, "--tls-cert", files.Cert, "--tls-key", files.Key, "--internal-listen", internal)
	if !strings.HasPrefix(c.url, "https://") {
		t.Fatalf("url %s", c.url)
	}
	if out := c.ok("fleet", "status", "--tenant", "root"); out == "" {
		t.Error("fleet status printed nothing")
	}
	if out := c.ok("keys", "list", "--tenant", "root"); !strings.Contains(out, "admin") {
		t.Errorf("keys list:\n%s", out)
	}

	// Without --ca-file.
	cmd := exec.Command(c.bin, "--url", c.url, "--token-file", filepath.Join(c.dataDir, "admin.token"), "keys", "list", "--tenant", "root")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "CUBEFLEET_CA_FILE=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 ||
		!strings.Contains(stderr.String(), "error: the TLS certificate of the control plane at "+c.url+" does not verify") ||
		!strings.Contains(stderr.String(), "pass --ca-file FILE") {
		t.Errorf("keys list without --ca-file: %v\n%s", err, stderr.String())
	}

	// Plain HTTP on both listeners.
	for _, addr := range []string{strings.TrimPrefix(c.url, "https://"), internal} {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("plain HTTP to %s: %v", addr, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
			t.Errorf("plain HTTP to %s: %d %q", addr, resp.StatusCode, body)
		}
	}
	// HTTPS on the internal listener: the node-agent routes.
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + internal + nodeapi.PathReadyz)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("readyz on the internal listener: %d", resp.StatusCode)
	}

	// Rotation: a new pair replaces the files; new connections get it within a few seconds.
	serial := func(addr string) string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
		if err != nil {
			t.Fatalf("TLS dial %s: %v", addr, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial(internal)
	next := ca.WriteServer(t, files.Cert, files.Key, "rotated").SerialNumber.String()
	if next == before {
		t.Fatal("the test CA issued the same serial twice")
	}
	for _, addr := range []string{internal, strings.TrimPrefix(c.url, "https://")} {
		deadline := time.Now().Add(15 * time.Second)
		for got := serial(addr); got != next; got = serial(addr) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still presents %s after the rotation, want %s", addr, got, next)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c.ok("tenants", "list") // the CLI still connects
}
