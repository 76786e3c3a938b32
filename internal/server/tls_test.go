package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// tlsClient returns an HTTP client trusting only ca.
func tlsClient(ca *tlstest.CA) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
}

// peerSerial opens a new TLS connection to addr trusting ca and returns the serial number of
// the certificate the server presented.
func peerSerial(t *testing.T, ca *tlstest.CA, addr string) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSListeners: with TLSCert and TLSKey both listeners serve HTTPS only (TLS 1.2 or
// later), URL and InternalURL say https, and a plain HTTP client gets a clean 400 that says
// what is wrong.
func TestTLSListeners(t *testing.T) {
	ca, files := tlstest.Write(t, t.TempDir())
	e := mustStart(t, storetest.SQLite(t), func(c *Config) {
		allowLoopback(c)
		c.InternalListen = "127.0.0.1:0"
		c.TLSCert, c.TLSKey = files.Cert, files.Key
	})
	in := e.srv.InternalURL()
	if !strings.HasPrefix(e.url, "https://127.0.0.1:") || !strings.HasPrefix(in, "https://127.0.0.1:") || in == e.url || !e.srv.TLS() {
		t.Fatalf("URL %s, InternalURL %s, TLS %v", e.url, in, e.srv.TLS())
	}
	hc := tlsClient(ca)
	for _, u := range []string{e.url + "/readyz", in + nodeapi.PathReadyz, in + "/healthz"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("GET %s: %d, TLS %+v", u, resp.StatusCode, resp.TLS)
		}
	}
	// The API through our client, trusting the CA.
	c := client.New(e.url, e.admin, tlsClient(ca))
	var tenants struct{ Items []any }
	if err := c.Call(context.Background(), "iam.tenants.list", map[string]any{}, &tenants); err != nil || len(tenants.Items) == 0 {
		t.Errorf("iam.tenants.list over TLS: %v %+v", err, tenants)
	}

	// Plain HTTP on either listener: 400, and the body says why; the log stays quiet about it.
	for _, u := range []string{e.url, in} {
		plain := "http://" + strings.TrimPrefix(u, "https://") + "/healthz"
		resp, err := http.Get(plain)
		if err != nil {
			t.Fatalf("plain GET %s: %v", plain, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "HTTP request to an HTTPS server") {
			t.Errorf("plain GET %s: %d %q", plain, resp.StatusCode, body)
		}
	}
	// TLS 1.1 is refused.
	addr := strings.TrimPrefix(e.url, "https://")
	if conn, err := tls.Dial("tcp", addr, &tls.Config{MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true}); err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	// A client that does not trust the CA fails its handshake.
	if _, err := http.Get(e.url + "/healthz"); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Errorf("GET without the CA: %v, want a certificate verification error", err)
	}
	if !strings.Contains(e.log.String(), `"tls":true`) || !strings.Contains(e.log.String(), `"url":"`+e.url+`"`) {
		t.Errorf("the ready line lacks the scheme:\n%s", e.log.String())
	}
}

