package nodeapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// The work API: how the control plane hands placed sandboxes to `cubefleet agent` and hears how
// they end (docs/sandboxes.md, "The work API"). Only our agent speaks it; a stock Cubelet never
// calls these routes (it is registry-only).
//
// The agent holds a long poll: it POSTs a WorkRequest to RouteWork and the control plane answers
// as soon as there is work for the node, or after WorkRequest.WaitMS with no assignments. The
// node opens no port. Both directions are authenticated: the agent sends its node credential as
// `Authorization: Bearer cfn_...`, and the control plane proves every answer with ProofHeader:
// an HMAC over the agent's nonce, the node id and the answer's exact bytes, keyed with the
// SHA-256 of the node credential (the only form of it the control plane keeps). An answer
// without a valid proof is dropped by the agent, so nobody who holds neither the credential nor
// the control plane's database can hand a node work, replay an old answer or alter one.

// The work routes relative to an agent prefix (AgentPrefix), as http.ServeMux patterns.
const (
	// RouteWork is POST with a WorkRequest: 200 with a WorkResponse (and ProofHeader), held
	// open up to WorkRequest.WaitMS while there is nothing to do; 404 for a node that is not
	// registered; 401 without the node's credential; 403 for a stock Cubelet's node.
	RouteWork = "/nodes/{node_id}/work"
	// RouteSandboxEvent is POST with a SandboxEvent about one sandbox: 200 with an empty
	// object (and ProofHeader). Idempotent by (sandbox id, state): a repeated event changes
	// nothing and is answered 200 again. (A warm sandbox reports running twice: once ready,
	// and again when its claim's command runs; see KindWarm and KindClaim.)
	RouteSandboxEvent = "/nodes/{node_id}/sandboxes/{sandbox_id}/events"
)

// WorkPath is the path of node nodeID's work route (POST RouteWork under AgentPrefix).
func WorkPath(nodeID string) string { return AgentPrefix + "/nodes/" + nodeID + "/work" }

// SandboxEventPath is the path of the event route of sandbox sandboxID on node nodeID.
func SandboxEventPath(nodeID, sandboxID string) string {
	return AgentPrefix + "/nodes/" + nodeID + "/sandboxes/" + sandboxID + "/events"
}

// The headers of the control plane's proof.
const (
	// NonceHeader carries the agent's nonce on every work-API request: 16 to 64 characters
	// of base64url, fresh for every request (the agent draws 32 random bytes).
	NonceHeader = "X-Cubefleet-Nonce"
	// ProofHeader carries the control plane's proof on every work-API answer (200 or not):
	// "v1=" and the base64url (no padding) of Proof's HMAC.
	ProofHeader = "X-Cubefleet-Proof"
)

// MaxWaitMS bounds WorkRequest.WaitMS: 30,000 ms. The agent's HTTP timeout must exceed it.
const MaxWaitMS = 30000

// WorkRequest is the body of POST RouteWork.
type WorkRequest struct {
	// Running lists the ids of the sandboxes the agent runs now (started and not ended), as
	// its driver lists them; the control plane reconciles against it like a status report's
	// Sandboxes.
	Running []string `json:"running"`
	// Done lists the assignment ids the agent has carried out since its last work request
	// (their events are sent); the control plane stops offering them.
	Done []string `json:"done,omitempty"`
	// InProgress lists the assignment ids the agent is carrying out (offered before, not done
	// yet): the control plane leaves them out of this request's answer and holds the request
	// as if they were not queued, so that the request waits for new work. A control plane
	// without the field answers them again at once (the agent then asks again once one is
	// done).
	InProgress []string `json:"in_progress,omitempty"`
	// WaitMS is how long the control plane may hold the request when it has no work for the
	// node, in milliseconds: 0 answers at once, at most MaxWaitMS.
	WaitMS int `json:"wait_ms"`
	// Draining is true while the agent's node drains: the agent takes no new start, claim or
	// warm assignment (the control plane sends none), and still carries out stops.
	Draining bool `json:"draining,omitempty"`
}

// WorkResponse is the answer to POST RouteWork: what the node must do, oldest first. An
// assignment is offered again on every work request until the request lists it in Done, and
// carrying one out twice is harmless: a sandbox id starts at most once on a node.
type WorkResponse struct {
	Assignments []Assignment `json:"assignments"`
}

// AssignmentKind says what an Assignment asks.
type AssignmentKind string

