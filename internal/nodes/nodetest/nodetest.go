// Package nodetest assembles the node registry for tests: a registry (internal/nodes) over a
// real database (nodestore), served by its HTTP edge (nodehttp) on 127.0.0.1 with its loops
// running, on a settable clock; a client that calls like a stock Cubelet; and the golden
// register and status bodies, built from the upstream field lists
// (docs/nodes.md, "Node-agent API"). Only tests import it.
package nodetest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// Modules are the migrations the registry needs.
var Modules = []store.Module{store.LeaseModule, audit.Module, events.Module, nodestore.Module}

var (
	//go:embed testdata/register.json
	registerJSON []byte
	//go:embed testdata/status.json
	statusJSON []byte
)

// Register returns the golden register body of node 10.0.0.7 (a fresh copy): what a Cubelet
// at 224867d sends, with every field of the quota branch, and a field from a newer Cubelet.
func Register() []byte { return bytes.Clone(registerJSON) }

// Status returns the golden status body (a fresh copy): a Ready report with images, local
// templates, allocated (4 sandboxes), disk usage, the quota block, versions and host facts.
func Status() []byte { return bytes.Clone(statusJSON) }

// WithNode returns the golden register body for node id (its id and IP replaced).
func WithNode(id string) []byte {
	return bytes.ReplaceAll(Register(), []byte("10.0.0.7"), []byte(id))
}

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at 2026-05-04T10:00:00Z.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Pool is the pool the tests' join tokens and cluster labels name.
var Pool = nodes.Pool{ID: "pool_01JTESTPOOL0000000000000000", TenantID: "root", Name: "default-cluster"}

// Loopback is the allowed network of stock-Cubelet tests.
var Loopback = netip.MustParsePrefix("127.0.0.0/8")

// Config configures the three parts of an Env. The harness sets the database, the clock, the
// pools (Pool), the audit sink and the journal (in the test's directory) unless a test does.
type Config struct {
	Registry nodes.Config
	Store    nodestore.Config
	HTTP     nodehttp.Config
}

// Env is a registry on a real database served over HTTP on 127.0.0.1.
type Env struct {
	T     *testing.T
	DB    *store.DB
	Reg   *nodes.Registry
	Store *nodestore.Store
	HTTP  *nodehttp.Handler
	Clock *Clock
	URL   string
	Cfg   Config
	stop  func() // stops the loops (the last flush included) and the server
}

// MustEnv starts a registry on db with a fixed clock, stock Cubelets allowed from Loopback; mod
// adjusts the config first. Its loops run (Run), but on the clock's fixed time: tests call
// Flush and CheckHealth.
func MustEnv(t *testing.T, db *store.DB, mod func(*Config)) *Env {
	t.Helper()
	c := NewClock()
	cfg := Config{
		Registry: nodes.Config{Now: c.Now, Pools: func(context.Context) ([]nodes.Pool, error) { return []nodes.Pool{Pool}, nil }},
		Store:    nodestore.Config{DB: db, Now: c.Now, JournalPath: filepath.Join(t.TempDir(), nodestore.JournalFile)},
		HTTP:     nodehttp.Config{DB: db, Now: c.Now, AllowUnauthenticated: []netip.Prefix{Loopback}},
	}
	if mod != nil {
		mod(&cfg)
	}
	return Start(t, db, c, cfg)
}

