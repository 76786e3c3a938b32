package api

// NodeSandboxes is what a node runs by the control plane's records, for nodes.get: the ids of
// its running sandboxes, of those placed there and not yet running (pending on the node), and
// of the unknown ones (running when the node stopped reporting: they may run on), each list at
// most 100, and their counts; WarmIdle counts the idle warm sandboxes among them.
type NodeSandboxes struct {
	Running    int      `json:"running"`
	Pending    int      `json:"pending"`
	Unknown    int      `json:"unknown"`
	RunningIDs []string `json:"runningIds"`
	PendingIDs []string `json:"pendingIds"`
	UnknownIDs []string `json:"unknownIds"`
	WarmIdle   int      `json:"warmIdle"`
}

// SandboxCreateInput is the input of sandboxes.create: the tenant's template (id or name), the
// command as argv (absent: a sandbox that idles until its timeout or a delete, running
// ["sleep","2147483647"]), env laid over the template's (secret://
// references are resolved only on the way to the sandbox), timeoutSeconds (0 to 604800, 0:
// none), terminationGraceSeconds (the time between SIGTERM and SIGKILL when it is stopped:
// deleted, timed out, evicted by a drain's deadline or agent down; 1 to 3600, absent: its
// template's, default 10), the sandbox's labels and the labels its node must carry
// (nodeSelector). With async the
// answer comes at once (state pending, or starting once placed); otherwise the create waits
// until the sandbox runs or ends, at most waitSeconds (default 30, at most 300), and answers
// it as it is then.
type SandboxCreateInput struct {
	TenantID       string            `json:"tenantId"`
	Template       string            `json:"template"`
	Command        []string          `json:"command,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds int64             `json:"timeoutSeconds,omitempty"`
	// TerminationGraceSeconds: see above.
	TerminationGraceSeconds int64             `json:"terminationGraceSeconds,omitempty"`
	Labels                  map[string]string `json:"labels,omitempty"`
	NodeSelector            map[string]string `json:"nodeSelector,omitempty"`
	Async                   bool              `json:"async,omitempty"`
	WaitSeconds             int64             `json:"waitSeconds,omitempty"`
}

// Sandbox is a sandbox as the API shows it. Times are Unix ms on the control plane's clock. Env
// is the create's environment as given: secret:// values stay references (their values reach
// only the sandbox). Reason and Message say why it is in its state; States lists every state it
// reached, oldest first. A warm sandbox (Warm) was started ahead of need by its template's warm
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
	State          SandboxState      `json:"state"`
	Reason         string            `json:"reason,omitempty"`
	Message        string            `json:"message,omitempty"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	NodeSelector   map[string]string `json:"nodeSelector,omitempty"`
	TimeoutSeconds int64             `json:"timeoutSeconds,omitempty"`
	// TerminationGraceSeconds is the time it gets between SIGTERM and SIGKILL when it is
	// stopped (1 to 3600), fixed at its create: the create's, else its template's, else 10.
	TerminationGraceSeconds int64               `json:"terminationGraceSeconds"`
	Resources               SandboxResources    `json:"resources"`
	Warm                    bool                `json:"warm"`
	ClaimedAt               int64               `json:"claimedAt,omitempty"`
	RunsAs                  string              `json:"runsAs,omitempty"`
	CreatedAt               int64               `json:"createdAt"`
	CreatedBy               string              `json:"createdBy"`
	StopRequestedAt         int64               `json:"stopRequestedAt,omitempty"`
	States                  []SandboxTransition `json:"states"`
	Result                  *SandboxResult      `json:"result,omitempty"`
}

// SandboxState is a sandbox's state.
type SandboxState string

// The states of a sandbox: pending (accepted, waiting for a node), starting (placed and handed
// to its node's agent), running (its process runs), unknown (it was running when its node
// stopped reporting: it may run on, and is running again when the node comes back within the
// disconnect grace), and the final ones: exited (ended by itself; the exit code says how),
// failed (could not be started, or never placed before --pending-timeout), killed (stopped:
// deleted, or its timeout), lost (its node lost it, stayed away past the disconnect grace, or
// was deleted).
const (
	SandboxPending  SandboxState = "pending"
	SandboxStarting SandboxState = "starting"
	SandboxRunning  SandboxState = "running"
	SandboxUnknown  SandboxState = "unknown"
	SandboxExited   SandboxState = "exited"
	SandboxFailed   SandboxState = "failed"
	SandboxKilled   SandboxState = "killed"
	SandboxLost     SandboxState = "lost"
)

// Valid reports whether s is one of the states.
func (s SandboxState) Valid() bool {
	switch s {
	case SandboxPending, SandboxStarting, SandboxRunning, SandboxUnknown, SandboxExited, SandboxFailed, SandboxKilled, SandboxLost:
		return true
	}
	return false
}

// MaxSandboxTimeoutSeconds bounds SandboxCreateInput.TimeoutSeconds (7 days); 0 means none.
const MaxSandboxTimeoutSeconds = 7 * 24 * 3600

// Final reports whether s is a final state (exited, failed, killed, lost): the sandbox has
// ended and its result is known.
func (s SandboxState) Final() bool {
	return s == SandboxExited || s == SandboxFailed || s == SandboxKilled || s == SandboxLost
}

