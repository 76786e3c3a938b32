package api

// NodeCordonInput is the input of nodes.cordon: Detail (at most 200 characters) says why.
type NodeCordonInput struct {
	NodeID string `json:"nodeId"`
	Detail string `json:"detail,omitempty"`
}

// NodeOutput is one node as nodes.get, nodes.cordon, nodes.uncordon, nodes.drain, nodes.label
// and nodes.delete return it, with the server's clock (Now, Unix ms) and, when the scheduler
// knows the node, its room: reported use, use reserved for sandboxes placed and not yet
// reported, and what is left (docs/scheduler.md). nodes.get and nodes.drain add the sandboxes
// the control plane runs there (Sandboxes: running, and placed but not yet running, with their
// ids).
type NodeOutput struct {
	Node
	Now       int64          `json:"now"`
	Room      *Room          `json:"room,omitempty"`
	Sandboxes *NodeSandboxes `json:"sandboxes,omitempty"`
}

// Node is a node as the public API (nodes.list, nodes.get) shows it. Times are Unix
// milliseconds on the control plane's clock; CPU in thousandths of a core, memory in MiB.
// State is Health's. A node is a candidate for work only when it is Ready, which implies
// ReportedSinceStart: a node with no report since this server started is Unknown, then what its
// last report makes it, never Ready. HeartbeatWindowMs is its heartbeat window
// (HealthPolicy.Window of ReportIntervalMs).
type Node struct {
	ID string `json:"id"`
	IP string `json:"ip"`
	// "cubefleet" or "cubelet" (stock)
	Agent        string `json:"agent"`
	RegistryOnly bool   `json:"registryOnly"`
	PoolID       string `json:"poolId,omitempty"`
	// the pool's fleet name
	Pool            string    `json:"pool,omitempty"`
	ClusterLabel    string    `json:"clusterLabel,omitempty"`
	State           NodeState `json:"state"`
	StateSince      int64     `json:"stateSince,omitempty"`
	Healthy         bool      `json:"healthy"`
	UnhealthyReason string    `json:"unhealthyReason,omitempty"`
	Cordoned        bool      `json:"cordoned"`
	CordonDetail    string    `json:"cordonDetail,omitempty"`
	// who set the cordon: a principal id, or node:<id> (the node itself)
	CordonedBy string `json:"cordonedBy,omitempty"`
	// absent unless the node is draining
	Drain                *NodeDrain        `json:"drain,omitempty"`
	Schedulable          bool              `json:"schedulable"`
	UnschedulableReasons []string          `json:"unschedulableReasons,omitempty"`
	Labels               map[string]string `json:"labels"`
	InstanceType         string            `json:"instanceType,omitempty"`
	RegisteredAt         int64             `json:"registeredAt"`
	LastReportAt         int64             `json:"lastReportAt"`
	// the node's clock, clamped
	HeartbeatAt int64 `json:"heartbeatAt,omitempty"`
	// a report (or registration) arrived since this server started
	ReportedSinceStart bool `json:"reportedSinceStart"`
	// Suspect after this long without a report, Down after twice
	HeartbeatWindowMs int64 `json:"heartbeatWindowMs"`
	// the observed report interval (smoothed); absent until observed
	ReportIntervalMs int64          `json:"reportIntervalMs,omitempty"`
	Capacity         NodeResources  `json:"capacity"`
	Quota            NodeQuota      `json:"quota"`
	Allocated        *NodeAllocated `json:"allocated,omitempty"`
	DiskUsage        *NodeDiskUsage `json:"diskUsage,omitempty"`
	Images           int            `json:"images"`
	LocalTemplates   []string       `json:"localTemplates,omitempty"`
	// keys as the node reports them
	Versions []ComponentVersion `json:"versions,omitempty"`
	// keys as the node reports them
	HostFacts *HostFacts `json:"hostFacts,omitempty"`
	// NotReadyReason and NotReadyMessage are the reason and message of the Ready condition the
	// node last reported, when that condition is not True (absent otherwise): why the node
	// says it cannot take work, in its own words (e.g. SandboxRuntimeUnavailable: sandbox
	// directory ... in use by process 24288).
	NotReadyReason  string `json:"notReadyReason,omitempty"`
	NotReadyMessage string `json:"notReadyMessage,omitempty"`
}

// NodeState is a node's health, from the registry's one health function.
type NodeState string

// The health states, in the order a silent node walks through them; Unknown is the state of a
// node that has not reported since the server started.
const (
	// NodeReady: last report within the heartbeat window and its Ready condition True.
	NodeReady NodeState = "Ready"
	// NodeNotReady: last report within the heartbeat window, but Ready was not True.
	NodeNotReady NodeState = "NotReady"
	// NodeSuspect: one heartbeat window missed.
	NodeSuspect NodeState = "Suspect"
	// NodeDown: two heartbeat windows missed.
	NodeDown NodeState = "Down"
	// NodeLost: no report for the lost-after duration.
	NodeLost NodeState = "Lost"
	// NodeUnknown: no report since the server started, and less than one heartbeat window
	// since the start.
	NodeUnknown NodeState = "Unknown"
)

