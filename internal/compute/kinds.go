package compute

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// Kind identifiers, as the fleet document, plans, calls and the CLI spell them.
const (
	KindSite            = "site"
	KindProviderAccount = "providerAccount"
	KindPool            = "pool"
	KindOwnerQuota      = "ownerQuota"
	KindOffer           = "offer"
	KindFlavor          = "flavor"
	KindSandboxTemplate = "sandboxTemplate"
)

// Module names a deployment can leave out with --modules (fleet spec, "Turn it on").
const (
	ModuleVPS       = "vps"           // flavors, provider accounts, sandbox templates
	ModuleTemplates = "vps-templates" // sandbox templates (the vps module's v0.5 migrations)
)

// KindInfo describes one kind of compute object.
type KindInfo struct {
	Kind       string   // kind identifier, e.g. "pool"
	API        string   // the API's plural, e.g. "pools" (methods compute.pools.create, ...)
	Prefix     string   // id prefix, e.g. "pool"
	Module     string   // module that serves it ("" = always served)
	Named      bool     // has a name of its own (unique per tenant, or per pool for flavors)
	RemoveVerb string   // "delete", or "archive" for pools
	Updatable  []string // spec fields an update may change
	Creatable  bool
	newSpec    func() spec // a new zero spec of the kind (*SiteSpec, *PoolSpec, ...)
}

// Kinds lists every kind in the fleet document's order.
var Kinds = []KindInfo{
	{Kind: KindSite, API: "sites", Prefix: "site", RemoveVerb: "delete", Creatable: true, newSpec: func() spec { return &SiteSpec{} }},
	{Kind: KindProviderAccount, API: "providerAccounts", Prefix: "pacct", Module: ModuleVPS, Named: true, RemoveVerb: "delete", Updatable: []string{"config"}, Creatable: true, newSpec: func() spec { return &ProviderAccountSpec{} }},
	{Kind: KindPool, API: "pools", Prefix: "pool", RemoveVerb: "archive", Updatable: []string{"gpuModel", "policy"}, Creatable: true, newSpec: func() spec { return &PoolSpec{} }},
	{Kind: KindOwnerQuota, API: "ownerQuotas", Prefix: "oq", RemoveVerb: "delete", Updatable: []string{"max"}, Creatable: true, newSpec: func() spec { return &OwnerQuotaSpec{} }},
	{Kind: KindOffer, API: "offers", Prefix: "offer", RemoveVerb: "delete", Updatable: []string{"quota", "priority"}, Creatable: true, newSpec: func() spec { return &OfferSpec{} }},
	{Kind: KindFlavor, API: "flavors", Prefix: "flv", Module: ModuleVPS, Named: true, RemoveVerb: "delete", Updatable: []string{"vcpu", "memoryGiB", "diskGiB"}, Creatable: true, newSpec: func() spec { return &FlavorSpec{} }},
	{Kind: KindSandboxTemplate, API: "sandboxTemplates", Prefix: "tpl", Module: ModuleTemplates, Named: true, RemoveVerb: "delete", Updatable: []string{"flavorId", "imageId", "env", "network", "warm", "terminationGraceSeconds", "disconnectGraceSeconds", "runtime", "egressAllow"}, Creatable: true, newSpec: func() spec { return &SandboxTemplateSpec{} }},
}

// Info returns the KindInfo of kind; ok is false for an unknown kind.
func Info(kind string) (KindInfo, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}

// Verbs of the compute API's methods: compute.<API>.<verb> decides compute:<API>:<verb>.
const (
	VerbCreate  = "create"
	VerbGet     = "get"
	VerbList    = "list"
	VerbUpdate  = "update"
	VerbDelete  = "delete"  // every kind but pools
	VerbArchive = "archive" // pools
)

// Verbs returns the verbs the API serves for the kind, in the order the method table registers
// them: create, get, list, update (only for kinds with Updatable fields), then RemoveVerb.
func (k KindInfo) Verbs() []string {
	verbs := []string{VerbCreate, VerbGet, VerbList}
	if len(k.Updatable) > 0 {
		verbs = append(verbs, VerbUpdate)
	}
	return append(verbs, k.RemoveVerb)
}

// Writes reports whether verb changes state (create, update, delete, archive).
func (k KindInfo) Writes(verb string) bool { return verb != VerbGet && verb != VerbList }

// Method returns the API method of verb on the kind: "compute.<API>.<verb>", e.g.
// compute.pools.create.
func (k KindInfo) Method(verb string) string { return "compute." + k.API + "." + verb }