// The assignment kinds.
const (
	// KindStart starts Assignment.Sandbox.
	KindStart AssignmentKind = "start"
	// KindStop stops sandbox Assignment.SandboxID (SIGTERM, then SIGKILL after its grace).
	KindStop AssignmentKind = "stop"
	// KindPrepare makes template Assignment.Template ready on the node; the node then lists
	// it in its status reports' local_templates.
	KindPrepare AssignmentKind = "prepare"
	// KindWarm starts Assignment.Sandbox as an idle warm sandbox of its template: ready to
	// run, running nothing of a tenant's yet (Argv empty; its environment comes with the
	// claim). The node sends StateRunning once it is ready.
	KindWarm AssignmentKind = "warm"
	// KindClaim gives a warm sandbox (Assignment.Sandbox.ID) its tenant's command and its
	// whole environment (with its timeout, grace and output limit; its limits are the warm
	// sandbox's). The node sends StateRunning again once the command runs.
	KindClaim AssignmentKind = "claim"
)

// Assignment is one thing the control plane asks a node to do.
type Assignment struct {
	// ID identifies the assignment (asg_...), for WorkRequest.Done.
	ID   string         `json:"id"`
	Kind AssignmentKind `json:"kind"`
	// Sandbox is the sandbox to start, warm or claim (KindStart, KindWarm, KindClaim).
	Sandbox *SandboxSpec `json:"sandbox,omitempty"`
	// SandboxID is the sandbox to stop (KindStop).
	SandboxID string `json:"sandbox_id,omitempty"`
	// Template is the template to prepare (KindPrepare).
	Template *TemplateSpec `json:"template,omitempty"`
}

// SandboxSpec is a sandbox as the node runs it. Env holds resolved values, secrets included:
// the agent hands them to the sandbox and never logs, stores or reports them (only the names).
type SandboxSpec struct {
	// ID is the sandbox id (sbx_...).
	ID string `json:"id"`
	// TemplateID is the template it runs (tpl_...).
	TemplateID string `json:"template_id"`
	// Argv is the command; empty for a warm sandbox (KindWarm).
	Argv []string `json:"argv,omitempty"`
	// Env is the whole environment, "NAME=value" entries.
	Env []string `json:"env,omitempty"`
	// Image is its template's image id (sandboxTemplates[].imageId): the root file system of a
	// microvm sandbox.
	Image string `json:"image,omitempty"`
	// CPUMillicores, MemoryMiB and DiskMiB are the sandbox's limits (0: not limited).
	CPUMillicores int64 `json:"cpu_millicores,omitempty"`
	MemoryMiB     int64 `json:"memory_mib,omitempty"`
	DiskMiB       int64 `json:"disk_mib,omitempty"`
	// TimeoutSeconds ends the sandbox this long after it started (0: none).
	TimeoutSeconds int64 `json:"timeout_seconds,omitempty"`
	// GraceSeconds is the time between SIGTERM and SIGKILL when it is stopped (0: the
	// driver's default, 10 s).
	GraceSeconds int64 `json:"grace_seconds,omitempty"`
	// OutputLimitBytes caps each of stdout and stderr (0: the driver's default, 1 MiB).
	OutputLimitBytes int64 `json:"output_limit_bytes,omitempty"`
	// Network is the template's network: "private" (loopback only; also "") or "public"
	// (egress to the internet only; docs/sandbox-runtime.md).
	Network string `json:"network,omitempty"`
	// EgressAllow lists the private prefixes (CIDR, e.g. "10.20.0.0/16") a public sandbox may
	// reach besides the internet: its template's egressAllow. The node still never lets it
	// reach its own addresses, the control plane, other sandboxes or metadata addresses, inside
	// them or not.
	EgressAllow []string `json:"egress_allow,omitempty"`
	// Runtime is the sandbox runtime the sandbox was placed for ("process" or "microvm", the
	// value of LabelRuntime its node must carry), "" when its template names none (the node's
	// own). A node of another runtime refuses it: the sandbox fails with the reason.
	Runtime string `json:"runtime,omitempty"`
}

// TemplateSpec is a sandbox template as a node prepares it.
type TemplateSpec struct {
	// ID is the template's id (tpl_...); the node reports it as local_templates[].template_id.
	ID string `json:"id"`
	// Name is its fleet name, for people.
	Name string `json:"name,omitempty"`
	// Image is the template's image id (fleet document: sandboxTemplates[].imageId).
	Image string `json:"image,omitempty"`
	// Runtime is the template's runtime ("process" or "microvm"; "" for the node's own): a node
	// of another runtime does not prepare it.
	Runtime string `json:"runtime,omitempty"`
}

// SandboxState is a sandbox's state as a node reports it (a subset of the control plane's
// states: pending and starting are the control plane's own).
type SandboxState string

// The states a node reports.
const (
	// StateRunning: the sandbox's process runs.
	StateRunning SandboxState = "running"
	// StateExited: it ended by itself; ExitCode says how.
	StateExited SandboxState = "exited"
	// StateFailed: it could not be started (Message says why).
	StateFailed SandboxState = "failed"
	// StateKilled: it was ended by a stop, its timeout or the OOM killer (Reason says which).
	StateKilled SandboxState = "killed"
	// StateLost: the node lost track of it (its runtime vanished while the agent was away).
	StateLost SandboxState = "lost"
)

