package client

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/tlstest"
)

// tlsAPI is fakeAPI's handler served over TLS on 127.0.0.1 with a certificate from a test CA;
// it returns the server and the CA's PEM file.
func tlsAPI(t *testing.T) (*httptest.Server, tlstest.Files) {
	t.Helper()
	_, files := tlstest.Write(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(apiHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, files
}

// TestCallTLS: with the CA file the client calls an https:// control plane; without it, or
// with another CA, the error names the URL and says to pass --ca-file; a plain http:// URL to
// an HTTPS server and an https:// URL to a plain one each say what to change.
func TestCallTLS(t *testing.T) {
	srv, files := tlsAPI(t)
	ctx := context.Background()
	none := env{"XDG_CONFIG_HOME": filepath.Join(t.TempDir(), "none")}.get
	tok := writePrivate(t, filepath.Join(t.TempDir(), "t.token"), testToken)

	c, err := Connect(Options{URL: srv.URL, TokenFile: tok, CAFile: files.CA, Getenv: none}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := c.Call(ctx, "echo", map[string]any{"tenantId": "root"}, &out); err != nil || out["tenantId"] != "root" {
		t.Fatalf("echo over TLS with the CA file: %v %v", out, err)
	}

	c, err = Connect(Options{URL: srv.URL, TokenFile: tok, Getenv: none}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Call(ctx, "echo", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "the TLS certificate of the control plane at "+srv.URL+" does not verify") ||
		!strings.Contains(err.Error(), "pass --ca-file FILE") || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Errorf("without the CA file: %v", err)
	}

	_, other := tlstest.Write(t, t.TempDir())
	c, err = Connect(Options{URL: srv.URL, TokenFile: tok, CAFile: other.CA, Getenv: none}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Call(ctx, "echo", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "does not verify against the system's CAs or "+other.CA) {
		t.Errorf("with another CA: %v", err)
	}

	plain := "http://" + strings.TrimPrefix(srv.URL, "https://")
	err = New(plain, testToken, nil).Call(ctx, "echo", nil, nil)
	if err == nil || !strings.Contains(err.Error(), plain+" serves HTTPS only: use https://") {
		t.Errorf("http:// to an HTTPS server: %v", err)
	}
	h := fakeAPI(t)
	secure := "https://" + strings.TrimPrefix(h.URL, "http://")
	err = New(secure, testToken, nil).Call(ctx, "echo", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "the control plane at "+secure+" does not speak TLS") {
		t.Errorf("https:// to a plain server: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), testToken) {
		t.Errorf("error %q contains the key", err)
	}
}

// TestResolveCAFile: --ca-file beats CUBEFLEET_CA_FILE, which beats ca_file in the config file
// (relative to the config file's directory); a file that cannot be read or holds no
// certificate is refused, naming it and where it came from.
func TestResolveCAFile(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "xdg", "cubefleet")
	tok := writePrivate(t, filepath.Join(dir, "t.token"), testToken)
	_, flagFiles := tlstest.Write(t, t.TempDir())
	_, envFiles := tlstest.Write(t, t.TempDir())
	_, cfgFiles := tlstest.Write(t, t.TempDir())
	os.MkdirAll(cfgDir, 0o700)
	ca, _ := os.ReadFile(cfgFiles.CA)
	os.WriteFile(filepath.Join(cfgDir, "ca.pem"), ca, 0o644)
	writePrivate(t, filepath.Join(cfgDir, "config.json"), `{"ca_file":"ca.pem"}`)
	xdg := filepath.Join(dir, "xdg")
	for _, c := range []struct {
		name       string
		opts       Options
		env        env
		want, from string
	}{
		{"flag wins", Options{CAFile: flagFiles.CA}, env{EnvCAFile: envFiles.CA}, flagFiles.CA, "--ca-file"},
		{"env beats config", Options{}, env{EnvCAFile: envFiles.CA}, envFiles.CA, EnvCAFile},
		{"config", Options{}, env{}, filepath.Join(cfgDir, "ca.pem"), "ca_file in " + filepath.Join(cfgDir, "config.json")},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env["XDG_CONFIG_HOME"] = xdg
			c.opts.Getenv, c.opts.TokenFile = c.env.get, tok
			s, err := Resolve(c.opts)
			if err != nil || s.CAFile != c.want || s.CAFileSource != c.from || s.RootCAs == nil {
				t.Errorf("Resolve = %+v, %v; want %s from %s", s, err, c.want, c.from)
			}
		})
	}
	none := env{"XDG_CONFIG_HOME": filepath.Join(dir, "none")}.get
	if s, err := Resolve(Options{TokenFile: tok, Getenv: none}); err != nil || s.CAFile != "" || s.RootCAs != nil {
		t.Errorf("no CA file: %+v %v", s, err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("hello\n"), 0o644)
	for _, c := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.pem"), "CA file from --ca-file: open " + filepath.Join(dir, "missing.pem") + ": no such file"},
		{garbage, "CA file from --ca-file: " + garbage + " holds no PEM certificate"},
		{flagFiles.Key, "holds no PEM certificate"},
	} {
		if _, err := Resolve(Options{TokenFile: tok, CAFile: c.file, Getenv: none}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CA file %s: %v, want %q", c.file, err, c.want)
		}
	}
}

// TestDefaultClientRefusesRedirectsOverTLS: the client Connect builds for a CA file still
// refuses redirects.
func TestDefaultClientRefusesRedirectsOverTLS(t *testing.T) {
	srv, files := tlsAPI(t)
	tok := writePrivate(t, filepath.Join(t.TempDir(), "t.token"), testToken)
	c, err := Connect(Options{URL: srv.URL, TokenFile: tok, CAFile: files.CA, Getenv: env{}.get}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Call(context.Background(), "redirect", nil, nil); err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("redirect over TLS: %v, want a refusal", err)
	}
}