// Permission returns the permission the kind's verb decides on tenant/<id>:
// "compute:<API>:<verb>", e.g. compute:pools:create (the permission catalogue:
// docs/iam.md, "Keys and grants"). The API's method table and fleet apply both read it here.
func (k KindInfo) Permission(verb string) string { return "compute:" + k.API + ":" + verb }

// Spec returns a new zero spec of the kind: a pointer to its spec type (*SiteSpec, *PoolSpec,
// ...).
func (k KindInfo) Spec() any { return k.newSpec() }

// ParseMethod returns the kind and verb of a compute API method name such as
// "compute.pools.create"; ok is false when name is not one of Verbs of a kind.
func ParseMethod(name string) (info KindInfo, verb string, ok bool) {
	rest, found := strings.CutPrefix(name, "compute.")
	if !found {
		return KindInfo{}, "", false
	}
	api, verb, found := strings.Cut(rest, ".")
	if !found {
		return KindInfo{}, "", false
	}
	for _, k := range Kinds {
		if k.API == api && slices.Contains(k.Verbs(), verb) {
			return k, verb, true
		}
	}
	return KindInfo{}, "", false
}

// Policy is a pool's operating policy: DisruptionBudget is the fraction (0 to 1) of the
// pool's hosts that may be disrupted at once; EgressAllow the private prefixes (at most 32,
// fieldrules.CheckEgressPolicy) the egressAllow of a template of the pool may name entries
// inside (absent: none, so its public sandboxes reach no private address).
type Policy struct {
	DisruptionBudget *float64 `json:"disruptionBudget,omitempty"`
	EgressAllow      []string `json:"egressAllow,omitempty"` // CIDR prefixes inside the private ranges
}

// Warm is a template's warm pool: between Min and Max sandboxes kept booted.
type Warm struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// SiteSpec is a site: Kind "shared" or "dedicated" (fieldrules.SiteKinds), Region a region label
// such as "eu-central" (fieldrules.Region).
type SiteSpec struct {
	Kind   string `json:"kind"`
	Region string `json:"region"`
}

// ProviderAccountSpec is a cloud provider account: Provider "hetzner-cloud" or "ionos-cloud"
// (fieldrules.Providers); Config at most 256 settings (keys fieldrules.ConfigKey, values at most
// 4096 characters). Credential-bearing Config values are secret references (secret://, vault://,
// env://), never values; a secret:// reference names a secret of the object's own tenant.
type ProviderAccountSpec struct {
	Provider string            `json:"provider"`
	Config   map[string]string `json:"config,omitempty"`
}

// PoolSpec is a pool of compute hosts owned by the object's tenant: Class "vps-host" or
// "provider" (fieldrules.PoolClasses), GPUModel e.g. "L40S" (fieldrules.GPUModel), Policy's
// DisruptionBudget a fraction from 0 to 1 and its EgressAllow the private prefixes templates of
// the pool may allow (their EgressAllow entries lie inside these).
type PoolSpec struct {
	SiteID            string  `json:"siteId"`
	Class             string  `json:"class"` // "vps-host" or "provider"
	GPUModel          string  `json:"gpuModel,omitempty"`
	Policy            *Policy `json:"policy,omitempty"`
	ProviderAccountID string  `json:"providerAccountId,omitempty"` // class "provider" only
}

// OwnerQuotaSpec is how much of Resource (fieldrules.Resource) the pool's owner keeps: Max units
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
// DiskGiB (GiB, 1-1048576), GPU (devices, 0-64); the ranges are fieldrules'. Size changes apply
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
// (fieldrules.ImageID), Env at most 256 variables (names fieldrules.EnvName, values at most 4096
// characters, credentials as secret references), Network "private" or "public", Warm
// 0 <= Min <= Max <= 1000, TerminationGraceSeconds 1 to 3600 (fieldrules.TerminationGrace;
// absent: its sandboxes get 10 s unless their create says otherwise), DisconnectGraceSeconds 1
// to 86400 (fieldrules.DisconnectGrace: how long a running sandbox stays unknown after its
// node's last report before it is lost; absent: the server's --disconnect-grace), Runtime
// "process" or "microvm" (fieldrules.Runtimes; absent: the node's default runtime, and its
// sandboxes go to nodes of that runtime only), EgressAllow at most 32 private prefixes a public
// sandbox of it may reach besides the internet (fieldrules.CheckEgressAllow; absent: none),
// each inside a prefix of its pool's Policy.EgressAllow (fieldrules.EgressWithin).
type SandboxTemplateSpec struct {
	PoolID                  string            `json:"poolId"`
	FlavorID                string            `json:"flavorId"`
	ImageID                 string            `json:"imageId"`
	Env                     map[string]string `json:"env,omitempty"`
	Network                 string            `json:"network"` // "private" or "public"
	Warm                    *Warm             `json:"warm,omitempty"`
	TerminationGraceSeconds int64             `json:"terminationGraceSeconds,omitempty"`
	DisconnectGraceSeconds  int64             `json:"disconnectGraceSeconds,omitempty"`
	Runtime                 string            `json:"runtime,omitempty"`     // "process", "microvm" or "" (the node's default)
	EgressAllow             []string          `json:"egressAllow,omitempty"` // CIDR prefixes inside the private ranges
}

