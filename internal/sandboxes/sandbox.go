// Package sandboxes is the sandbox lifecycle on the control plane (docs/sandboxes.md): the
// record of every sandbox and its states, admission against the quotas of offers, owner shares
// and tenants, placement through the scheduler, the hand-off to the nodes' agents over the work
// API (a per-node queue of nodeapi.Assignment values held by the agent's long poll, and the
// sandbox events it sends back), results kept past the node for the retention, warm pools,
// template preparation on joining nodes, and the detection of sandboxes a node lost.
//
// A sandbox's life is the control plane's: its record, transitions and result live in the
// database (module "sandboxes"), readable from every replica. The loops that must run once
// (waiting creates, lost sandboxes, warm pools, template preparation, the retention sweep) run
// on the replica that holds the database lease "sandboxes".
package sandboxes

import (
	"encoding/json"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// State is a sandbox's state.
type State string

// The states of a sandbox: pending (accepted, waiting for a node), starting (placed and handed
// to its node's agent), running (its process runs), unknown (it was running when its node
// stopped reporting: within its disconnect grace it may run on, and it is running again when
// the node comes back and lists it), and the final ones: exited (ended by
// itself; the exit code says how), failed (could not be started, or never placed before
// --pending-timeout), killed (stopped: deleted, or its timeout), lost (its node lost it, stayed
// away past the disconnect grace, or was deleted).
const (
	StatePending  State = "pending"
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateUnknown  State = "unknown"
	StateExited   State = "exited"
	StateFailed   State = "failed"
	StateKilled   State = "killed"
	StateLost     State = "lost"
)

// States lists every state in life order.
var States = []State{StatePending, StateStarting, StateRunning, StateUnknown, StateExited, StateFailed, StateKilled, StateLost}

// Final reports whether s ends a sandbox's life.
func (s State) Final() bool {
	switch s {
	case StateExited, StateFailed, StateKilled, StateLost:
		return true
	}
	return false
}

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Reasons a sandbox is in its state (Sandbox.Reason, Transition.Reason), besides the agent's
// own words for a final state (exited, failed, timeout, stopped, lost).
const (
	ReasonCreated        = "created"            // pending: accepted
	ReasonWaitingForRoom = "waiting_for_room"   // pending: no node of the pool has room
	ReasonPlaced         = "placed"             // starting: placed on its node and queued for it
	ReasonStarted        = "started"            // running: its agent reported it running
	ReasonListed         = "listed"             // running: its node listed it before its event came
	ReasonWarmReady      = "warm_ready"         // running: an idle warm sandbox, ready to be claimed
	ReasonClaimed        = "claimed"            // running: a create claimed this warm sandbox
	ReasonReconnected    = "reconnected"        // running: its node came back within the disconnect grace and lists it
	ReasonDisconnected   = "node_disconnected"  // unknown: its node stopped reporting (Down); it may run on
	ReasonPendingTimeout = "pending_timeout"    // failed: no room within --pending-timeout
	ReasonStartTimeout   = "start_timeout"      // lost: its node never reported it running
	ReasonNodeDown       = "node_down"          // lost: its node went Down or Lost (a running one: and stayed away past the disconnect grace)
	ReasonNodeDeleted    = "node_deleted"       // lost: its node was deleted
	ReasonNotListed      = "not_listed"         // lost: its node's reports no longer list it
	ReasonSecret         = "secret_unavailable" // failed: a secret:// of its env could not be read
	ReasonDeleted        = "deleted"            // killed: deleted before it ran
	ReasonDraining       = "node_draining"      // killed: an idle warm sandbox on a draining node
	ReasonNodeDrained    = "node_drained"       // killed: still running when its node's drain deadline passed
	ReasonWarmSurplus    = "warm_surplus"       // killed: an idle warm sandbox beyond the template's warm.max
)

// Resources is what a sandbox takes, from its template's flavor: VCPU cores, MemoryGiB and
// DiskGiB in GiB, GPU devices. It counts against quotas with one of "sandboxes".
type Resources struct {
	VCPU      int64 `json:"vcpu"`
	MemoryGiB int64 `json:"memoryGiB"`
	DiskGiB   int64 `json:"diskGiB"`
	GPU       int64 `json:"gpu"`
}

// Transition is one state a sandbox reached: when (Unix ms, the control plane's clock) and why.
type Transition struct {
	State  State  `json:"state"`
	At     int64  `json:"at"`
	Reason string `json:"reason,omitempty"`
}

// Result is how a sandbox ended (present once its state is final): the exit code of an exited
// sandbox (nil when it was signalled or never ran), the signal that ended it, the bytes kept of
// each output stream (at most --result-max-bytes and the cut marker; sandboxes.logs returns
// them), whether the limit cut them, the CPU time it used (ms) and its peak memory (bytes; 0
// when unknown).
type Result struct {
	ExitCode        *int   `json:"exitCode,omitempty"`
	Signal          string `json:"signal,omitempty"`
	StdoutBytes     int64  `json:"stdoutBytes"`
	StderrBytes     int64  `json:"stderrBytes"`
	StdoutTruncated bool   `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool   `json:"stderrTruncated,omitempty"`
	CPUMillis       int64  `json:"cpuMs,omitempty"`
	PeakMemoryBytes int64  `json:"peakMemoryBytes,omitempty"`
}

// Sandbox is a sandbox as the API shows it. Times are Unix ms on the control plane's clock. Env
// is the create's environment as given: secret:// values stay references (their values reach
// only the sandbox). Reason and Message say why it is in its state; States lists every state it
// reached, oldest first (of several disconnects of its node, the last one's unknown, and its
// running again when it came back). A warm sandbox (Warm) was started ahead of need by its template's warm
// pool; ClaimedAt is when a create claimed it (0 while it idles). A warm sandbox claimed by a
// create that waited for room takes that create's id (ID); RunsAs is then the warm sandbox's
// own id, the one its node knows it by (empty when that is ID).
type Sandbox struct {
	ID             string            `json:"id"`
	TenantID       string            `json:"tenantId"`
	TemplateID     string            `json:"templateId"`
	Template       string            `json:"template"`
	PoolID         string            `json:"poolId"`
	FlavorID       string            `json:"flavorId"`
	NodeID         string            `json:"nodeId,omitempty"`
	State          State             `json:"state"`
	Reason         string            `json:"reason,omitempty"`
	Message        string            `json:"message,omitempty"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	NodeSelector   map[string]string `json:"nodeSelector,omitempty"`
	TimeoutSeconds int64             `json:"timeoutSeconds,omitempty"`
	// TerminationGraceSeconds is the time between SIGTERM and SIGKILL when it is stopped
	// (deleted, timed out, evicted by a drain's deadline, agent down), 1 to 3600.
	TerminationGraceSeconds int64        `json:"terminationGraceSeconds"`
	Resources               Resources    `json:"resources"`
	Warm                    bool         `json:"warm"`
	ClaimedAt               int64        `json:"claimedAt,omitempty"`
	RunsAs                  string       `json:"runsAs,omitempty"`
	CreatedAt               int64        `json:"createdAt"`
	CreatedBy               string       `json:"createdBy"`
	StopRequestedAt         int64        `json:"stopRequestedAt,omitempty"`
	States                  []Transition `json:"states"`
	Result                  *Result      `json:"result,omitempty"`
}

// AuditTarget names the sandbox in audit rows.
func (s Sandbox) AuditTarget() string { return s.ID }

// Ended reports whether the sandbox's state is final.
func (s Sandbox) Ended() bool { return s.State.Final() }

// spec is the create's input as stored (column spec): what the sandbox runs.
type spec struct {
	Command        []string          `json:"command,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	NodeSelector   map[string]string `json:"nodeSelector,omitempty"`
	TimeoutSeconds int64             `json:"timeoutSeconds,omitempty"`
	// GraceSeconds is the terminationGraceSeconds in force, fixed at the create (its own, its
	// template's, or the default); 0 in records written before it existed: the default.
	GraceSeconds int64 `json:"terminationGraceSeconds,omitempty"`
	// DisconnectGraceSeconds is its template's disconnectGraceSeconds at the create; 0: the
	// server's --disconnect-grace.
	DisconnectGraceSeconds int64 `json:"disconnectGraceSeconds,omitempty"`
}

// graceSeconds is the sandbox's terminationGraceSeconds: the stored one, or the default.
func (s spec) graceSeconds() int64 {
	if s.GraceSeconds == 0 {
		return fieldrules.DefaultTerminationGraceSeconds
	}
	return s.GraceSeconds
}

// record is a row of table sandboxes.
type record struct {
	ID, TenantID, TemplateID, TemplateName, PoolID, FlavorID, NodeID string
	State                                                            State
	Warm                                                             bool
	ClaimedAt                                                        int64
	Spec                                                             spec
	Res                                                              Resources
	Charged, Queued                                                  bool
	Priority                                                         int
	CreatedBy                                                        string
	CreatedAt                                                        int64
	PendingReason                                                    string
	StartingAt                                                       int64
	StartingReason                                                   string
	RunningAt                                                        int64
	RunningReason                                                    string
	EndedAt                                                          int64
	EndReason, Message                                               string
	ExitCode                                                         *int
	Signal                                                           string
	StdoutBytes, StderrBytes                                         int64
	StdoutTruncated, StderrTruncated                                 bool
	CPUMillis, PeakMemoryBytes                                       int64
	StopRequestedAt, DeletedAt, UpdatedAt                            int64
	RunsAs                                                           string // the id its node knows it by (ID but for a claim by a waiting create)
	StopReason                                                       string // why the control plane stopped it, when not a delete (ReasonNodeDrained)
	UnknownAt, ReconnectedAt                                         int64  // when it last became unknown, and ran on after that
}

// view renders r for the API.
func (r *record) view() Sandbox {
	s := Sandbox{
		ID: r.ID, TenantID: r.TenantID, TemplateID: r.TemplateID, Template: r.TemplateName, PoolID: r.PoolID, FlavorID: r.FlavorID,
		NodeID: r.NodeID, State: r.State, Message: r.Message, Command: r.Spec.Command, Env: r.Spec.Env, Labels: r.Spec.Labels,
		NodeSelector: r.Spec.NodeSelector, TimeoutSeconds: r.Spec.TimeoutSeconds, TerminationGraceSeconds: r.Spec.graceSeconds(), Resources: r.Res, Warm: r.Warm, ClaimedAt: r.ClaimedAt,
		CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, StopRequestedAt: r.StopRequestedAt,
	}
	if r.RunsAs != r.ID {
		s.RunsAs = r.RunsAs
	}
	if s.Command == nil {
		s.Command = []string{}
	}
	s.States = append(s.States, Transition{StatePending, r.CreatedAt, r.PendingReason})
	if r.StartingAt != 0 {
		s.States = append(s.States, Transition{StateStarting, r.StartingAt, r.StartingReason})
	}
	if r.RunningAt != 0 {
		s.States = append(s.States, Transition{StateRunning, r.RunningAt, r.RunningReason})
	}
	if r.UnknownAt != 0 {
		s.States = append(s.States, Transition{StateUnknown, r.UnknownAt, ReasonDisconnected})
		if r.ReconnectedAt > r.UnknownAt {
			s.States = append(s.States, Transition{StateRunning, r.ReconnectedAt, ReasonReconnected})
		}
	}
	if r.State.Final() {
		s.States = append(s.States, Transition{r.State, r.EndedAt, r.EndReason})
		s.Result = &Result{ExitCode: r.ExitCode, Signal: r.Signal, StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
			StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, CPUMillis: r.CPUMillis, PeakMemoryBytes: r.PeakMemoryBytes}
	}
	s.Reason = s.States[len(s.States)-1].Reason
	return s
}

// usage is what a sandbox counts against its quotas: its resources and one of "sandboxes".
func (r *record) usage() usage {
	return usage{VCPU: r.Res.VCPU, MemoryGiB: r.Res.MemoryGiB, DiskGiB: r.Res.DiskGiB, GPU: r.Res.GPU, Sandboxes: 1}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null" // plain values only: cannot happen
	}
	return string(b)
}
