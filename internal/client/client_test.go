package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/privatefile"
)

const testToken = "cfk_test-token-never-in-errors"

// fakeAPI serves apiHandler on 127.0.0.1.
func fakeAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(apiHandler())
	t.Cleanup(srv.Close)
	return srv
}

// apiHandler answers with the error and result bodies the tests need.
func apiHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/api/v1/echo":
			if auth != "Bearer "+testToken {
				w.WriteHeader(401)
				io.WriteString(w, `{"error":{"code":"UNAUTHENTICATED","message":"no credentials"}}`)
				return
			}
			body, _ := io.ReadAll(r.Body)
			w.Write(body)
		case "/api/v1/invalid":
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"code":"INVALID_INPUT","message":"kind: bad (and 1 more)","details":{"path":"kind","errors":[{"path":"kind","message":"bad"},{"path":"region","message":"worse"}]}}}`)
		case "/api/v1/proxy":
			w.WriteHeader(502)
			io.WriteString(w, `<html>bad gateway</html>`)
		case "/api/v1/redirect":
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
		}
	})
}

func TestCallMapsResultsAndErrors(t *testing.T) {
	srv := fakeAPI(t)
	ctx := context.Background()
	c := New(srv.URL, testToken, nil)

	var out map[string]any
	if err := c.Call(ctx, "echo", map[string]any{"tenantId": "root"}, &out); err != nil || out["tenantId"] != "root" {
		t.Errorf("echo: %v %v", out, err)
	}
	var raw json.RawMessage
	if err := c.Call(ctx, "echo", nil, &raw); err != nil || string(raw) != "{}" {
		t.Errorf("nil input sent %s, %v; want {}", raw, err)
	}

	err := c.Call(ctx, "invalid", nil, nil)
	var ce *cubefleet.Error
	if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput || ce.Details["path"] != "kind" {
		t.Fatalf("invalid: %v", err)
	}
	fes, ok := ce.Details["errors"].([]cubefleet.FieldError)
	if !ok || len(fes) != 2 || fes[1] != (cubefleet.FieldError{Path: "region", Message: "worse"}) {
		t.Errorf("details.errors = %#v", ce.Details["errors"])
	}

	err = c.Call(ctx, "proxy", nil, nil)
	if !cubefleet.IsCode(err, cubefleet.CodeInternal) || !strings.Contains(err.Error(), "502") {
		t.Errorf("proxy error: %v", err)
	}

	err = c.Call(ctx, "redirect", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("redirect: %v, want a refusal with the status", err)
	}

	// Without a key, the refusal says how to get one.
	err = New(srv.URL, "", nil).Call(ctx, "echo", nil, nil)
	if !cubefleet.IsCode(err, cubefleet.CodeUnauthenticated) || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("no key: %v", err)
	}

	// A server that is not the API (the node-agent listener answers 404): the error says so.
	notAPI := httptest.NewServer(http.NotFoundHandler())
	err = New(notAPI.URL, testToken, nil).Call(ctx, "echo", nil, nil)
	notAPI.Close()
	if err == nil || !strings.Contains(err.Error(), "HTTP 404 from "+notAPI.URL) || !strings.Contains(err.Error(), "--internal-listen") {
		t.Errorf("a server that is not the API: %v", err)
	}

	// Nothing listening: the error names the URL.
	l := httptest.NewServer(http.NotFoundHandler())
	dead := l.URL
	l.Close()
	err = New(dead, testToken, nil).Call(ctx, "echo", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the control plane at "+dead) {
		t.Errorf("dead server: %v", err)
	}
	for _, e := range []error{err} {
		if strings.Contains(e.Error(), testToken) {
			t.Errorf("error %q contains the key", e)
		}
	}
}

// env is a fake environment for Resolve.
type env map[string]string

func (e env) get(k string) string { return e[k] }

func writePrivate(t *testing.T, path, data string) string {
	t.Helper()
	if err := privatefile.Write(path, []byte(data)); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResolvePrecedence(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // the default token file is relative to the working directory
	cfgDir := filepath.Join(dir, "xdg", "cubefleet")
	flagTok := writePrivate(t, filepath.Join(dir, "flag.token"), "cfk_flag\n")
	writePrivate(t, filepath.Join(cfgDir, "cfg.token"), "cfk_config")
	writePrivate(t, filepath.Join(cfgDir, "config.json"), `{"url":"http://config.example:3010","token_file":"cfg.token"}`)
	base := env{"XDG_CONFIG_HOME": filepath.Join(dir, "xdg")}

	for _, c := range []struct {
		name            string
		opts            Options
		env             env
		wantURL, wantTk string
	}{
		{"flags win", Options{URL: "http://flag:1", TokenFile: flagTok}, env{EnvURL: "http://env:1", EnvToken: "cfk_env"}, "http://flag:1", "cfk_flag"},
		{"env beats config", Options{}, env{EnvURL: "http://env:1", EnvToken: "cfk_env"}, "http://env:1", "cfk_env"},
		{"config", Options{}, env{}, "http://config.example:3010", "cfk_config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := env{}
			for k, v := range base {
				e[k] = v
			}
			for k, v := range c.env {
				e[k] = v
			}
			c.opts.Getenv = e.get
			s, err := Resolve(c.opts)
			if err != nil || s.URL != c.wantURL || s.Token != c.wantTk {
				t.Errorf("Resolve = %+v, %v; want %s %s", s, err, c.wantURL, c.wantTk)
			}
		})
	}

	// No flag, no env, no config: the defaults; a missing default token file is no key.
	none := env{"XDG_CONFIG_HOME": filepath.Join(dir, "empty")}
	s, err := Resolve(Options{Getenv: none.get})
	if err != nil || s.URL != DefaultURL || s.Token != "" {
		t.Errorf("defaults: %+v %v", s, err)
	}
	writePrivate(t, filepath.Join(dir, DefaultTokenFile), "cfk_default\n")
	s, err = Resolve(Options{Getenv: none.get})
	if err != nil || s.Token != "cfk_default" {
		t.Errorf("default token file: %+v %v", s, err)
	}
	// HOME/.config when XDG_CONFIG_HOME is unset.
	if got := ConfigPath(env{"HOME": "/home/op"}.get); got != "/home/op/.config/cubefleet/config.json" {
		t.Errorf("ConfigPath = %s", got)
	}
}

func TestResolveRefusesUnsafeTokenFiles(t *testing.T) {
	dir := t.TempDir()
	none := env{"XDG_CONFIG_HOME": filepath.Join(dir, "none")}.get
	loose := filepath.Join(dir, "loose.token")
	os.WriteFile(loose, []byte(testToken), 0o644)
	good := writePrivate(t, filepath.Join(dir, "good.token"), testToken)
	link := filepath.Join(dir, "link.token")
	os.Symlink(good, link)
	empty := writePrivate(t, filepath.Join(dir, "empty.token"), "\n")
	for _, c := range []struct {
		file, want string
	}{
		{loose, "chmod 600"},
		{link, "symlink"},
		{filepath.Join(dir, "missing.token"), "missing.token: file does not exist"},
		{empty, "empty"},
	} {
		_, err := Resolve(Options{TokenFile: c.file, Getenv: none})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), testToken) {
			t.Errorf("token file %s: %v, want an error containing %q (and never the key)", filepath.Base(c.file), err, c.want)
		}
	}
	// A bad URL is refused, naming where it came from.
	_, err := Resolve(Options{URL: "127.0.0.1:3010", TokenFile: good, Getenv: none})
	if err == nil || !strings.Contains(err.Error(), "--url") {
		t.Errorf("bad URL: %v", err)
	}
	_, err = Resolve(Options{TokenFile: good, Getenv: env{EnvURL: "http://user:pw@host:1"}.get})
	if err == nil || !strings.Contains(err.Error(), EnvURL) {
		t.Errorf("URL with credentials: %v", err)
	}
	// A broken config file is named.
	cfg := writePrivate(t, filepath.Join(dir, "xdg", "cubefleet", "config.json"), "{")
	_, err = Resolve(Options{Getenv: env{"XDG_CONFIG_HOME": filepath.Join(dir, "xdg")}.get})
	if err == nil || !strings.Contains(err.Error(), cfg) {
		t.Errorf("broken config: %v", err)
	}
}

// TestLoadConfigRefusesUnknownKeys: a key the CLI does not know (a typo, or a setting of
// another version) is an error naming it, the file and the known keys, not silently ignored.
func TestLoadConfigRefusesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	const known = "the known keys are url, token_file, ca_file"
	for i, c := range []struct{ body, want string }{
		{`{"url":"http://h:1","tokenfile":"x"}`, `: unknown key "tokenfile" (` + known + `)`},
		{`{"token-file":"x"}`, `: unknown key "token-file" (did you mean token_file? ` + known + `)`},
		{`{"URL":"http://h:1"}`, `: unknown key "URL" (did you mean url? ` + known + `)`},
		{`{"url":1}`, ` is not a JSON object with url, token_file and ca_file`},
		{`[]`, ` is not a JSON object with url, token_file and ca_file`},
	} {
		path := writePrivate(t, filepath.Join(dir, fmt.Sprintf("config%d.json", i)), c.body)
		if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "config file "+path+c.want) {
			t.Errorf("LoadConfig(%s): %v, want an error containing %q", c.body, err, "config file "+path+c.want)
		}
	}
	path := writePrivate(t, filepath.Join(dir, "good.json"), `{"url":"http://h:1","token_file":"t","ca_file":"ca.pem"}`)
	if c, err := LoadConfig(path); err != nil || c != (Config{URL: "http://h:1", TokenFile: "t", CAFile: "ca.pem"}) {
		t.Errorf("LoadConfig of the known keys: %+v %v", c, err)
	}
	// Resolve reports it as it reports a broken file.
	writePrivate(t, filepath.Join(dir, "cubefleet", "config.json"), `{"urll":"http://h:1"}`)
	if _, err := Resolve(Options{Getenv: env{"XDG_CONFIG_HOME": dir}.get}); err == nil || !strings.Contains(err.Error(), `unknown key "urll"`) {
		t.Errorf("Resolve with an unknown key: %v", err)
	}
}
