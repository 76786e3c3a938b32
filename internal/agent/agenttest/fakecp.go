// Package agenttest is the test support of the node agent's packages (agent, hostsetup): a
// fake control plane on 127.0.0.1, an HTTPS server with a test CA, listeners, a runner for an
// agent's Serve and a compute node's env file (a real control plane for those tests comes from
// internal/server/servertest). Only _test.go files import it. It imports none of the agent's
// packages, so that their internal tests can use it.
package agenttest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// FakeCP is a minimal control plane on 127.0.0.1 that speaks the agent's side of the registry
// contract (docs/nodes.md): readyz, register (a join token once, then the node credential it
// issues: cfn_node1_secret, cfn_node2_secret, ...), status (the credential; 404 for an unknown
// node, 401 for a revoked credential; "draining":true while SetDraining says so), GET
// /internal/v1/nodes/{id} in CubeMaster's compact shape, and the work API (see Assign). It
// records every call. Its methods are safe for concurrent use.
type FakeCP struct {
	// URL is the base URL of the server NewFakeCP started, http://127.0.0.1:<port>.
	URL string

	t       testing.TB
	handler http.Handler

	mu      sync.Mutex
	joins   map[string]bool   // join token -> unused
	creds   map[string]string // credential -> node ID
	revoked map[string]bool   // revoked credentials
	nodes   map[string]bool   // registered node IDs
	calls   []Call
	// hook, when set, answers a request first: a status other than 0 is written with body.
	hook func(r *http.Request) (int, string)
	// raw, when set, sees a request before hook and answers it itself when it returns true.
	raw   func(w http.ResponseWriter, r *http.Request) bool
	issue int
	work  workState
}

// Call is a request the fake received.
type Call struct {
	Method, Host, Path, Auth string         // Host is the server it reached, Auth the Authorization header
	At                       time.Time      // when it arrived
	Body                     map[string]any // the JSON body of a register or status call; nil for others
}