// The bounds of JoinTokenCreateInput: Uses 1 to MaxJoinTokenUses, TTLSeconds at most
// MaxJoinTokenTTLSeconds (7 days).
const (
	MaxJoinTokenUses       = 10000
	MaxJoinTokenTTLSeconds = 7 * 24 * 3600
)

// NodeStates are the health states, in the order a silent node walks through them.
func NodeStates() []NodeState {
	return []NodeState{NodeReady, NodeNotReady, NodeSuspect, NodeDown, NodeLost, NodeUnknown}
}

// RegistryOnlyReason is why a stock Cubelet's node is registry-only (Node.RegistryOnly).
const RegistryOnlyReason = "registry-only: a stock Cubelet does not serve cubefleet's agent work API (listed, health-tracked, cordoned and deleted only)"

// NodeDrain is a node's drain as the public API shows it (View.Drain, present only while the
// node is draining): State (Draining or Drained), the Reason given (at most 200 characters),
// who asked (RequestedBy: a principal id, as in events and audit rows) and when (RequestedAt,
// Unix ms), the sandboxes it still runs by its last report (SandboxesLeft, its allocated.mvm_num;
// 0 when it never reported), and when it first reported none while draining (DrainedAt, Unix
// ms; absent while Draining); Deadline (Unix ms, absent without one) is when the sandboxes
// still running there are stopped (nodes.drain's deadlineSeconds).
type NodeDrain struct {
	State         DrainState `json:"state"`
	Reason        string     `json:"reason,omitempty"`
	RequestedBy   string     `json:"requestedBy,omitempty"`
	RequestedAt   int64      `json:"requestedAt"`
	SandboxesLeft int64      `json:"sandboxesLeft"`
	DrainedAt     int64      `json:"drainedAt,omitempty"`
	Deadline      int64      `json:"deadline,omitempty"`
}

// DrainState is where a node's drain stands, from the node's last report.
type DrainState string

// The drain states.
const (
	// DrainDraining: cordoned, and the node still runs sandboxes by its last report.
	DrainDraining DrainState = "Draining"
	// DrainDrained: the node reported no sandboxes while draining.
	DrainDrained DrainState = "Drained"
)

// NodeResources is a capacity: MilliCPU in thousandths of a core, MemoryMiB in MiB.
type NodeResources struct {
	MilliCPU  int64 `json:"milliCpu"`
	MemoryMiB int64 `json:"memoryMiB"`
}

// NodeQuota is what the scheduler may place on a node: MilliCPU (thousandths of a core,
// already overcommitted), MemoryMiB, MaxMvm microVMs, CreateConcurrent creates at once
// (0: no per-node limit).
type NodeQuota struct {
	MilliCPU           int64    `json:"milliCpu"`
	MemoryMiB          int64    `json:"memoryMiB"`
	MaxMvm             int64    `json:"maxMvm"`
	CreateConcurrent   int64    `json:"createConcurrent"`
	PausedReleaseRatio *float64 `json:"pausedReleaseRatio,omitempty"`
}

// NodeAllocated is what a node last reported as committed to sandboxes: MilliCPU, MemoryMiB,
// Mvm microVMs (counted as its running sandboxes), MvmRunning, NICQueues, disks in MiB. At is
// the node's metric time.
type NodeAllocated struct {
	MilliCPU      int64 `json:"milliCpu"`
	MemoryMiB     int64 `json:"memoryMiB"`
	Mvm           int64 `json:"mvm"`
	MvmRunning    int64 `json:"mvmRunning"`
	NICQueues     int64 `json:"nicQueues"`
	DataDiskMiB   int64 `json:"dataDiskMiB"`
	StorageDiskMB int64 `json:"storageDiskMiB"`
	At            int64 `json:"at,omitempty"`
}

// NodeDiskUsage is how full a node's disks are, in percent.
type NodeDiskUsage struct {
	Data    float64 `json:"dataPercent"`
	Storage float64 `json:"storagePercent"`
	Sys     float64 `json:"sysPercent"`
}