// SandboxEvent is the body of POST RouteSandboxEvent: a state the sandbox reached on the node.
// A final state (every one but running) carries the result: the exit code or signal and the
// captured output, cut at the spec's OutputLimitBytes with the driver's marker.
type SandboxEvent struct {
	State SandboxState `json:"state"`
	// At is when the state was reached, on the node's clock.
	At WireTime `json:"at"`
	// Reason is the driver's word for why (exited, failed, timeout, stopped, oom, lost); Message
	// is for people.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ExitCode is the exit status of an exited sandbox; nil when it was signalled or never ran.
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal that ended it ("SIGKILL"), if one did.
	Signal string `json:"signal,omitempty"`
	// Stdout and Stderr are the captured output (base64 in JSON); the Truncated flags say
	// whether the limit cut them.
	Stdout          []byte `json:"stdout,omitempty"`
	Stderr          []byte `json:"stderr,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// CPUMillis is the CPU time the sandbox used, in milliseconds; PeakMemoryBytes its
	// largest memory use, in bytes (0 when unknown).
	CPUMillis       int64 `json:"cpu_ms,omitempty"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
}

// Final reports whether s ends a sandbox's life (every state but running).
func (s SandboxState) Final() bool { return s != StateRunning }

// Valid reports whether s is one of the states a node reports.
func (s SandboxState) Valid() bool {
	switch s {
	case StateRunning, StateExited, StateFailed, StateKilled, StateLost:
		return true
	}
	return false
}

// CredentialKey returns the key of the control plane's proofs for a node: the SHA-256 of its
// node credential (cfn_...). The agent derives it from the credential it holds; the control
// plane keeps only this hash (its hex form is the node's stored credential hash).
func CredentialKey(credential string) []byte {
	sum := sha256.Sum256([]byte(credential))
	return sum[:]
}

// Proof returns the ProofHeader value for an answer: "v1=" and the base64url (no padding)
// HMAC-SHA256, keyed with key (CredentialKey), of "cubefleet-work-v1", the request's nonce, the
// node id and the answer's exact body, separated by newlines.
func Proof(key []byte, nonce, nodeID string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("cubefleet-work-v1\n" + nonce + "\n" + nodeID + "\n"))
	m.Write(body)
	return "v1=" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ErrBadProof is returned by VerifyProof for an answer the control plane did not prove.
var ErrBadProof = errors.New("the answer carries no valid control-plane proof (X-Cubefleet-Proof): it was not made by the control plane that issued this node's credential, or it was altered or replayed")

// VerifyProof checks header (an answer's ProofHeader) against the answer's body for the request
// that carried nonce: nil when it is Proof's value, ErrBadProof otherwise. The comparison takes
// constant time.
func VerifyProof(key []byte, nonce, nodeID string, body []byte, header string) error {
	want := Proof(key, nonce, nodeID, body)
	if !strings.HasPrefix(header, "v1=") || !hmac.Equal([]byte(header), []byte(want)) {
		return ErrBadProof
	}
	return nil
}

// ValidNonce reports whether s has the shape of a NonceHeader value: 16 to 64 characters of
// base64url.
func ValidNonce(s string) bool {
	if len(s) < 16 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// RouteSandboxOutput is POST with a SandboxOutput: the output a running sandbox wrote since the
// agent's last one (offsets say where each chunk starts, so a repeated or late chunk changes
// nothing). 200 with an empty object (and ProofHeader); NOT_FOUND when the control plane runs no
// such sandbox on the node. The output is the control plane's to show while the sandbox runs
// (sandboxes.logs with follow); the stored result still comes with the final SandboxEvent.
const RouteSandboxOutput = "/nodes/{node_id}/sandboxes/{sandbox_id}/output"

// SandboxOutputPath is the path of the output route of sandbox sandboxID on node nodeID.
func SandboxOutputPath(nodeID, sandboxID string) string {
	return AgentPrefix + "/nodes/" + nodeID + "/sandboxes/" + sandboxID + "/output"
}

// MaxOutputChunk bounds each stream's bytes in one SandboxOutput: 256 KiB (the agent sends a
// longer backlog in several).
const MaxOutputChunk = 256 << 10

// SandboxOutput is the body of POST RouteSandboxOutput: a chunk of each output stream of a
// running sandbox, as captured (the first OutputLimitBytes of a stream, then the driver's cut
// marker). StdoutOffset and StderrOffset are the byte offsets in their stream where Stdout and
// Stderr start (at least 0); each chunk is at most MaxOutputChunk bytes (base64 in JSON).
type SandboxOutput struct {
	StdoutOffset int64  `json:"stdout_offset"`
	Stdout       []byte `json:"stdout,omitempty"`
	StderrOffset int64  `json:"stderr_offset"`
	Stderr       []byte `json:"stderr,omitempty"`
}