// SandboxResources is what a sandbox takes, from its template's flavor: VCPU cores, MemoryGiB and
// DiskGiB in GiB, GPU devices. It counts against quotas with one of "sandboxes".
type SandboxResources struct {
	VCPU      int64 `json:"vcpu"`
	MemoryGiB int64 `json:"memoryGiB"`
	DiskGiB   int64 `json:"diskGiB"`
	GPU       int64 `json:"gpu"`
}

// SandboxTransition is one state a sandbox reached: when (Unix ms, the control plane's clock) and why.
type SandboxTransition struct {
	State  SandboxState `json:"state"`
	At     int64        `json:"at"`
	Reason string       `json:"reason,omitempty"`
}

// SandboxResult is how a sandbox ended (present once its state is final): the exit code of an exited
// sandbox (nil when it was signalled or never ran), the signal that ended it, the bytes kept of
// each output stream (at most --result-max-bytes and the cut marker; sandboxes.logs returns
// them), whether the limit cut them, the CPU time it used (ms) and its peak memory (bytes; 0
// when unknown).
type SandboxResult struct {
	ExitCode        *int   `json:"exitCode,omitempty"`
	Signal          string `json:"signal,omitempty"`
	StdoutBytes     int64  `json:"stdoutBytes"`
	StderrBytes     int64  `json:"stderrBytes"`
	StdoutTruncated bool   `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool   `json:"stderrTruncated,omitempty"`
	CPUMillis       int64  `json:"cpuMs,omitempty"`
	PeakMemoryBytes int64  `json:"peakMemoryBytes,omitempty"`
}

// SandboxListInput is the input of sandboxes.list: state (pending, starting, running,
// unknown, exited, failed, killed, lost), node (a node id), template (id or name) narrow the
// list; warm lists the idle sandboxes of the tenant's warm pools instead; limit 1-1000
// (default 100); cursor the previous page's nextCursor. Newest first.
type SandboxListInput struct {
	TenantID string `json:"tenantId"`
	State    string `json:"state,omitempty"`
	Node     string `json:"node,omitempty"`
	Template string `json:"template,omitempty"`
	Warm     bool   `json:"warm,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Cursor   string `json:"cursor,omitempty"`
}

// SandboxList is a page of sandboxes, newest first; nextCursor is absent on the last page.
type SandboxList struct {
	Items      []Sandbox `json:"items"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// SandboxLogsInput is the input of sandboxes.logs: encoding "text" (default; bytes that are
// not UTF-8 become U+FFFD) or "base64" (the exact bytes). stdoutOffset and stderrOffset (bytes,
// default 0) skip what a client has already: pass the answer's nextStdoutOffset and
// nextStderrOffset to resume where it stopped. With follow, an answer with nothing new from the
// offsets while the sandbox runs is held until output arrives, the sandbox ends or
// timeoutSeconds pass (default 30, at most 300): a long poll.
type SandboxLogsInput struct {
	TenantID       string `json:"tenantId"`
	ID             string `json:"id"`
	Encoding       string `json:"encoding,omitempty"`
	Follow         bool   `json:"follow,omitempty"`
	StdoutOffset   int64  `json:"stdoutOffset,omitempty"`
	StderrOffset   int64  `json:"stderrOffset,omitempty"`
	TimeoutSeconds int64  `json:"timeoutSeconds,omitempty"`
}

// SandboxLogs is a sandbox's captured output from the input's offsets: each stream at most
// --result-max-bytes and, when cut, the marker line "[cubefleet: output truncated after N
// bytes]". final is false while the sandbox has not ended: the streams are then the output its
// node sent so far (every 100 ms while it writes). nextStdoutOffset and nextStderrOffset are the
// byte offsets after the returned output, where the next call resumes.
type SandboxLogs struct {
	ID               string       `json:"id"`
	State            SandboxState `json:"state"`
	Final            bool         `json:"final"`
	Encoding         string       `json:"encoding"`
	Stdout           string       `json:"stdout"`
	Stderr           string       `json:"stderr"`
	StdoutTruncated  bool         `json:"stdoutTruncated,omitempty"`
	StderrTruncated  bool         `json:"stderrTruncated,omitempty"`
	ExitCode         *int         `json:"exitCode,omitempty"`
	NextStdoutOffset int64        `json:"nextStdoutOffset"`
	NextStderrOffset int64        `json:"nextStderrOffset"`
}

// SandboxWaitInput is the input of sandboxes.wait: wait until the sandbox has ended (until
// "ended", the default) or runs or has ended (until "running"), at most timeoutSeconds (default
// 30, at most 300).
type SandboxWaitInput struct {
	TenantID       string `json:"tenantId"`
	ID             string `json:"id"`
	Until          string `json:"until,omitempty"`
	TimeoutSeconds int64  `json:"timeoutSeconds,omitempty"`
}

// SandboxWaitOutput is the sandbox as it was when the wait ended; done says whether it got
// where the wait was for (false: the timeout passed first).
type SandboxWaitOutput struct {
	Sandbox
	Done bool `json:"done"`
}
