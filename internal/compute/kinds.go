package compute

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/secretref"
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
	{Kind: KindSandboxTemplate, API: "sandboxTemplates", Prefix: "tpl", Module: ModuleTemplates, Named: true, RemoveVerb: "delete", Updatable: []string{"flavorId", "imageId", "env", "network", "warm"}, Creatable: true, newSpec: func() spec { return &SandboxTemplateSpec{} }},
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
// "compute:<API>:<verb>", e.g. compute:pools:create (../shared/DESIGN.md, "Permission
// catalogue"). The API's method table and fleet apply both read it here.
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

// Policy is a pool's disruption policy: DisruptionBudget is the fraction (0 to 1) of the
// pool's hosts that may be disrupted at once.
type Policy struct {
	DisruptionBudget *float64 `json:"disruptionBudget,omitempty"`
}

// Warm is a template's warm pool: between Min and Max sandboxes kept booted.
type Warm struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// SiteSpec is a site: Kind "shared" or "dedicated", Region e.g. "eu-central".
type SiteSpec struct {
	Kind   string `json:"kind"`
	Region string `json:"region"`
}

// ProviderAccountSpec is a cloud provider account. Credential-bearing Config values are secret
// references (secret://, vault://, env://), never values.
type ProviderAccountSpec struct {
	Provider string            `json:"provider"`
	Config   map[string]string `json:"config,omitempty"`
}

// PoolSpec is a pool of compute hosts owned by the object's tenant.
type PoolSpec struct {
	SiteID            string  `json:"siteId"`
	Class             string  `json:"class"` // "vps-host" or "provider"
	GPUModel          string  `json:"gpuModel,omitempty"`
	Policy            *Policy `json:"policy,omitempty"`
	ProviderAccountID string  `json:"providerAccountId,omitempty"` // class "provider" only
}

// OwnerQuotaSpec is how much of Resource the pool's owner keeps: Max units (vcpu, memoryGiB,
// diskGiB, gpu, sandboxes; other keys are stored but not enforced).
type OwnerQuotaSpec struct {
	PoolID   string `json:"poolId"`
	Resource string `json:"resource"`
	Max      int64  `json:"max"`
}

// OfferSpec offers a pool to another tenant with a quota (resource -> max units) and a
// priority (0-1000, higher first).
type OfferSpec struct {
	PoolID     string           `json:"poolId"`
	ToTenantID string           `json:"toTenantId"`
	Quota      map[string]int64 `json:"quota,omitempty"`
	Priority   int              `json:"priority"`
}

// FlavorSpec is a sandbox size sold on a pool: VCPU (cores), MemoryGiB and DiskGiB (GiB), GPU
// (devices). Size changes apply to new sandboxes only.
type FlavorSpec struct {
	PoolID    string `json:"poolId"`
	VCPU      int    `json:"vcpu"`
	MemoryGiB int    `json:"memoryGiB"`
	DiskGiB   int    `json:"diskGiB"`
	GPU       int    `json:"gpu"`
}

// SandboxTemplateSpec is a tenant's sandbox template on a pool it owns or is offered.
type SandboxTemplateSpec struct {
	PoolID   string            `json:"poolId"`
	FlavorID string            `json:"flavorId"`
	ImageID  string            `json:"imageId"`
	Env      map[string]string `json:"env,omitempty"`
	Network  string            `json:"network"` // "private" or "public"
	Warm     *Warm             `json:"warm,omitempty"`
}

// EnforcedResources are the quota resources admission enforces (../shared/DESIGN.md); other
// valid keys are stored and shown only.
var EnforcedResources = map[string]bool{"vcpu": true, "memoryGiB": true, "diskGiB": true, "gpu": true, "sandboxes": true}

var (
	namePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	regionPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	resourcePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,63}$`)
	gpuModelPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,63}$`)
	configKey       = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
	envName         = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)
	imagePattern    = regexp.MustCompile(`^\S{1,255}$`)
)

// ValidName reports whether s is a valid object name: 1-63 of a-z, 0-9, '.', '_', '-',
// starting with a letter or digit.
func ValidName(s string) bool { return namePattern.MatchString(s) }

type problems []cubefleet.FieldError

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, cubefleet.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (s SiteSpec) validate(p *problems) {
	if s.Kind != "shared" && s.Kind != "dedicated" {
		p.add("kind", "kind must be \"shared\" or \"dedicated\"")
	}
	if !regionPattern.MatchString(s.Region) {
		p.add("region", "region must be 1-63 of a-z, 0-9, '-' (e.g. eu-central)")
	}
}