// ComponentVersion is one entry of `versions` (the node-agent status report): a component's version and where it
// was read. Source is manifest, binary, file or component-json; Variant is bm or pvm for the
// guest kernel. Each field is at most MaxVersionFieldRunes runes without control characters
// (CheckVersions).
type ComponentVersion struct {
	// e.g. "cubelet", "cubefleet-agent", "guest-image"
	Component string `json:"component"`
	// e.g. "v1.2.3", "(devel)"
	Version string `json:"version,omitempty"`
	// VCS revision
	Commit string `json:"commit,omitempty"`
	// RFC 3339
	BuildTime string `json:"build_time,omitempty"`
	// manifest, binary, file or component-json
	Source string `json:"source,omitempty"`
	// bm or pvm for the guest kernel
	Variant string `json:"variant,omitempty"`
}

// HostFacts is `host_facts`: the CPU, kernel and KVM identity of a node and its physical size
// (the node-agent status report). KVMModuleScanned is transient:
// when false the previous KVM module fingerprint and taint are kept, and it is never stored.
type HostFacts struct {
	// /proc/cpuinfo vendor_id (x86) or CPU implementer (arm64)
	CPUVendor string `json:"cpu_vendor,omitempty"`
	// /proc/cpuinfo model name (x86) or CPU part (arm64)
	CPUModel string `json:"cpu_model,omitempty"`
	// a hash of the CPU's identity (cubefleet agent: 16 hex digits)
	CPUIDHash string `json:"cpuid_hash,omitempty"`
	// /proc/sys/kernel/osrelease
	HostKernelRelease string `json:"host_kernel_release,omitempty"`
	// a hash of the kernel (cubefleet agent: 16 hex digits)
	HostKernelFingerprint string `json:"host_kernel_fingerprint,omitempty"`
	// KVM_GET_API_VERSION of /dev/kvm; 0 unknown
	KVMAPIVersion int64 `json:"kvm_api_version,omitempty"`
	// a hash of the kvm module
	KVMModuleFingerprint string `json:"kvm_module_fingerprint,omitempty"`
	// the kernel's taint flags
	KVMModuleTaint string `json:"kvm_module_taint,omitempty"`
	// false: the two above were not scanned this time
	KVMModuleScanned bool `json:"kvm_module_scanned,omitempty"`
	// logical CPUs of the host, before overcommit
	CPUCount int64 `json:"cpu_count,omitempty"`
	// MemTotal of the host, MiB, before overcommit
	MemTotalMB int64 `json:"mem_total_mb,omitempty"`
}

// NodeDeleteInput is the input of nodes.delete: the node must be cordoned; without Force it
// must also be Ready and run no sandboxes.
type NodeDeleteInput struct {
	NodeID string `json:"nodeId"`
	Force  bool   `json:"force,omitempty"`
}

// NodeDrainInput is the input of nodes.drain: the node to drain and, optionally, why (Reason,
// at most 200 characters; it becomes the cordon's detail unless the node is already
// cordoned). Draining a node that is already draining changes nothing. A drain that would take
// more of the pool's nodes out at once than its policy.disruptionBudget allows is CONFLICT
// naming the budget, unless Force (then the audit row says what it overrode). DeadlineSeconds
// (1 to MaxDrainDeadlineSeconds, 7 days; 0: none) sets the drain's deadline that long from now:
// once it passes, the sandboxes still running there are stopped (SIGTERM, then SIGKILL after
// each one's terminationGraceSeconds) and end killed with reason node_drained, their results
// kept. Without it nothing is evicted. A drain of a node that drains already may bring its
// deadline forward, never push it back.
type NodeDrainInput struct {
	NodeID          string `json:"nodeId"`
	Reason          string `json:"reason,omitempty"`
	Force           bool   `json:"force,omitempty"`
	DeadlineSeconds int64  `json:"deadlineSeconds,omitempty"`
}

// MaxDrainDeadlineSeconds bounds NodeDrainInput.DeadlineSeconds (7 days).
const MaxDrainDeadlineSeconds = 7 * 24 * 3600

// NodeRef names one node by its id (a Cubelet's is its IP address).
type NodeRef struct {
	NodeID string `json:"nodeId"`
}

// JoinTokenCreateInput is the input of nodes.joinTokens.create: the pool the node joins (id or
// fleet name), how many registrations the token allows (Uses: absent means 1, else 1 to
// 10,000), its lifetime in seconds (default 3600, at most 7 days), and the address it is
// accepted from and registers (IP: not unspecified, multicast or broadcast; without it the
// token binds itself to the address of its first successful registration, unless AnyIP).
type JoinTokenCreateInput struct {
	Pool       string `json:"pool"`
	Uses       *int   `json:"uses,omitempty"`
	TTLSeconds int64  `json:"ttlSeconds,omitempty"`
	IP         string `json:"ip,omitempty"`
	AnyIP      bool   `json:"anyIp,omitempty"`
}

// JoinTokenCreated is the output of nodes.joinTokens.create: the token's metadata and the
// token itself, shown only here.
type JoinTokenCreated struct {
	JoinToken JoinToken `json:"joinToken"`
	Token     string    `json:"token"`
}