// EnforcedResources are the quota resources admission enforces (fieldrules.EnforcedResources);
// other valid keys are stored and shown only.
var EnforcedResources = setOf(fieldrules.EnforcedResources.Values())

func setOf(values []string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

// ValidName reports whether s is a valid object name (fieldrules.Name): 1-63 of a-z, 0-9, '.',
// '_', '-', starting with a letter or digit.
func ValidName(s string) bool { return fieldrules.Name.Match(s) }

// The spec types check their fields against the rule table (package fieldrules), which the fleet
// document reads too: whatever the API accepts, a document can hold.

type problems []cubefleet.FieldError

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, cubefleet.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// match checks the string field at path against rule.
func (p *problems) match(path, v string, rule *fieldrules.Pattern) {
	if !rule.Match(v) {
		p.add(path, "%s must be %s", path, rule.Rule())
	}
}

// oneOf checks the string field at path against the enumeration e.
func (p *problems) oneOf(path, v string, e fieldrules.Enum) {
	if !e.Has(v) {
		p.add(path, "%s must be %s", path, e.Rule())
	}
}

// within checks the whole number at path against r.
func (p *problems) within(path string, v int64, r fieldrules.Range) {
	if !r.Contains(v) {
		p.add(path, "%s must be %s", path, r.Rule())
	}
}

func (s SiteSpec) validate(p *problems) {
	p.oneOf("kind", s.Kind, fieldrules.SiteKinds)
	p.match("region", s.Region, fieldrules.Region)
}

func (s ProviderAccountSpec) validate(p *problems) {
	p.oneOf("provider", s.Provider, fieldrules.Providers)
	validStrings(p, "config", s.Config, fieldrules.ConfigKey, "config keys")
}

func (s PoolSpec) validate(p *problems) {
	switch s.Class {
	case fieldrules.PoolClassVPSHost:
		if s.ProviderAccountID != "" {
			p.add("providerAccountId", "only pools of class provider have a provider account; remove providerAccountId, or create a pool of class provider")
		}
	case fieldrules.PoolClassProvider:
		if s.ProviderAccountID == "" {
			p.add("providerAccountId", "a pool of class provider needs providerAccountId, the provider account it buys servers from")
		}
	default:
		p.oneOf("class", s.Class, fieldrules.PoolClasses)
	}
	if s.SiteID == "" {
		p.add("siteId", "siteId is required")
	}
	if s.GPUModel != "" {
		p.match("gpuModel", s.GPUModel, fieldrules.GPUModel)
	}
	if s.Policy != nil && s.Policy.DisruptionBudget != nil && !fieldrules.ValidDisruptionBudget(*s.Policy.DisruptionBudget) {
		p.add("policy.disruptionBudget", "disruptionBudget must be %s", fieldrules.DisruptionBudgetRule)
	}
	if s.Policy != nil {
		egressProblems(p, "policy.egressAllow", fieldrules.CheckEgressPolicy(s.Policy.EgressAllow))
	}
}

// validStrings checks a map of strings (provider account config, template env): at most
// fieldrules.MaxKeys keys matching key, values of at most fieldrules.MaxValueLen characters, and
// a secret reference under every key that names a credential. what names the keys in messages.
func validStrings(p *problems, field string, m map[string]string, key *fieldrules.Pattern, what string) {
	if len(m) > fieldrules.MaxKeys {
		p.add(field, "%s", fieldrules.TooMany(field, len(m), fieldrules.MaxKeys, "keys"))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !key.Match(k) {
			p.add(field+"."+k, "%s must be %s", what, key.Rule())
			continue
		}
		if msg := fieldrules.CheckValueLen(m[k]); msg != "" {
			p.add(field+"."+k, "%s", msg)
		}
		if msg := fieldrules.CheckCredential(k, m[k]); msg != "" {
			p.add(field+"."+k, "%s", msg)
		}
	}
}

func validQuota(p *problems, path string, q map[string]int64) {
	if len(q) > fieldrules.MaxKeys {
		p.add(path, "%s", fieldrules.TooMany(path, len(q), fieldrules.MaxKeys, "keys"))
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !fieldrules.Resource.Match(k) {
			p.add(path+"."+k, "resource names must be %s", fieldrules.Resource.Rule())
		} else {
			p.within(path+"."+k, q[k], fieldrules.Quota)
		}
	}
}

func (s OwnerQuotaSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	p.match("resource", s.Resource, fieldrules.Resource)
	p.within("max", s.Max, fieldrules.Quota)
}

func (s OfferSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	if s.ToTenantID == "" {
		p.add("toTenantId", "toTenantId is required")
	} else if !fieldrules.Name.Match(s.ToTenantID) {
		p.add("toTenantId", "toTenantId must be a tenant id: %s", fieldrules.Name.Rule())
	}
	validQuota(p, "quota", s.Quota)
	p.within("priority", int64(s.Priority), fieldrules.Priority)
}

func (s FlavorSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	p.within("vcpu", int64(s.VCPU), fieldrules.VCPU)
	p.within("memoryGiB", int64(s.MemoryGiB), fieldrules.MemoryGiB)
	p.within("diskGiB", int64(s.DiskGiB), fieldrules.DiskGiB)
	p.within("gpu", int64(s.GPU), fieldrules.GPU)
}

func (s SandboxTemplateSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	if s.FlavorID == "" {
		p.add("flavorId", "flavorId is required")
	}
	p.match("imageId", s.ImageID, fieldrules.ImageID)
	validStrings(p, "env", s.Env, fieldrules.EnvName, "variable names")
	p.oneOf("network", s.Network, fieldrules.Networks)
	if s.Warm != nil {
		p.within("warm.min", int64(s.Warm.Min), fieldrules.Warm)
		p.within("warm.max", int64(s.Warm.Max), fieldrules.Warm)
		if s.Warm.Min > s.Warm.Max {
			p.add("warm.min", "warm.min must not exceed warm.max; raise max or lower min")
		}
	}
	if s.TerminationGraceSeconds != 0 {
		p.within("terminationGraceSeconds", s.TerminationGraceSeconds, fieldrules.TerminationGrace)
	}
	if s.DisconnectGraceSeconds != 0 {
		p.within("disconnectGraceSeconds", s.DisconnectGraceSeconds, fieldrules.DisconnectGrace)
	}
	if s.Runtime != "" && !fieldrules.Runtimes.Has(s.Runtime) {
		p.add("runtime", "runtime must be %s, or absent for the node's default runtime", fieldrules.Runtimes.Rule())
	}
	egressProblems(p, "egressAllow", fieldrules.CheckEgressAllow(s.Network, s.EgressAllow))
}

// egressProblems adds the problems of the prefix list at field (a template's egressAllow, a
// pool's policy.egressAllow), each at its entry's path; the message names the entry already.
func egressProblems(p *problems, field string, list []fieldrules.EgressProblem) {
	for _, e := range list {
		if e.Index < 0 {
			p.add(field, "%s", e.Message)
			continue
		}
		p.add(fmt.Sprintf("%s[%d]", field, e.Index), "%s", e.Message)
	}
}

// checkTenantID checks the tenantId of an input: tenant ids are names (fieldrules.Name).
func checkTenantID(id string) error {
	if id == "" {
		return cubefleet.Invalid("tenantId", "tenantId is required")
	}
	if !fieldrules.Name.Match(id) {
		return cubefleet.Invalid("tenantId", "tenantId must be a tenant id: %s", fieldrules.Name.Rule())
	}
	return nil
}

// MaxIdempotencyKey is the most characters of a create's idempotencyKey.
const MaxIdempotencyKey = 255

// checkIdempotencyKey checks a create's idempotencyKey: at most 255 characters, none a control
// character (the key is stored and shown; fleet's keys, fleet:<tenant>:<kind>:<name>, fit).
func checkIdempotencyKey(key string) error {
	n := 0
	for _, r := range key {
		if n++; n > MaxIdempotencyKey || unicode.IsControl(r) {
			return cubefleet.Invalid("idempotencyKey", "idempotencyKey is at most %d characters, none of them a control character", MaxIdempotencyKey)
		}
	}
	return nil
}