func (s ProviderAccountSpec) validate(p *problems) {
	if s.Provider != "hetzner-cloud" && s.Provider != "ionos-cloud" {
		p.add("provider", "provider must be \"hetzner-cloud\" or \"ionos-cloud\"")
	}
	validStrings(p, "config", s.Config, configKey, "config keys are 1-63 of letters, digits, '_', '.', '-'")
}

func (s PoolSpec) validate(p *problems) {
	switch s.Class {
	case "vps-host":
		if s.ProviderAccountID != "" {
			p.add("providerAccountId", "only pools of class \"provider\" have a provider account")
		}
	case "provider":
		if s.ProviderAccountID == "" {
			p.add("providerAccountId", "a pool of class \"provider\" needs providerAccountId")
		}
	default:
		p.add("class", "class must be \"vps-host\" or \"provider\"")
	}
	if s.SiteID == "" {
		p.add("siteId", "siteId is required")
	}
	if s.GPUModel != "" && !gpuModelPattern.MatchString(s.GPUModel) {
		p.add("gpuModel", "gpuModel must be 1-63 of letters, digits, '.', '_', '-'")
	}
	if s.Policy != nil && s.Policy.DisruptionBudget != nil {
		if b := *s.Policy.DisruptionBudget; b < 0 || b > 1 {
			p.add("policy.disruptionBudget", "disruptionBudget is a fraction from 0 to 1")
		}
	}
}

// validStrings checks a map of strings (provider account config, template env): at most 256
// keys matching keyPattern, values of at most 4096 characters, and a secret reference for every
// key that names a credential.
func validStrings(p *problems, field string, m map[string]string, keyPattern *regexp.Regexp, keyRule string) {
	if len(m) > 256 {
		p.add(field, "%s holds at most 256 keys", field)
	}
	for k, v := range m {
		switch {
		case !keyPattern.MatchString(k):
			p.add(field+"."+k, "%s", keyRule)
		case len(v) > 4096:
			p.add(field+"."+k, "values are at most 4096 characters")
		case secretref.IsCredentialName(k) && !secretref.IsRef(v):
			p.add(field+"."+k, "%s holds a credential: store it with `cubefleet secrets create` and write secret://NAME (or vault://, env://) here", k)
		}
	}
}

func validQuota(p *problems, path string, q map[string]int64) {
	if len(q) > 256 {
		p.add(path, "a quota holds at most 256 resources")
	}
	for k, v := range q {
		if !resourcePattern.MatchString(k) {
			p.add(path+"."+k, "resource names are a letter, then up to 63 letters, digits, '.', '_', '-'")
		} else if v < 0 {
			p.add(path+"."+k, "quota maxima are integers of 0 or more")
		}
	}
}

func (s OwnerQuotaSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	if !resourcePattern.MatchString(s.Resource) {
		p.add("resource", "resource names are a letter, then up to 63 letters, digits, '.', '_', '-'")
	}
	if s.Max < 0 {
		p.add("max", "max is an integer of 0 or more")
	}
}

func (s OfferSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	if s.ToTenantID == "" {
		p.add("toTenantId", "toTenantId is required")
	}
	validQuota(p, "quota", s.Quota)
	if s.Priority < 0 || s.Priority > 1000 {
		p.add("priority", "priority is an integer from 0 to 1000")
	}
}

func (s FlavorSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	if s.VCPU < 1 || s.VCPU > 4096 {
		p.add("vcpu", "vcpu is an integer from 1 to 4096")
	}
	if s.MemoryGiB < 1 || s.MemoryGiB > 65536 {
		p.add("memoryGiB", "memoryGiB is an integer from 1 to 65536")
	}
	if s.DiskGiB < 1 || s.DiskGiB > 1048576 {
		p.add("diskGiB", "diskGiB is an integer from 1 to 1048576")
	}
	if s.GPU < 0 || s.GPU > 64 {
		p.add("gpu", "gpu is an integer from 0 to 64")
	}
}

func (s SandboxTemplateSpec) validate(p *problems) {
	if s.PoolID == "" {
		p.add("poolId", "poolId is required")
	}
	if s.FlavorID == "" {
		p.add("flavorId", "flavorId is required")
	}
	if !imagePattern.MatchString(s.ImageID) {
		p.add("imageId", "imageId is 1-255 characters without spaces")
	}
	validStrings(p, "env", s.Env, envName, "variable names are a letter or '_', then letters, digits, '_'")
	if s.Network != "private" && s.Network != "public" {
		p.add("network", "network must be \"private\" or \"public\"")
	}
	if s.Warm != nil && (s.Warm.Min < 0 || s.Warm.Max < s.Warm.Min || s.Warm.Max > 1000) {
		p.add("warm", "warm needs 0 <= min <= max <= 1000")
	}
}
