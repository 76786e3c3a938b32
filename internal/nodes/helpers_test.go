package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

func TestMain(m *testing.M) { storetest.Main(m) }

// modules are the migrations the registry needs.
var modules = []store.Module{store.LeaseModule, audit.Module, events.Module, Module}

// clock is a settable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testPool is the pool the tests' join tokens and cluster labels name.
var testPool = Pool{ID: "pool_01JTESTPOOL0000000000000000", TenantID: "root", Name: "default-cluster"}

// env is a registry on a real database served over HTTP on 127.0.0.1.
type env struct {
	t     *testing.T
	db    *store.DB
	reg   *Registry
	clock *clock
	url   string
	cfg   Config
	stop  func() // stops the registry's loops (its last flush included)
}

// loopback is the allowed network of stock-Cubelet tests.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// mustEnv starts a registry on db with a fixed clock; mod adjusts the config first. The
// registry's loops do not run: tests call Flush and CheckHealth.
func mustEnv(t *testing.T, db *store.DB, mod func(*Config)) *env {
	t.Helper()
	c := newClock()
	cfg := Config{
		DB: db, Now: c.Now, AllowUnauthenticated: []netip.Prefix{loopback},
		Pools:       func(context.Context) ([]Pool, error) { return []Pool{testPool}, nil },
		JournalPath: filepath.Join(t.TempDir(), JournalFile),
	}
	if mod != nil {
		mod(&cfg)
	}
	return start(t, db, c, cfg)
}

// start creates a registry for cfg, runs its loops and serves it until the test ends.
func start(t *testing.T, db *store.DB, c *clock, cfg Config) *env {
	t.Helper()
	reg, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Close()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &env{t: t, db: db, reg: reg, clock: c, url: srv.URL, cfg: cfg, stop: stop}
}

// eachEnv runs fn against a registry on SQLite and one on PostgreSQL.
func eachEnv(t *testing.T, mod func(*Config), fn func(t *testing.T, e *env)) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := mustEnv(t, db, mod)
		e.t = t
		fn(t, e)
	})
}

// restart returns a new registry over the same database (a server restart), at the env's
// clock.
func (e *env) restart() *env {
	e.t.Helper()
	e.stop()
	return start(e.t, e.db, e.clock, e.cfg)
}

// do sends a request with an optional bearer token and returns the status and body.
func (e *env) do(method, path, token string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (e *env) flush() {
	e.t.Helper()
	if err := e.reg.Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// count runs a count(*) query.
func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow(query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// eventTypes returns the types of the events of node id, oldest first.
func (e *env) eventTypes(id string) []string {
	e.t.Helper()
	e.flush()
	evs, _, err := events.List(context.Background(), e.db, events.Filter{TenantID: "root", Subject: id, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// joinToken makes a join token through the database, as nodes.joinTokens.create does.
func (e *env) joinToken(in JoinTokenInput) string {
	e.t.Helper()
	if in.Pool == "" {
		in.Pool = testPool.Name
	}
	_, secret, err := e.reg.CreateJoinToken(context.Background(), e.db, in, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// cubelet is a stock-Cubelet-shaped client: plain HTTP, no credentials, and Cubelet's exact
// acceptance rule (Cubelet/pkg/masterclient, spec §1.1): a status of 300 or more is an error;
// a 2xx body must decode as a JSON object, and a `ret.ret_code` other than 200 is an error.
type cubelet struct {
	t      *testing.T
	base   string
	prefix string
	client *http.Client
}

func newCubelet(t *testing.T, base string) *cubelet {
	return &cubelet{t: t, base: base, prefix: "/internal/v1/node-agent", client: &http.Client{Timeout: time.Second}}
}

// statusError is a non-2xx answer.
type statusError struct {
	code int
	body string
}

func (s *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", s.code, s.body) }

// call applies Cubelet's acceptance rule to one call.
func (c *cubelet) call(method, path string, body []byte) error {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return &statusError{code: resp.StatusCode, body: string(data)}
	}
	var ret struct {
		Ret *struct {
			RetCode int    `json:"ret_code"`
			RetMsg  string `json:"ret_msg"`
		} `json:"ret"`
	}
	if err := json.Unmarshal(data, &ret); err != nil {
		return fmt.Errorf("decode response %q: %w", data, err)
	}
	if ret.Ret != nil && ret.Ret.RetCode != 200 {
		return fmt.Errorf("ret_code %d: %s", ret.Ret.RetCode, ret.Ret.RetMsg)
	}
	return nil
}

func (c *cubelet) readyz() error { return c.call(http.MethodGet, c.prefix+"/readyz", nil) }

func (c *cubelet) register(body []byte) error {
	return c.call(http.MethodPost, c.prefix+"/nodes/register", body)
}

func (c *cubelet) status(id string, body []byte) error {
	return c.call(http.MethodPost, c.prefix+"/nodes/"+id+"/status", body)
}

func codeOf(err error) int {
	if se, ok := err.(*statusError); ok {
		return se.code
	}
	return 0
}

// testdata reads testdata/name.
func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/name (rewritten with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// withNode returns a register body for node id (the Cubelet golden body with its id and IP).
func withNode(t testing.TB, id string) []byte {
	t.Helper()
	body := testdata(t, "register.json")
	return bytes.ReplaceAll(body, []byte("10.0.0.7"), []byte(id))
}

// decodeObject decodes a JSON object answer.
func decodeObject(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return m
}