// Start creates a registry for cfg, runs its loops and serves it until the test ends.
func Start(t *testing.T, db *store.DB, c *Clock, cfg Config) *Env {
	t.Helper()
	st, err := nodestore.New(cfg.Store)
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.Registry
	rc.Store, rc.JoinTokens = st, st
	reg, err := nodes.New(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	hc := cfg.HTTP
	hc.Registry, hc.Audit = reg, st
	h, err := nodehttp.New(hc)
	if err != nil {
		t.Fatal(err)
	}
	srv, stopLoops := serve(t, reg, h)
	stop := func() {
		srv.Close()
		stopLoops()
	}
	return &Env{T: t, DB: db, Reg: reg, Store: st, HTTP: h, Clock: c, URL: srv.URL, Cfg: cfg, stop: stop}
}

// serve serves h on 127.0.0.1 and runs reg's and h's loops until the test ends (the server
// closed first). stopLoops ends the loops before that (Registry.Run's final flush included)
// and reports Run's error; it may be called more than once.
func serve(tb testing.TB, reg *nodes.Registry, h *nodehttp.Handler) (srv *httptest.Server, stopLoops func()) {
	srv = httptest.NewServer(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	listDone := make(chan struct{})
	go func() { h.Run(ctx); close(listDone) }()
	var once sync.Once
	stopLoops = func() {
		once.Do(func() {
			cancel()
			<-listDone
			if err := <-done; err != nil {
				tb.Errorf("Run: %v", err)
			}
		})
	}
	tb.Cleanup(func() {
		srv.Close()
		stopLoops()
	})
	return srv, stopLoops
}

// Each runs fn against a registry on SQLite and one on PostgreSQL.
func Each(t *testing.T, mod func(*Config), fn func(t *testing.T, e *Env)) {
	storetest.Each(t, Modules, func(t *testing.T, db *store.DB) {
		e := MustEnv(t, db, mod)
		e.T = t
		fn(t, e)
	})
}

// Stop stops the registry's loops (its last flush included) and its server.
func (e *Env) Stop() { e.stop() }

// Restart returns a new registry over the same database (a server restart), at the env's
// clock.
func (e *Env) Restart() *Env {
	e.T.Helper()
	e.stop()
	return Start(e.T, e.DB, e.Clock, e.Cfg)
}

// Do sends a request with an optional bearer token and returns the status and body; body is
// nil, []byte, a string, or a value sent as JSON.
func (e *Env) Do(method, path, token string, body any) (int, []byte) {
	e.T.Helper()
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
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// Call sends a request from client with a bearer token ("" for none).
func (e *Env) Call(client *http.Client, method, path, token string, body []byte) (int, []byte) {
	e.T.Helper()
	req, err := http.NewRequest(method, e.URL+path, bytes.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// From returns an HTTP client whose connections come from the loopback address src, so tests
// can play nodes on different addresses (127.0.0.0/8 is all loopback on Linux).
func From(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 5 * time.Second}
}

// Flush writes what the store holds.
func (e *Env) Flush() {
	e.T.Helper()
	if err := e.Store.Flush(context.Background()); err != nil {
		e.T.Fatal(err)
	}
}

// Count runs a count(*) query.
func (e *Env) Count(query string, args ...any) int {
	e.T.Helper()
	var n int
	if err := e.DB.QueryRow(query, args...).Scan(&n); err != nil {
		e.T.Fatalf("%s: %v", query, err)
	}
	return n
}

// EventTypes flushes and returns the types of the events of node id, oldest first.
func (e *Env) EventTypes(id string) []string {
	e.T.Helper()
	e.Flush()
	evs, _, err := events.List(context.Background(), e.DB, events.Filter{TenantID: "root", Subject: id, Limit: 1000})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// JoinToken makes a join token through the database, as nodes.joinTokens.create does (pool:
// Pool unless given), and returns its secret.
func (e *Env) JoinToken(in nodes.JoinTokenInput) string {
	e.T.Helper()
	if in.Pool == "" {
		in.Pool = Pool.Name
	}
	_, secret, err := e.Store.CreateJoinToken(context.Background(), e.DB, in, "test")
	if err != nil {
		e.T.Fatal(err)
	}
	return secret
}

// The API keys of FakeKeys.
const (
	AdminKey  = "cfk_admin-of-the-test"  // nodes:* on tenant/root
	ReaderKey = "cfk_reader-of-the-test" // nodes:list on tenant/root
)

// FakeKeys resolves AdminKey and ReaderKey (nodehttp.Config.Authenticate); any other key is
// UNAUTHENTICATED.
func FakeKeys(_ context.Context, token string) (*iam.Principal, error) {
	root := iam.TenantScope(iam.RootTenant)
	switch token {
	case AdminKey:
		return &iam.Principal{ID: "svc_admin", TenantID: "root", Grants: []iam.Grant{{Permission: "nodes:*", Scope: root}}}, nil
	case ReaderKey:
		return &iam.Principal{ID: "svc_reader", TenantID: "root", Grants: []iam.Grant{{Permission: "nodes:list", Scope: root}}}, nil
	}
	return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "unknown API key")
}

// Cubelet is a stock-Cubelet-shaped client: plain HTTP, no credentials, and Cubelet's
// acceptance rule (nodeapi.DecodeReply): a status of 300 or more is an error, and so is a 2xx
// body that breaks the rule.
type Cubelet struct {
	Base   string
	Prefix string // one of nodeapi.AgentPrefixes
	Client *http.Client
}

// NewCubelet returns a Cubelet calling base under nodeapi.AgentPrefix with a one-second
// timeout, as the one-click install configures it.
func NewCubelet(base string) *Cubelet {
	return &Cubelet{Base: base, Prefix: nodeapi.AgentPrefix, Client: &http.Client{Timeout: time.Second}}
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	Body string
}

// Error says the status and the body.
func (s *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", s.Code, s.Body) }

// CodeOf returns the status of a *StatusError, 0 for any other error.
func CodeOf(err error) int {
	if se, ok := err.(*StatusError); ok {
		return se.Code
	}
	return 0
}

// call applies Cubelet's acceptance rule to one call.
func (c *Cubelet) call(method, path string, body []byte) error {
	req, err := http.NewRequest(method, c.Base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return &StatusError{Code: resp.StatusCode, Body: string(data)}
	}
	if _, err := nodeapi.DecodeReply(data); err != nil {
		return fmt.Errorf("response %q: %w", data, err)
	}
	return nil
}

// Readyz calls readyz.
func (c *Cubelet) Readyz() error { return c.call(http.MethodGet, c.Prefix+nodeapi.RouteReadyz, nil) }

// Register registers with body.
func (c *Cubelet) Register(body []byte) error {
	return c.call(http.MethodPost, c.Prefix+nodeapi.RouteRegister, body)
}

// Status reports body for node id.
func (c *Cubelet) Status(id string, body []byte) error {
	return c.call(http.MethodPost, nodeapi.StatusPathUnder(c.Prefix, id), body)
}

// DecodeObject decodes a JSON object answer.
func DecodeObject(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return m
}

// Patch returns the JSON object body with the member at the dotted path set to value (nil
// deletes it); intermediate objects are created.
func Patch(t testing.TB, body []byte, path string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	keys := strings.Split(path, ".")
	cur := m
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	if value == nil {
		delete(cur, keys[len(keys)-1])
	} else {
		cur[keys[len(keys)-1]] = value
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ErrMessage is the message an error shows a caller.
func ErrMessage(err error) string {
	var e *cubefleet.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