// NewFakeCP starts a fake control plane that accepts each of joinTokens once, until the test
// ends.
func NewFakeCP(t testing.TB, joinTokens ...string) *FakeCP {
	t.Helper()
	cp := &FakeCP{t: t, joins: map[string]bool{}, creds: map[string]string{}, revoked: map[string]bool{}, nodes: map[string]bool{}}
	for _, j := range joinTokens {
		cp.joins[j] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+nodeapi.PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		cp.Record(r, nil)
		fmt.Fprint(w, `{"ret":{"ret_code":200,"ret_msg":"ok"}}`)
	})
	mux.HandleFunc("POST "+nodeapi.PathRegister, cp.register)
	mux.HandleFunc("POST "+nodeapi.AgentPrefix+nodeapi.RouteStatus, cp.status)
	cp.workInit(mux)
	mux.HandleFunc("GET "+nodeapi.NodesPrefix+nodeapi.RouteNode, func(w http.ResponseWriter, r *http.Request) {
		cp.Record(r, nil)
		id := r.PathValue("node_id")
		cp.mu.Lock()
		ok := cp.nodes[id]
		cp.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"node not found"}`)
			return
		}
		fmt.Fprintf(w, `{"InstanceID":%q,"uuid":%q,"IP":%q,"Healthy":true,"SchedulingDisabled":false}`, id, id, id)
	})
	cp.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.mu.Lock()
		hook, raw := cp.hook, cp.raw
		cp.mu.Unlock()
		if raw != nil && raw(w, r) {
			return
		}
		if hook != nil {
			if code, body := hook(r); code != 0 {
				cp.Record(r, nil)
				w.WriteHeader(code)
				fmt.Fprint(w, body)
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(cp.handler)
	t.Cleanup(srv.Close)
	cp.URL = srv.URL
	return cp
}

// Replica starts another server on the same state (a second control-plane replica) until the
// test ends, and returns its URL.
func (cp *FakeCP) Replica() string {
	srv := httptest.NewServer(cp.handler)
	cp.t.Cleanup(srv.Close)
	return srv.URL
}

// SetHook makes h answer every request first: a status other than 0 is written with the body
// h returns (and the call recorded); 0 lets the fake answer. nil removes the hook.
func (cp *FakeCP) SetHook(h func(r *http.Request) (int, string)) {
	cp.mu.Lock()
	cp.hook = h
	cp.mu.Unlock()
}

// SetRaw makes raw see every request before the hook; when it returns true it has answered the
// request itself (and records it with Record if it counts). nil removes it.
func (cp *FakeCP) SetRaw(raw func(w http.ResponseWriter, r *http.Request) bool) {
	cp.mu.Lock()
	cp.raw = raw
	cp.mu.Unlock()
}

// Record records r, with its decoded JSON body or nil, as a call.
func (cp *FakeCP) Record(r *http.Request, body map[string]any) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.calls = append(cp.calls, Call{Method: r.Method, Host: r.Host, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), At: time.Now(), Body: body})
}

// Calls returns every call so far, oldest first.
func (cp *FakeCP) Calls() []Call {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]Call(nil), cp.calls...)
}

// CallsTo returns the calls whose path ends with suffix ("" for all), oldest first.
func (cp *FakeCP) CallsTo(suffix string) []Call {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out []Call
	for _, c := range cp.calls {
		if strings.HasSuffix(c.Path, suffix) {
			out = append(out, c)
		}
	}
	return out
}

func (cp *FakeCP) decode(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	var body map[string]any
	if r.Header.Get("Content-Type") != "application/json" {
		cp.t.Errorf("%s: Content-Type %q", r.URL.Path, r.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		cp.Record(r, nil)
		http.Error(w, `{"error":"invalid body"}`, http.StatusBadRequest)
		return nil, false
	}
	cp.Record(r, body)
	return body, true
}

func (cp *FakeCP) register(w http.ResponseWriter, r *http.Request) {
	body, ok := cp.decode(w, r)
	if !ok {
		return
	}
	id, _ := body["node_id"].(string)
	if id == "" {
		http.Error(w, `{"error":"node_id is required"}`, http.StatusBadRequest)
		return
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	cp.mu.Lock()
	defer cp.mu.Unlock()
	issued := ""
	switch {
	case cp.creds[token] == id && !cp.revoked[token]:
	case cp.joins[token]:
		cp.joins[token] = false // single use
		cp.issue++
		issued = fmt.Sprintf("cfn_node%d_secret", cp.issue)
		cp.creds[issued] = id
	default:
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"UNAUTHENTICATED","message":"invalid or revoked token"}}`)
		return
	}
	cp.nodes[id] = true
	snap := map[string]any{"node_id": id, "host_ip": id, "healthy": true, "scheduling_disabled": false}
	if issued != "" {
		snap["node_credential"] = issued
	}
	json.NewEncoder(w).Encode(snap)
}

func (cp *FakeCP) status(w http.ResponseWriter, r *http.Request) {
	if _, ok := cp.decode(w, r); !ok {
		return
	}
	id := r.PathValue("node_id")
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.creds[token] != id || cp.revoked[token] {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"UNAUTHENTICATED","message":"invalid or revoked token"}}`)
		return
	}
	if !cp.nodes[id] {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"node not found"}`)
		return
	}
	if cp.work.draining[id] {
		fmt.Fprintf(w, `{"node_id":%q,"healthy":true,"scheduling_disabled":true,"draining":true}`, id)
		return
	}
	fmt.Fprintf(w, `{"node_id":%q,"healthy":true}`, id)
}

// Forget drops the node's registration but keeps its credential valid (a lost database): its
// status reports get 404.
func (cp *FakeCP) Forget(id string) {
	cp.mu.Lock()
	delete(cp.nodes, id)
	cp.mu.Unlock()
}

// DeleteNode deletes the node and revokes its credentials: its calls get 401.
func (cp *FakeCP) DeleteNode(id string) {
	cp.mu.Lock()
	delete(cp.nodes, id)
	for c, n := range cp.creds {
		if n == id {
			cp.revoked[c] = true
		}
	}
	cp.mu.Unlock()
}

// ClosedAddr returns a 127.0.0.1 address nothing listens on (a connection is refused).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Listen returns the address of a TCP listener on 127.0.0.1 that accepts and closes
// connections until the test ends (an S3 endpoint that answers on TCP).
func Listen(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}
