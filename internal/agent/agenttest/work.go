package agenttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// The fake control plane's side of the work API (nodeapi.RouteWork, RouteSandboxEvent): a queue
// of assignments per node, offered on every work request until one lists them in Done, a long
// poll held until an assignment is queued or the request's WaitMS passed, the events each
// sandbox's node sent, and every answer proved with nodeapi.Proof keyed with the node
// credential's hash.

// workState is the fake's work API state, under FakeCP.mu.
type workState struct {
	queued   map[string][]nodeapi.Assignment // by node
	done     map[string]bool                 // assignment ids listed in Done
	wake     chan struct{}                   // closed and replaced when an assignment is queued
	requests []nodeapi.WorkRequest
	events   []SandboxEventCall
	draining map[string]bool // nodes whose status answers say "draining":true
}

// SandboxEventCall is an event the fake accepted.
type SandboxEventCall struct {
	Node, Sandbox string
	Event         nodeapi.SandboxEvent
	At            time.Time
}

func (cp *FakeCP) workInit(mux *http.ServeMux) {
	cp.work = workState{queued: map[string][]nodeapi.Assignment{}, done: map[string]bool{}, wake: make(chan struct{}), draining: map[string]bool{}}
	mux.HandleFunc("POST "+nodeapi.AgentPrefix+nodeapi.RouteWork, cp.workRoute)
	mux.HandleFunc("POST "+nodeapi.AgentPrefix+nodeapi.RouteSandboxEvent, cp.eventRoute)
}

// Assign queues assignments for node id: offered on every work request of the node (at once to
// a held one) until one lists them in Done.
func (cp *FakeCP) Assign(id string, as ...nodeapi.Assignment) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.work.queued[id] = append(cp.work.queued[id], as...)
	close(cp.work.wake)
	cp.work.wake = make(chan struct{})
}

// SetDraining makes the answers to node id's status reports say whether it drains.
func (cp *FakeCP) SetDraining(id string, on bool) {
	cp.mu.Lock()
	cp.work.draining[id] = on
	cp.mu.Unlock()
}

// Done reports whether a work request listed assignment id in Done.
func (cp *FakeCP) Done(id string) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.work.done[id]
}

// WorkRequests returns the work requests received, oldest first.
func (cp *FakeCP) WorkRequests() []nodeapi.WorkRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return slices.Clone(cp.work.requests)
}

// Events returns the events the fake accepted about sandbox id ("" for every sandbox), in the
// order they came (a repeated one each time it came).
func (cp *FakeCP) Events(id string) []SandboxEventCall {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out []SandboxEventCall
	for _, e := range cp.work.events {
		if id == "" || e.Sandbox == id {
			out = append(out, e)
		}
	}
	return out
}

// States returns the states of the events accepted about sandbox id, in order.
func (cp *FakeCP) States(id string) []nodeapi.SandboxState {
	var out []nodeapi.SandboxState
	for _, e := range cp.Events(id) {
		out = append(out, e.Event.State)
	}
	return out
}

// node returns the node a work-API request comes from: the node of its credential, which must
// match the path's node_id; "" after it answered 401.
func (cp *FakeCP) node(w http.ResponseWriter, r *http.Request) (id, token string) {
	id = r.PathValue("node_id")
	token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	cp.mu.Lock()
	ok := cp.creds[token] == id && !cp.revoked[token]
	known := cp.nodes[id]
	cp.mu.Unlock()
	switch {
	case !ok:
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid or revoked credential","code":"UNAUTHENTICATED"}`)
		return "", ""
	case !known:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"node not found","code":"NOT_FOUND"}`)
		return "", ""
	}
	return id, token
}

// Prove writes body as a 200 answer to r, proved as the control plane proves it for node id's
// credential token.
func Prove(w http.ResponseWriter, r *http.Request, token, id string, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(nodeapi.ProofHeader, nodeapi.Proof(nodeapi.CredentialKey(token), r.Header.Get(nodeapi.NonceHeader), id, body))
	w.Write(body)
}

func (cp *FakeCP) workRoute(w http.ResponseWriter, r *http.Request) {
	body, ok := cp.decode(w, r)
	if !ok {
		return
	}
	if !nodeapi.ValidNonce(r.Header.Get(nodeapi.NonceHeader)) {
		cp.t.Errorf("work request without a valid nonce: %q", r.Header.Get(nodeapi.NonceHeader))
	}
	id, token := cp.node(w, r)
	if id == "" {
		return
	}
	var req nodeapi.WorkRequest
	raw, _ := json.Marshal(body)
	json.Unmarshal(raw, &req)
	if req.Running == nil {
		cp.t.Errorf("work request without running: %s", raw)
	}
	cp.mu.Lock()
	cp.work.requests = append(cp.work.requests, req)
	for _, d := range req.Done {
		cp.work.done[d] = true
	}
	cp.mu.Unlock()
	deadline := time.After(time.Duration(min(req.WaitMS, nodeapi.MaxWaitMS)) * time.Millisecond)
	for {
		cp.mu.Lock()
		var offer []nodeapi.Assignment
		for _, a := range cp.work.queued[id] {
			if !cp.work.done[a.ID] {
				offer = append(offer, a)
			}
		}
		wake := cp.work.wake
		cp.mu.Unlock()
		if len(offer) > 0 {
			out, _ := json.Marshal(nodeapi.WorkResponse{Assignments: offer})
			Prove(w, r, token, id, out)
			return
		}
		select {
		case <-wake:
		case <-deadline:
			Prove(w, r, token, id, []byte(`{"assignments":[]}`))
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (cp *FakeCP) eventRoute(w http.ResponseWriter, r *http.Request) {
	body, ok := cp.decode(w, r)
	if !ok {
		return
	}
	id, token := cp.node(w, r)
	if id == "" {
		return
	}
	var ev nodeapi.SandboxEvent
	raw, _ := json.Marshal(body)
	if err := json.Unmarshal(raw, &ev); err != nil || !ev.State.Valid() {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid event: %v","code":"INVALID_INPUT"}`, err)
		return
	}
	cp.mu.Lock()
	cp.work.events = append(cp.work.events, SandboxEventCall{Node: id, Sandbox: r.PathValue("sandbox_id"), Event: ev, At: time.Now()})
	cp.mu.Unlock()
	Prove(w, r, token, id, []byte(`{}`))
}
