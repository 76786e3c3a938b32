package api

// ObjectRef is the input that names one object: {"tenantId", "id", "revision"}. Revision, when set,
// must be the object's current revision (CONFLICT otherwise).
type ObjectRef struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
	Revision *int64 `json:"revision,omitempty"`
}

// ListInput selects a page of objects: Limit 1-1000 (default 100), Cursor the nextCursor of
// the previous page, PoolID to keep only a pool's objects, IncludeArchived for archived pools.
type ListInput struct {
	TenantID        string `json:"tenantId"`
	Limit           int    `json:"limit,omitempty"`
	Cursor          string `json:"cursor,omitempty"`
	PoolID          string `json:"poolId,omitempty"`
	IncludeArchived bool   `json:"includeArchived,omitempty"`
}

// SiteSpec is a site: Kind "shared" or "dedicated", Region a region label
// such as "eu-central".
type SiteSpec struct {
	Kind   string `json:"kind"`
	Region string `json:"region"`
}

// ProviderAccountSpec is a cloud provider account: Provider "hetzner-cloud" or "ionos-cloud"
// ; Config at most 256 settings (values at most
// 4096 characters). Credential-bearing Config values are secret references (secret://, vault://,
// env://), never values; a secret:// reference names a secret of the object's own tenant.
type ProviderAccountSpec struct {
	Provider string            `json:"provider"`
	Config   map[string]string `json:"config,omitempty"`
}

// PoolSpec is a pool of compute hosts owned by the object's tenant: Class "vps-host" or
// "provider", GPUModel e.g. "L40S", Policy's
// DisruptionBudget a fraction from 0 to 1.
type PoolSpec struct {
	SiteID string `json:"siteId"`
	// "vps-host" or "provider"
	Class    string      `json:"class"`
	GPUModel string      `json:"gpuModel,omitempty"`
	Policy   *PoolPolicy `json:"policy,omitempty"`
	// class "provider" only
	ProviderAccountID string `json:"providerAccountId,omitempty"`
}

// PoolPolicy is a pool's operating policy: DisruptionBudget is the fraction (0 to 1) of the
// pool's hosts that may be disrupted at once.
type PoolPolicy struct {
	DisruptionBudget *float64 `json:"disruptionBudget,omitempty"`
	// EgressAllow lists the private network prefixes (CIDR, e.g. "10.20.0.0/16"; at most 32,
	// by the rule of a template's egressAllow) the sandboxes of the pool may reach: every entry
	// of the egressAllow of a template on the pool lies inside one of them, and an update that
	// would leave a template's entry outside is refused naming the template. Only the pool's
	// owner sets it. Absent: none, so no template of the pool allows a private prefix.
	EgressAllow []string `json:"egressAllow,omitempty"`
}

// OwnerQuotaSpec is how much of Resource the pool's owner keeps: Max units
// from 0 to 2^53 (vcpu, memoryGiB and diskGiB in GiB, gpu, sandboxes; other keys are stored but
// not enforced). A pool has at most 256 owner quotas, one per resource.
type OwnerQuotaSpec struct {
	PoolID   string `json:"poolId"`
	Resource string `json:"resource"`
	Max      int64  `json:"max"`
}

// OfferSpec offers a pool to another tenant with a quota (resource -> max units, at most 256
// resources, each 0 to 2^53) and a priority (0-1000, higher first). A pool has at most 1000
// offers, one per tenant.
type OfferSpec struct {
	PoolID     string           `json:"poolId"`
	ToTenantID string           `json:"toTenantId"`
	Quota      map[string]int64 `json:"quota,omitempty"`
	Priority   int              `json:"priority"`
}

// FlavorSpec is a sandbox size sold on a pool: VCPU (cores, 1-4096), MemoryGiB (GiB, 1-65536),
// DiskGiB (GiB, 1-1048576), GPU (devices, 0-64). Size changes apply
// to new sandboxes only.
type FlavorSpec struct {
	PoolID    string `json:"poolId"`
	VCPU      int    `json:"vcpu"`
	MemoryGiB int    `json:"memoryGiB"`
	DiskGiB   int    `json:"diskGiB"`
	GPU       int    `json:"gpu"`
}

// SandboxTemplateSpec is a tenant's sandbox template on a pool it owns or is offered, with a
// flavor sold on that pool: ImageID 1-255 characters with no control character or Unicode space
// , Env at most 256 variables (values at most 4096
// characters, credentials as secret references), Network "private" or "public", Warm
// 0 <= Min <= Max <= 1000.
type SandboxTemplateSpec struct {
	PoolID   string            `json:"poolId"`
	FlavorID string            `json:"flavorId"`
	ImageID  string            `json:"imageId"`
	Env      map[string]string `json:"env,omitempty"`
	// "private" or "public"
	Network string    `json:"network"`
	Warm    *WarmPool `json:"warm,omitempty"`
	// TerminationGraceSeconds is the time its sandboxes get between SIGTERM and SIGKILL when
	// they are stopped (1 to 3600; absent: 10), unless a create gives its own.
	TerminationGraceSeconds int64 `json:"terminationGraceSeconds,omitempty"`
	// DisconnectGraceSeconds is how long a running sandbox of it stays unknown after its
	// node's last report before it is lost (1 to 86400; absent: the server's
	// --disconnect-grace).
	DisconnectGraceSeconds int64 `json:"disconnectGraceSeconds,omitempty"`
	// Runtime is the sandbox runtime its sandboxes run on: "process" (confined processes on
	// the host's kernel) or "microvm" (a virtual machine with its own guest kernel). Its
	// sandboxes are placed only on nodes of that runtime (their nodeSelector holds
	// cubefleet.io/runtime). Absent: the node's default runtime, any node.
	Runtime string `json:"runtime,omitempty"`
	// EgressAllow lists the private network prefixes (CIDR, e.g. "10.20.0.0/16"; at most 32)
	// a public sandbox of it may reach besides the internet: each inside 10.0.0.0/8,
	// 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 or fc00::/7, holding no metadata address.
	// Its node's own addresses, the control plane, other sandboxes and metadata addresses stay
	// unreachable inside them. Each lies inside a prefix of its pool's policy.egressAllow.
	// Only a public template has one. Absent: no private range.
	EgressAllow []string `json:"egressAllow,omitempty"`
}

// WarmPool is a template's warm pool: between Min and Max sandboxes kept booted.
type WarmPool struct {
	Min int `json:"min"`
	Max int `json:"max"`
}
