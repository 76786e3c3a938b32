package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// testEnv is a running server on 127.0.0.1:0 with its collaborators.
type testEnv struct {
	t     *testing.T
	srv   *Server
	url   string
	db    *store.DB
	log   *testkit.SyncBuffer
	admin string // the --dev administrator's API key
	dir   string
}

// mustStart starts a --dev server on db (storetest's) with a fresh data dir, serving until the
// test ends. mod, when not nil, adjusts the config first.
func mustStart(t *testing.T, db *store.DB, mod func(*Config)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	logBuf := &testkit.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{Listen: "127.0.0.1:0", DataDir: dir, DB: db, Dev: true}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	token, err := privatefile.Read(filepath.Join(dir, controlplane.AdminTokenFile))
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	return &testEnv{t: t, srv: srv, url: srv.URL(), db: srv.db, log: logBuf, admin: strings.TrimSpace(string(token)), dir: dir}
}

// sub returns a copy of e that reports to t (a sub-test).
func (e *testEnv) sub(t *testing.T) *testEnv {
	c := *e
	c.t = t
	return &c
}

// eachServer runs fn against a fresh --dev server on SQLite and on PostgreSQL.
func eachServer(t *testing.T, fn func(t *testing.T, e *testEnv)) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		fn(t, mustStart(t, db, nil))
	})
}

// post sends body to method with token ("" sends none) and returns the status and the body.
func (e *testEnv) post(token, method string, body any) (int, []byte) {
	e.t.Helper()
	var data []byte
	switch b := body.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(body); err != nil {
			e.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, e.url+"/api/v1/"+method, bytes.NewReader(data))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := new(http.Client).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// get fetches path and returns the status and the body.
func (e *testEnv) get(path string) (int, []byte) {
	e.t.Helper()
	resp, err := new(http.Client).Get(e.url + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// call runs method as token through the API client; out may be nil.
func (e *testEnv) call(token, method string, in, out any) error {
	e.t.Helper()
	return client.New(e.url, token, nil).Call(context.Background(), method, in, out)
}

// must runs method as token and fails the test on an error.
func (e *testEnv) must(token, method string, in, out any) {
	e.t.Helper()
	if err := e.call(token, method, in, out); err != nil {
		e.t.Fatalf("%s %v: %v", method, in, err)
	}
}

// mustFail runs method as token and checks it fails with code.
func (e *testEnv) mustFail(token, method string, in any, code cubefleet.Code) *cubefleet.Error {
	e.t.Helper()
	err := e.call(token, method, in, nil)
	ce, ok := err.(*cubefleet.Error)
	if !ok || ce.Code != code {
		e.t.Fatalf("%s %v: got %v, want %s", method, in, err, code)
	}
	return ce
}

// key creates a service account in tenant holding grants and returns its token and principal id.
func (e *testEnv) key(tenant, name string, grants ...string) (token, principal string) {
	e.t.Helper()
	var out contract.KeyCreated
	e.must(e.admin, "iam.keys.create", map[string]any{"tenantId": tenant, "name": name, "grants": grants}, &out)
	return out.Token, out.Key.PrincipalID
}

// obj is a compute object as the API returns it.
type obj map[string]any

func (o obj) id() string { s, _ := o["id"].(string); return s }

func (o obj) rev() int64 { f, _ := o["revision"].(float64); return int64(f) }

// fixedNow is the clock of tests that compare times.
func fixedNow() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
