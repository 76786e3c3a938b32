package api

import "encoding/json"

// FleetInput is the input of fleet.plan and fleet.apply (docs/fleet.md, "Plan" and "Apply"):
// Config is the fleet document as JSON (a FleetDocument marshalled, or a file's bytes; at most
// 8 MiB with the rest of the input), Prune makes objects the document leaves out deletes (pools:
// archives). PlanHash (apply only) refuses the apply with CONFIG_DRIFT unless the plan it would
// run has that hash; DenyDelete (apply only) refuses a plan with a delete or archive.
type FleetInput struct {
	TenantID string          `json:"tenantId"`
	Config   json.RawMessage `json:"config"`
	Prune    bool            `json:"prune,omitempty"`
	// apply only
	PlanHash string `json:"planHash,omitempty"`
	// apply only
	DenyDelete bool `json:"denyDelete,omitempty"`
}

// The actions of a plan's change (FleetChange.Action).
const (
	FleetActionCreate    = "create"
	FleetActionUpdate    = "update"
	FleetActionDelete    = "delete" // an archive, for pools
	FleetActionUnchanged = "unchanged"
)

// FleetApplyResult is fleet.apply's result: the plan that ran and the number of calls applied.
type FleetApplyResult struct {
	Plan    *FleetPlan `json:"plan"`
	Applied int        `json:"applied"`
}

// FleetPlan is the result of fleet.plan (docs/plan-apply.md). PlanHash is the hex SHA-256 of the
// RFC 8785 canonical JSON of Calls: the same document against the same fleet gives the same
// hash in every process and for every caller. NotInDocument lists, for a plan without prune,
// the tenant's objects the document leaves out, which the plan keeps and a plan with prune
// would delete (archive, for pools), in the order prune would list them; sites, which fleet
// never deletes, are not among them. It is empty with prune (they are deletes then) and is not
// part of PlanHash.
type FleetPlan struct {
	TenantID      string           `json:"tenantId"`
	Prune         bool             `json:"prune"`
	Changes       []FleetChange    `json:"changes"`
	Calls         []FleetCall      `json:"calls"`
	Summary       FleetSummary     `json:"summary"`
	PlanHash      string           `json:"planHash"`
	NotInDocument []FleetObjectRef `json:"notInDocument"`
}

// FleetChange is one item of a plan: an item of the document or, with prune, an object the document
// leaves out. Fields lists the fields an update changes and Diffs their current and desired
// values, in the same order; Blocked says the change cannot be applied, and Note says why (or
// notes something harmless, e.g. an unenforced quota key).
type FleetChange struct {
	Kind    string           `json:"kind"`
	Name    string           `json:"name"`
	Action  string           `json:"action"`
	Fields  []string         `json:"fields,omitempty"`
	Diffs   []FleetFieldDiff `json:"diffs,omitempty"`
	Blocked bool             `json:"blocked,omitempty"`
	Note    string           `json:"note,omitempty"`
}

// FleetFieldDiff is one field an update changes: its value now (From) and in the document (To), as
// the API shows them; nil (JSON null) is an empty value. Config entries are secret references,
// never secrets, so a diff shows nothing secret.
type FleetFieldDiff struct {
	Field string      `json:"field"`
	From  interface{} `json:"from"`
	To    interface{} `json:"to"`
}

// FleetCall is one API call fleet.apply makes: Method (e.g. "compute.pools.create") and its Input
// exactly as the API takes it. Kind and Name say which change it belongs to. A create carries
// its idempotency key (`fleet:<tenant>:<kind>:<name>`), never the id derived from it, and
// references objects the same plan creates as `key:<idempotency key>`; updates and deletes
// carry the object's current revision.
type FleetCall struct {
	Method string                 `json:"method"`
	Kind   string                 `json:"kind"`
	Name   string                 `json:"name"`
	Input  map[string]interface{} `json:"input"`
}

// FleetSummary counts a plan's changes: those that can run by action, and the blocked ones
// (BlockedChanges, which run nothing) apart; Blocked is true when any change is blocked.
type FleetSummary struct {
	Create         int  `json:"create"`
	Update         int  `json:"update"`
	Delete         int  `json:"delete"`
	Unchanged      int  `json:"unchanged"`
	Blocked        bool `json:"blocked"`
	BlockedChanges int  `json:"blockedChanges,omitempty"`
}

// FleetObjectRef names one object of a tenant's fleet: its kind (site, pool, offer, ...) and its
// fleet name (docs/fleet-document.md, "Names instead of ids").
type FleetObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// FleetExport is fleet.export's result: the tenant's fleet as a document, and what it left out.
type FleetExport struct {
	Config  *FleetDocument `json:"config"`
	Missing []FleetMissing `json:"missing"`
}

