package agent

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

// fakeCP is a minimal control plane on 127.0.0.1 that speaks the agent's side of the registry
// contract (docs/nodes.md): readyz, register (a join token once, then the node credential it
// issues), status (the credential; 404 for an unknown node, 401 for a revoked credential) and
// GET /internal/v1/nodes/{id} in CubeMaster's compact shape.
type fakeCP struct {
	t       *testing.T
	srv     *httptest.Server
	handler http.Handler

	mu      sync.Mutex
	joins   map[string]bool   // join token -> unused
	creds   map[string]string // credential -> node ID
	revoked map[string]bool   // revoked credentials
	nodes   map[string]bool   // registered node IDs
	calls   []fakeCall
	// hook, when set, answers a request first: a status other than 0 is written with body.
	hook func(r *http.Request) (int, string)
	// raw, when set, sees a request before hook and answers it itself when it returns true.
	raw   func(w http.ResponseWriter, r *http.Request) bool
	issue int
}

type fakeCall struct {
	Method, Host, Path, Auth string
	At                       time.Time
	Body                     map[string]any
}

func newFakeCP(t *testing.T, joinTokens ...string) *fakeCP {
	t.Helper()
	cp := &fakeCP{t: t, joins: map[string]bool{}, creds: map[string]string{}, revoked: map[string]bool{}, nodes: map[string]bool{}}
	for _, j := range joinTokens {
		cp.joins[j] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+nodeapi.PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		cp.record(r, nil)
		fmt.Fprint(w, `{"ret":{"ret_code":200,"ret_msg":"ok"}}`)
	})
	mux.HandleFunc("POST "+nodeapi.PathRegister, cp.register)
	mux.HandleFunc("POST "+nodeapi.AgentPrefix+nodeapi.RouteStatus, cp.status)
	mux.HandleFunc("GET "+nodeapi.NodesPrefix+nodeapi.RouteNode, func(w http.ResponseWriter, r *http.Request) {
		cp.record(r, nil)
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
				cp.record(r, nil)
				w.WriteHeader(code)
				fmt.Fprint(w, body)
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
	cp.srv = httptest.NewServer(cp.handler)
	t.Cleanup(cp.srv.Close)
	return cp
}

// replica starts another server on the same state (a second control-plane replica) and
// returns its URL.
func (cp *fakeCP) replica() string {
	srv := httptest.NewServer(cp.handler)
	cp.t.Cleanup(srv.Close)
	return srv.URL
}

func (cp *fakeCP) setHook(h func(r *http.Request) (int, string)) {
	cp.mu.Lock()
	cp.hook = h
	cp.mu.Unlock()
}

func (cp *fakeCP) record(r *http.Request, body map[string]any) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.calls = append(cp.calls, fakeCall{Method: r.Method, Host: r.Host, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), At: time.Now(), Body: body})
}

// callsTo returns the calls whose path ends with suffix.
func (cp *fakeCP) callsTo(suffix string) []fakeCall {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out []fakeCall
	for _, c := range cp.calls {
		if strings.HasSuffix(c.Path, suffix) {
			out = append(out, c)
		}
	}
	return out
}

func (cp *fakeCP) decode(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	var body map[string]any
	if r.Header.Get("Content-Type") != "application/json" {
		cp.t.Errorf("%s: Content-Type %q", r.URL.Path, r.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		cp.record(r, nil)
		http.Error(w, `{"error":"invalid body"}`, http.StatusBadRequest)
		return nil, false
	}
	cp.record(r, body)
	return body, true
}

func (cp *fakeCP) register(w http.ResponseWriter, r *http.Request) {
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

func (cp *fakeCP) status(w http.ResponseWriter, r *http.Request) {
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
	fmt.Fprintf(w, `{"node_id":%q,"healthy":true}`, id)
}

// forget drops the node's registration but keeps its credential valid (a lost database).
func (cp *fakeCP) forget(id string) {
	cp.mu.Lock()
	delete(cp.nodes, id)
	cp.mu.Unlock()
}

// deleteNode deletes the node and revokes its credentials.
func (cp *fakeCP) deleteNode(id string) {
	cp.mu.Lock()
	delete(cp.nodes, id)
	for c, n := range cp.creds {
		if n == id {
			cp.revoked[c] = true
		}
	}
	cp.mu.Unlock()
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
