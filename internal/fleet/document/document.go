// Package document is the fleet document of FleetConfig: its types, the strict decoder and
// validator, the canonical form used for hashing, and the JSON Schema published to users
// (docs/fleet-document.md).
//
// A document names everything: references between items are names from the same document, or
// the ids of objects fleet did not create. Secrets appear only as references (secret://,
// vault:// or env://), so a document is safe to commit. Decode is the only way untrusted bytes
// become a *Document; callers that build a Document in code run Validate before using it.
//
// Everything in this package is a pure function of its arguments and safe for concurrent use.
package document

// Document is version 1 of the fleet document (docs/fleet-document.md). Its rules
// are those of the rule table the compute API reads too (package fieldrules). Every list
// is optional and holds at most 1000 items; an empty list and a missing one mean the same (the
// decoder returns nil for both). Names are unique within their list (flavors by pool and name).
type Document struct {
	// Version is the document format; it must be 1.
	Version int `json:"version"`
	// Sites are the places pools live in, by name.
	Sites []Site `json:"sites,omitempty"`
	// ProviderAccounts are the cloud accounts provider pools buy servers from, by name.
	ProviderAccounts []ProviderAccount `json:"providerAccounts,omitempty"`
	// Pools are the capacity pools with their owner quotas and offers, by name.
	Pools []Pool `json:"pools,omitempty"`
	// Flavors are the VM sizes sold from a pool, by pool and name.
	Flavors []Flavor `json:"flavors,omitempty"`
	// SandboxTemplates are the sandbox shapes (vps v0.5), by name.
	SandboxTemplates []SandboxTemplate `json:"sandboxTemplates,omitempty"`
}

// Site is a place that holds pools (docs/fleet-document.md). Name is a document
// name (1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit) or, for a site fleet
// did not create, its id (site_ and 26 Crockford base32 characters).
type Site struct {
	// Name identifies the site in the document.
	Name string `json:"name"`
	// Kind is "shared" (pools sold to many tenants) or "dedicated".
	Kind string `json:"kind"`
	// Region is the region label, 1-63 of a-z, 0-9 and '-', e.g. "eu-central".
	Region string `json:"region"`
}

// ProviderAccount is a cloud account that provider pools buy servers from
// (docs/fleet-document.md). Config holds provider settings as strings; a value whose key names a
// credential (see secretref.IsCredentialName) is a secret reference, never the secret itself.
type ProviderAccount struct {
	// Name identifies the account in the document.
	Name string `json:"name"`
	// Provider is "hetzner-cloud" or "ionos-cloud".
	Provider string `json:"provider"`
	// Config holds at most 256 provider settings, each value at most 4096 characters.
	Config map[string]string `json:"config,omitempty"`
}

// Pool is a pool of capacity at a site (docs/fleet-document.md). A "vps-host" pool
// runs on hosts the platform owns and has no ProviderAccount; a "provider" pool buys servers
// through ProviderAccount. OwnerQuota is what the pool's owner keeps, per resource; Offers are the
// tenants the pool is offered to.
type Pool struct {
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
	Policy *Policy `json:"policy,omitempty"`
	// ProviderAccount names the provider account; required for class "provider", forbidden
	// for "vps-host".
	ProviderAccount string `json:"providerAccount,omitempty"`
	// OwnerQuota maps a resource name (vcpu, memoryGiB, diskGiB, gpu, sandboxes, ...) to the
	// maximum the owner keeps, a count (GiB for memoryGiB and diskGiB) from 0 to 2^53.
	OwnerQuota map[string]int64 `json:"ownerQuota,omitempty"`
	// Offers are the tenants the pool is offered to, at most one per tenant.
	Offers []Offer `json:"offers,omitempty"`
}

// Policy is a pool's operating policy (docs/fleet-document.md).
type Policy struct {
	// DisruptionBudget is the fraction of the pool's hosts that may be disrupted at once,
	// from 0 to 1; nil leaves it unset.
	DisruptionBudget *float64 `json:"disruptionBudget,omitempty"`
	// EgressAllow lists the private prefixes the sandboxes of the pool may reach
	// (fieldrules.CheckEgressPolicy): every entry of the egressAllow of a template on the pool
	// lies inside one of them. nil (left out): none.
	EgressAllow []string `json:"egressAllow,omitempty"`
}

// Offer offers a pool to a tenant (docs/fleet-document.md); fleet names it
// `<pool> -> <tenant>`.
type Offer struct {
	// Tenant is the tenant id, a name such as "acme".
	Tenant string `json:"tenant"`
	// Quota maps a resource name to the tenant's maximum, as in Pool.OwnerQuota.
	Quota map[string]int64 `json:"quota,omitempty"`
	// Priority orders the offers of a tenant, 0 (the default) to 1000.
	Priority int `json:"priority"`
}

// Flavor is a VM size sold from a pool (docs/fleet-document.md); fleet names it
// `<pool>/<name>`.
type Flavor struct {
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

// SandboxTemplate is a sandbox shape (docs/fleet-document.md; vps v0.5). Env
// values whose variable name names a credential (see secretref.IsCredentialName) are secret references.
type SandboxTemplate struct {
	// Name identifies the template in the document.
	Name string `json:"name"`
	// Pool is the pool's name or pool id.
	Pool string `json:"pool"`
	// Flavor is the name of a flavor of Pool.
	Flavor string `json:"flavor"`
	// ImageID is the image the sandbox boots: 1-255 characters, none of them a control
	// character or a Unicode space separator (fieldrules.ImageID).
	ImageID string `json:"imageId"`
	// Env holds at most 256 environment variables, each value at most 4096 characters.
	Env map[string]string `json:"env,omitempty"`
	// Network is "private" or "public".
	Network string `json:"network"`
	// Warm keeps sandboxes booted ahead of demand; nil keeps none.
	Warm *Warm `json:"warm,omitempty"`
	// TerminationGraceSeconds is the time its sandboxes get between SIGTERM and SIGKILL when
	// they are stopped, 1 to 3600 (fieldrules.TerminationGrace); 0 (left out): 10, unless a
	// create says otherwise.
	TerminationGraceSeconds int64 `json:"terminationGraceSeconds,omitempty"`
	// DisconnectGraceSeconds is how long a running sandbox of it stays unknown after its node's
	// last report before it is lost, 1 to 86400 (fieldrules.DisconnectGrace); 0 (left out): the
	// server's --disconnect-grace.
	DisconnectGraceSeconds int64 `json:"disconnectGraceSeconds,omitempty"`
	// Runtime is "process" or "microvm" (fieldrules.Runtimes): the sandbox runtime its
	// sandboxes run on, and so the nodes they are placed on; "" (left out): the node's default.
	Runtime string `json:"runtime,omitempty"`
	// EgressAllow lists the private prefixes a public sandbox of it may reach besides the
	// internet (fieldrules.CheckEgressAllow), each inside a prefix of its pool's
	// policy.egressAllow; nil (left out): none.
	EgressAllow []string `json:"egressAllow,omitempty"`
}

// Warm is the warm pool of a sandbox template: counts of booted, idle sandboxes with
// 0 <= Min <= Max <= 1000 (docs/fleet-document.md).
type Warm struct {
	// Min is the number of sandboxes kept warm at least.
	Min int `json:"min"`
	// Max is the number of sandboxes kept warm at most.
	Max int `json:"max"`
}