// FleetDocument is version 1 of the fleet document (docs/fleet-document.md). Its rules
// are those the compute API checks too. Every list
// is optional and holds at most 1000 items; an empty list and a missing one mean the same (the
// decoder returns nil for both). Names are unique within their list (flavors by pool and name).
type FleetDocument struct {
	// Version is the document format; it must be 1.
	Version int `json:"version"`
	// Sites are the places pools live in, by name.
	Sites []FleetSite `json:"sites,omitempty"`
	// ProviderAccounts are the cloud accounts provider pools buy servers from, by name.
	ProviderAccounts []FleetProviderAccount `json:"providerAccounts,omitempty"`
	// Pools are the capacity pools with their owner quotas and offers, by name.
	Pools []FleetPool `json:"pools,omitempty"`
	// Flavors are the VM sizes sold from a pool, by pool and name.
	Flavors []FleetFlavor `json:"flavors,omitempty"`
	// SandboxTemplates are the sandbox shapes (vps v0.5), by name.
	SandboxTemplates []FleetSandboxTemplate `json:"sandboxTemplates,omitempty"`
}

// FleetSite is a place that holds pools (docs/fleet-document.md). Name is a document
// name (1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit) or, for a site fleet
// did not create, its id (site_ and 26 Crockford base32 characters).
type FleetSite struct {
	// Name identifies the site in the document.
	Name string `json:"name"`
	// Kind is "shared" (pools sold to many tenants) or "dedicated".
	Kind string `json:"kind"`
	// Region is the region label, 1-63 of a-z, 0-9 and '-', e.g. "eu-central".
	Region string `json:"region"`
}

// FleetProviderAccount is a cloud account that provider pools buy servers from (docs/fleet-document.md). Config holds provider settings as strings; a value whose key names a
// credential (token, password, secret, key, ...) is a secret reference, never the secret itself.
type FleetProviderAccount struct {
	// Name identifies the account in the document.
	Name string `json:"name"`
	// Provider is "hetzner-cloud" or "ionos-cloud".
	Provider string `json:"provider"`
	// Config holds at most 256 provider settings, each value at most 4096 characters.
	Config map[string]string `json:"config,omitempty"`
}

// FleetPool is a pool of capacity at a site (docs/fleet-document.md). A "vps-host" pool
// runs on hosts the platform owns and has no ProviderAccount; a "provider" pool buys servers
// through ProviderAccount. OwnerQuota is what the pool's owner keeps, per resource; Offers are the
// tenants the pool is offered to.
type FleetPool struct {
	// Name identifies the pool in the document: a name, or a pool id (pool_...) for a pool fleet
	// did not create.
	Name string `json:"name"`
	// Site is the site's name or site id.
	Site string `json:"site"`
	// Class is "vps-host" or "provider".
	Class string `json:"class"`
	// GPUModel is the GPU model of the pool's hosts (e.g. "L40S"); empty when it has none.
	GPUModel string `json:"gpuModel,omitempty"`
	// Policy holds the pool's operating policy; nil leaves it unset.
	Policy *FleetPolicy `json:"policy,omitempty"`
	// ProviderAccount names the provider account; required for class "provider", forbidden
	// for "vps-host".
	ProviderAccount string `json:"providerAccount,omitempty"`
	// OwnerQuota maps a resource name (vcpu, memoryGiB, diskGiB, gpu, sandboxes, ...) to the
	// maximum the owner keeps, a count (GiB for memoryGiB and diskGiB) from 0 to 2^53.
	OwnerQuota map[string]int64 `json:"ownerQuota,omitempty"`
	// Offers are the tenants the pool is offered to, at most one per tenant.
	Offers []FleetOffer `json:"offers,omitempty"`
}

// FleetPolicy is a pool's operating policy (docs/fleet-document.md).
type FleetPolicy struct {
	// DisruptionBudget is the fraction of the pool's hosts that may be disrupted at once,
	// from 0 to 1; nil leaves it unset.
	DisruptionBudget *float64 `json:"disruptionBudget,omitempty"`
	// EgressAllow lists the private prefixes (CIDR, e.g. "10.20.0.0/16"; at most 32) the
	// sandboxes of the pool may reach: every entry of the egressAllow of a template on the pool
	// lies inside one of them. nil (left out): none.
	EgressAllow []string `json:"egressAllow,omitempty"`
}

// FleetOffer offers a pool to a tenant (docs/fleet-document.md); fleet names it
// `<pool> -> <tenant>`.
type FleetOffer struct {
	// Tenant is the tenant id, a name such as "acme".
	Tenant string `json:"tenant"`
	// Quota maps a resource name to the tenant's maximum, as in Pool.OwnerQuota.
	Quota map[string]int64 `json:"quota,omitempty"`
	// Priority orders the offers of a tenant, 0 (the default) to 1000.
	Priority int `json:"priority"`
}

