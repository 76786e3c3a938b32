package agent

import (
	"encoding/json"
	"net/http"
)

// Health states of the agent, as GET /healthz reports them.
const (
	StateRegistering = "registering" // registering (first start, or again after a 404)
	StateReporting   = "reporting"   // registered, and the last status report (if any yet) succeeded
	StateFailing     = "failing"     // registered, but the last status report failed
	StateRevoked     = "revoked"     // the control plane revoked the node's credential: needs a new join token
)

// Health is the body of GET /healthz: 200 in every state but StateRevoked, which is 503.
type Health struct {
	State        string `json:"state"`                    // StateRegistering, StateReporting, StateFailing or StateRevoked
	NodeID       string `json:"node_id"`                  // the node IP
	Version      string `json:"version"`                  // cubefleet's version
	RegisteredAt string `json:"registered_at,omitempty"`  // RFC 3339, last successful registration
	LastReportAt string `json:"last_report_at,omitempty"` // RFC 3339, last successful status report
	Error        string `json:"error,omitempty"`          // the last failure, or what to do when revoked
	// NotReady says why the node reports itself not Ready ("<reason>: <message>", e.g.
	// "SandboxRuntimeUnavailable: ..."): the agent may be reporting, yet nothing is placed on
	// its node. Empty when the node reports Ready.
	NotReady string `json:"not_ready,omitempty"`
}

// Health returns the agent's current health, as GET /healthz answers it.
func (a *Agent) Health() Health {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.health
}

// handler serves GET /healthz: the agent's Health as JSON, with status 503 once revoked.
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		h := a.Health()
		if ready, reason, msg := a.readiness(); !ready {
			h.NotReady = reason + ": " + msg
		}
		w.Header().Set("Content-Type", "application/json")
		if h.State == StateRevoked {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(h)
	})
	return mux
}

// setHealth changes the health under the lock.
func (a *Agent) setHealth(f func(h *Health)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.health)
}

// setRevoked records that the node credential was revoked at at (RFC 3339; "" when unknown).
func (a *Agent) setRevoked(at string) {
	a.setHealth(func(h *Health) {
		h.State = StateRevoked
		h.Error = "the control plane revoked this node's credential (the node was deleted" + ifNotEmpty(" at ", at) + "); give the agent a new join token (cubefleet nodes join-token create) and restart it"
	})
}