// JoinToken is a join token as the API shows it: never the token itself (shown once, at
// creation) nor its hash. Prefix is the token's first characters, to recognise it; Pool the
// pool's fleet name; Uses the registrations it allowed and UsesLeft those left; IP the address
// it is bound to ("" until its first successful registration binds it, or with AnyIP); State
// one of JoinTokenStates. Times are Unix milliseconds; RevokedAt and RevokedBy (a principal id)
// are set once it is revoked.
type JoinToken struct {
	ID        string         `json:"id"`
	Prefix    string         `json:"prefix"`
	PoolID    string         `json:"poolId"`
	Pool      string         `json:"pool,omitempty"`
	Uses      int            `json:"uses"`
	UsesLeft  int            `json:"usesLeft"`
	IP        string         `json:"ip,omitempty"`
	AnyIP     bool           `json:"anyIp,omitempty"`
	State     JoinTokenState `json:"state"`
	ExpiresAt int64          `json:"expiresAt"`
	CreatedAt int64          `json:"createdAt"`
	CreatedBy string         `json:"createdBy"`
	RevokedAt int64          `json:"revokedAt,omitempty"`
	RevokedBy string         `json:"revokedBy,omitempty"`
}

// JoinTokenState is where a join token stands.
type JoinTokenState string

// The join token states.
const (
	// JoinTokenUsable: not revoked, not expired, uses left.
	JoinTokenUsable JoinTokenState = "usable"
	// JoinTokenUsed: every use was taken.
	JoinTokenUsed JoinTokenState = "used"
	// JoinTokenExpired: its lifetime ended.
	JoinTokenExpired JoinTokenState = "expired"
	// JoinTokenRevoked: revoked (nodes.joinTokens.revoke); this wins over the others.
	JoinTokenRevoked JoinTokenState = "revoked"
)

// JoinTokenListInput is the input of nodes.joinTokens.list: without All only the usable
// tokens (not revoked, not expired, uses left), with it every one.
type JoinTokenListInput struct {
	All bool `json:"all,omitempty"`
}

// JoinTokenList is the output of nodes.joinTokens.list: the tokens oldest first (never a
// token or its hash), and the server's clock (Now, Unix ms).
type JoinTokenList struct {
	Items []JoinToken `json:"items"`
	Now   int64       `json:"now"`
}

// JoinTokenRef names one join token by its id (jtk_...).
type JoinTokenRef struct {
	ID string `json:"id"`
}

// JoinTokenOutput is the output of nodes.joinTokens.revoke: the token as it is now (state
// revoked, with revokedAt and revokedBy).
type JoinTokenOutput struct {
	JoinToken JoinToken `json:"joinToken"`
}

// NodeLabelInput is the input of nodes.label: Set is merged into the node's labels, then the
// keys in Remove are removed. Labels follow Kubernetes' rules (key [prefix/]name, value at most
// 63 characters, at most 64 labels); the isolation label is refused (FORBIDDEN).
type NodeLabelInput struct {
	NodeID string            `json:"nodeId"`
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// NodeLabelOutput is the output of nodes.label: the node after the change, and whether its
// labels changed (false when every label set already had its value and every key removed was
// absent).
type NodeLabelOutput struct {
	NodeOutput
	Changed bool `json:"changed"`
}

// NodeCordonOutput is the output of nodes.cordon and nodes.uncordon: the node after the call,
// and whether the call changed its cordon (false when the node already was cordoned with that
// detail by that principal, or already uncordoned and not draining).
type NodeCordonOutput struct {
	NodeOutput
	Changed bool `json:"changed"`
}

// NodeListInput is the input of nodes.list: Pool (a pool id or fleet name) and State (Ready,
// NotReady, Suspect, Down, Lost, Unknown) narrow the list; empty means every node. A Pool that matches
// no node and names no pool is NOT_FOUND.
type NodeListInput struct {
	Pool  string `json:"pool,omitempty"`
	State string `json:"state,omitempty"`
}

// NodeList is the output of nodes.list: the nodes sorted by id, the server's clock when it
// answered (Now, Unix ms: a report's age is Now - lastReportAt), the health settings in
// milliseconds (the heartbeat timeout is the shortest window; each node's is its
// heartbeatWindowMs), and Rooms: by node id, the scheduler's view of each listed node it knows
// (reported use, use reserved for sandboxes placed and not yet reported, what is left;
// docs/scheduler.md), as nodes.get's room.
type NodeList struct {
	Items            []Node           `json:"items"`
	Now              int64            `json:"now"`
	HeartbeatTimeout int64            `json:"heartbeatTimeoutMs"`
	LostAfter        int64            `json:"lostAfterMs"`
	Rooms            map[string]*Room `json:"rooms,omitempty"`
}