// FleetFlavor is a VM size sold from a pool (docs/fleet-document.md); fleet names it
// `<pool>/<name>`.
type FleetFlavor struct {
	// Pool is the pool's name or pool id.
	Pool string `json:"pool"`
	// Name identifies the flavor within its pool, e.g. "g1.small".
	Name string `json:"name"`
	// VCPU is the number of virtual CPUs, 1 to 4096.
	VCPU int `json:"vcpu"`
	// MemoryGiB is the memory in GiB, 1 to 65536.
	MemoryGiB int `json:"memoryGiB"`
	// DiskGiB is the disk size in GiB, 1 to 1048576.
	DiskGiB int `json:"diskGiB"`
	// GPU is the number of GPUs, 0 (the default) to 64.
	GPU int `json:"gpu,omitempty"`
}

// FleetSandboxTemplate is a sandbox shape (docs/fleet-document.md; vps v0.5). Env
// values whose variable name names a credential (token, password, secret, key, ...) are secret references.
type FleetSandboxTemplate struct {
	// Name identifies the template in the document.
	Name string `json:"name"`
	// Pool is the pool's name or pool id.
	Pool string `json:"pool"`
	// Flavor is the name of a flavor of Pool.
	Flavor string `json:"flavor"`
	// ImageID is the image the sandbox boots: 1-255 characters, none of them a control
	// character or a Unicode space separator.
	ImageID string `json:"imageId"`
	// Env holds at most 256 environment variables, each value at most 4096 characters.
	Env map[string]string `json:"env,omitempty"`
	// Network is "private" or "public".
	Network string `json:"network"`
	// Warm keeps sandboxes booted ahead of demand; nil keeps none.
	Warm *FleetWarm `json:"warm,omitempty"`
	// TerminationGraceSeconds is the time its sandboxes get between SIGTERM and SIGKILL when
	// they are stopped, 1 to 3600; 0 (left out): 10, unless a create says otherwise.
	TerminationGraceSeconds int64 `json:"terminationGraceSeconds,omitempty"`
	// DisconnectGraceSeconds is how long a running sandbox of it stays unknown after its node's
	// last report before it is lost, 1 to 86400; 0 (left out): the server's --disconnect-grace.
	DisconnectGraceSeconds int64 `json:"disconnectGraceSeconds,omitempty"`
	// Runtime is "process" or "microvm", the sandbox runtime its sandboxes run on; "" (left
	// out): the node's default.
	Runtime string `json:"runtime,omitempty"`
	// EgressAllow lists the private prefixes a public sandbox of it may reach besides the
	// internet, each inside a prefix of its pool's policy.egressAllow; nil (left out): none.
	EgressAllow []string `json:"egressAllow,omitempty"`
}

// FleetWarm is the warm pool of a sandbox template: counts of booted, idle sandboxes with
// 0 <= Min <= Max <= 1000 (docs/fleet-document.md).
type FleetWarm struct {
	// Min is the number of sandboxes kept warm at least.
	Min int `json:"min"`
	// Max is the number of sandboxes kept warm at most.
	Max int `json:"max"`
}

// FleetMissing is an object an export left out because this deployment does not serve its kind.
type FleetMissing struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// FleetStatusInput is fleet.status's input: Check runs a drift check now (as the reconciler does
// every --drift-every) and records it before answering.
type FleetStatusInput struct {
	TenantID string `json:"tenantId"`
	Check    bool   `json:"check,omitempty"`
}

// FleetStatus is fleet.status's result; a tenant that never applied a document gets only TenantID.
type FleetStatus struct {
	TenantID string        `json:"tenantId"`
	Applied  *FleetApplied `json:"applied,omitempty"`
	Drift    *FleetDrift   `json:"drift,omitempty"`
	// DriftIgnore lists the server's drift ignore rules (KIND.FIELD) in force.
	DriftIgnore []string `json:"driftIgnore,omitempty"`
	// Now is the server's clock when it answered (Unix ms), so a client shows the age of
	// Applied.CheckedAt by the clock that set it; 0 where no request asked (the reconciler).
	Now int64 `json:"now,omitempty"`
}

// FleetApplied is the record of a tenant's last apply (docs/plan-apply.md). Times are Unix ms.
type FleetApplied struct {
	PlanHash  string `json:"planHash"`
	AppliedBy string `json:"appliedBy"`
	AppliedAt int64  `json:"appliedAt"`
	Prune     bool   `json:"prune"`
	CheckedAt *int64 `json:"checkedAt,omitempty"`
}

// FleetDrift is what the last drift check found: the changes (at most MaxDriftChanges) a new plan
// of the applied document would make, less the fields the drift ignore rules leave out, and
// PlanHash, the drift's identity: the hash of every drifted change with its fields' values now
// and in the document (hashChanges). The same drift has the same hash whatever revisions the
// objects went through; it is not a --plan-hash for fleet apply.
type FleetDrift struct {
	Changes  []FleetChange `json:"changes"`
	Summary  FleetSummary  `json:"summary"`
	Blocked  bool          `json:"blocked"`
	PlanHash string        `json:"planHash"`
}