// TestTLSRotation: replacing the certificate files is picked up by the next connection; a
// replacement that does not load keeps the previous pair, and is logged once.
func TestTLSRotation(t *testing.T) {
	dir := t.TempDir()
	ca, files := tlstest.Write(t, dir)
	e := mustStart(t, storetest.SQLite(t), func(c *Config) {
		c.TLSCert, c.TLSKey = files.Cert, files.Key
		c.TLSReloadEvery = 20 * time.Millisecond
	})
	addr := strings.TrimPrefix(e.url, "https://")
	first := peerSerial(t, ca, addr)

	// A new pair from the same CA: new connections see it.
	next := ca.WriteServer(t, files.Cert, files.Key, "rotated").SerialNumber.String()
	waitSerial(t, ca, addr, next)
	if next == first {
		t.Fatal("the test CA issued the same serial twice")
	}
	// A connection kept open across a rotation goes on working.
	hc := tlsClient(ca)
	getOK(t, hc, e.url+"/healthz")
	third := ca.WriteServer(t, files.Cert, files.Key, "third").SerialNumber.String()
	getOK(t, hc, e.url+"/healthz")
	waitSerial(t, ca, addr, third)

	// A certificate that does not match the key: the previous pair stays, logged once.
	_, otherCert, _ := ca.Issue(t, "mismatched")
	if err := os.WriteFile(files.Cert+".new", otherCert, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(files.Cert+".new", files.Cert); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the files are looked at on handshakes: a failure is logged on the second look
		if got := peerSerial(t, ca, addr); got != third {
			t.Fatalf("after a bad rotation the server presents %s, want the previous %s", got, third)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(e.log.String(), "do not load; still serving the previous certificate"); n != 1 {
		t.Errorf("the failed reload was logged %d times, want once:\n%s", n, e.log.String())
	}
	// A key that becomes readable by others is refused the same way.
	fourth := ca.WriteServer(t, files.Cert, files.Key, "fourth").SerialNumber.String()
	waitSerial(t, ca, addr, fourth)
	os.Chmod(files.Key, 0o644)
	ca.WriteServer(t, files.Cert, filepath.Join(dir, "unused.key"), "fifth") // only the certificate changes
	for range 3 {                                                            // the files are looked at on handshakes: a failure is logged on the second look
		if got := peerSerial(t, ca, addr); got != fourth {
			t.Fatalf("with a key of mode 0644 the server presents %s, want the previous %s", got, fourth)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(e.log.String(), "chmod 600 "+files.Key) {
		t.Errorf("the log does not say how to fix the key's mode:\n%s", e.log.String())
	}
}

func waitSerial(t *testing.T, ca *tlstest.CA, addr, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := peerSerial(t, ca, addr)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still presents %s, want %s", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getOK(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

// TestTLSStartRefusals: a key file others can read, a pair that does not match, a missing file
// and half the flags each fail New before anything is written, naming the files and never
// showing the key.
func TestTLSStartRefusals(t *testing.T) {
	dir := t.TempDir()
	ca, files := tlstest.Write(t, dir)
	key, err := os.ReadFile(files.Key)
	if err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose.key")
	if err := os.WriteFile(loose, key, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o644)
	_, _, otherKey := ca.Issue(t, "other")
	other := filepath.Join(dir, "other.key")
	if err := privatefile.Write(other, otherKey); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o644)
	for _, c := range []struct {
		name       string
		cert, key  string
		want       []string
		wantUnsafe bool
	}{
		{"key mode 0644", files.Cert, loose, []string{loose, "mode 0644", "chmod 600 " + loose}, true},
		{"mismatched pair", files.Cert, other, []string{files.Cert, other, "not a usable pair"}, false},
		{"not a certificate", garbage, files.Key, []string{garbage, files.Key, "not a usable pair"}, false},
		{"missing certificate", filepath.Join(dir, "missing.pem"), files.Key, []string{"missing.pem", "--tls-cert"}, false},
		{"only the certificate", files.Cert, "", []string{"--tls-key is missing"}, false},
		{"only the key", "", files.Key, []string{"--tls-cert is missing"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			_, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: data, TLSCert: c.cert, TLSKey: c.key, Dev: true},
				slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if c.wantUnsafe != errors.Is(err, privatefile.ErrUnsafe) {
				t.Errorf("errors.Is(%v, ErrUnsafe) = %v", err, !c.wantUnsafe)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") || containsLine(err.Error(), key) || containsLine(err.Error(), otherKey) {
				t.Errorf("the error shows key material: %v", err)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the data dir was created: %v", err)
			}
		})
	}
}

// containsLine reports whether s holds any base64 line of the PEM block pem.
func containsLine(s string, pem []byte) bool {
	sc := bufio.NewScanner(strings.NewReader(string(pem)))
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "-----") && len(line) > 16 && strings.Contains(s, line[:16]) {
			return true
		}
	}
	return false
}
