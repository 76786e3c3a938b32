package api

// The compute objects (sites, provider accounts, pools, owner quotas, offers, flavors, sandbox
// templates) travel flat: an object is its ObjectMeta's fields next to its kind's spec fields,
// `{"id":"pool_01...","tenantId":"root","name":"vps-fra","revision":2,"siteId":"site_01...",...}`.
// Each kind has its object type (Site, Pool, ...), a create input (SiteCreate, ...), for kinds
// with updatable fields an update input (PoolUpdate, ...), and a list page (ObjectList).

// ObjectMeta is what every compute object carries besides its spec. Times are Unix ms on the
// control plane's clock.
type ObjectMeta struct {
	// ID is the object's id: `<prefix>_<26 Crockford base32 characters>` (site_, pacct_, pool_,
	// oq_, offer_, flv_, tpl_); derived from IdempotencyKey and the creator when one was given.
	ID string `json:"id"`
	// TenantID is the tenant that owns the object.
	TenantID string `json:"tenantId"`
	// Name is the object's own name (provider accounts, flavors, sandbox templates) or the fleet
	// name of a site or pool; absent when it has none.
	Name string `json:"name,omitempty"`
	// Revision starts at 1 and grows by one with every update.
	Revision int64 `json:"revision"`
	// IdempotencyKey is the key the object was created with; absent when none.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// CreatedBy is the principal id of the creator.
	CreatedBy string `json:"createdBy"`
	// CreatedAt and UpdatedAt are Unix ms.
	CreatedAt int64 `json:"createdAt"`
	UpdatedAt int64 `json:"updatedAt"`
	// ArchivedAt is when a pool was archived (Unix ms); absent while it is not, and for every
	// other kind.
	ArchivedAt *int64 `json:"archivedAt,omitempty"`
}

// CreateMeta is the part of every compute create input that is not the spec.
type CreateMeta struct {
	// TenantID is the tenant the object is created in (required).
	TenantID string `json:"tenantId"`
	// IdempotencyKey, at most 200 characters, makes a retried create return the same object:
	// the id derives from it and the caller. Reference fields of other creates accept
	// key:<idempotencyKey> for an object created with it.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// NamedCreateMeta is CreateMeta for the kinds with a name of their own (provider accounts,
// flavors, sandbox templates).
type NamedCreateMeta struct {
	CreateMeta
	// Name is 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit; unique per
	// tenant (flavors: per pool). Required.
	Name string `json:"name"`
}

// UpdateMeta is the part of every compute update input that names the object.
type UpdateMeta struct {
	// TenantID is the object's tenant (required).
	TenantID string `json:"tenantId"`
	// ID is the object's id (required).
	ID string `json:"id"`
	// Revision, when given (1 or more), must be the object's current revision: the update is
	// CONFLICT otherwise.
	Revision *int64 `json:"revision,omitempty"`
}

// ObjectList is a page of a tenant's objects of one kind, by id; NextCursor, absent on the
// last page, is the next page's ListInput.Cursor.
type ObjectList[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// Site is a site object (compute.sites.*).
type Site struct {
	ObjectMeta
	SiteSpec
}

// SiteCreate is the input of compute.sites.create. Sites have no update.
type SiteCreate struct {
	CreateMeta
	SiteSpec
}

// ProviderAccount is a provider account object (compute.providerAccounts.*; vps module).
type ProviderAccount struct {
	ObjectMeta
	ProviderAccountSpec
}

// ProviderAccountCreate is the input of compute.providerAccounts.create.
type ProviderAccountCreate struct {
	NamedCreateMeta
	ProviderAccountSpec
}

// ProviderAccountUpdate is the input of compute.providerAccounts.update: Config, when given,
// replaces the account's settings.
type ProviderAccountUpdate struct {
	UpdateMeta
	Config map[string]string `json:"config,omitempty"`
}

// Pool is a pool object (compute.pools.*; pools are archived, not deleted).
type Pool struct {
	ObjectMeta
	PoolSpec
}

// PoolCreate is the input of compute.pools.create.
type PoolCreate struct {
	CreateMeta
	PoolSpec
}

// PoolUpdate is the input of compute.pools.update: the fields given replace the pool's; nil
// leaves a field as it is.
type PoolUpdate struct {
	UpdateMeta
	GPUModel *string     `json:"gpuModel,omitempty"`
	Policy   *PoolPolicy `json:"policy,omitempty"`
}

// OwnerQuota is an owner quota object (compute.ownerQuotas.*).
type OwnerQuota struct {
	ObjectMeta
	OwnerQuotaSpec
}

// OwnerQuotaCreate is the input of compute.ownerQuotas.create.
type OwnerQuotaCreate struct {
	CreateMeta
	OwnerQuotaSpec
}

// OwnerQuotaUpdate is the input of compute.ownerQuotas.update: Max, when given, replaces the
// quota's maximum (0 to 2^53 units).
type OwnerQuotaUpdate struct {
	UpdateMeta
	Max *int64 `json:"max,omitempty"`
}

// Offer is an offer object (compute.offers.*).
type Offer struct {
	ObjectMeta
	OfferSpec
}

// OfferCreate is the input of compute.offers.create.
type OfferCreate struct {
	CreateMeta
	OfferSpec
}

// OfferUpdate is the input of compute.offers.update: Quota and Priority, when given, replace
// the offer's.
type OfferUpdate struct {
	UpdateMeta
	Quota    map[string]int64 `json:"quota,omitempty"`
	Priority *int             `json:"priority,omitempty"`
}

// Flavor is a flavor object (compute.flavors.*; vps module).
type Flavor struct {
	ObjectMeta
	FlavorSpec
}

// FlavorCreate is the input of compute.flavors.create.
type FlavorCreate struct {
	NamedCreateMeta
	FlavorSpec
}

// FlavorUpdate is the input of compute.flavors.update: the sizes given replace the flavor's
// (new sandboxes only).
type FlavorUpdate struct {
	UpdateMeta
	VCPU      *int `json:"vcpu,omitempty"`
	MemoryGiB *int `json:"memoryGiB,omitempty"`
	DiskGiB   *int `json:"diskGiB,omitempty"`
}

// SandboxTemplate is a sandbox template object (compute.sandboxTemplates.*; vps-templates
// module).
type SandboxTemplate struct {
	ObjectMeta
	SandboxTemplateSpec
}

// SandboxTemplateCreate is the input of compute.sandboxTemplates.create.
type SandboxTemplateCreate struct {
	NamedCreateMeta
	SandboxTemplateSpec
}

// SandboxTemplateUpdate is the input of compute.sandboxTemplates.update: the fields given
// replace the template's.
type SandboxTemplateUpdate struct {
	UpdateMeta
	FlavorID *string           `json:"flavorId,omitempty"`
	ImageID  *string           `json:"imageId,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Network  *string           `json:"network,omitempty"`
	Warm     *WarmPool         `json:"warm,omitempty"`
}

// computeKind is one kind of compute object as the API serves it: compute.<api>.<verb> for
// create, get, list, update (kinds with updatable fields only) and remove (delete, or archive
// for pools), each deciding compute:<api>:<verb> on tenant/<tenantId>.
type computeKind struct {
	kind, api, remove      string
	object, create, update any // zero values; update nil: the kind has no update
	list                   any
}

// computeKinds are the kinds in the fleet document's order.
var computeKinds = []computeKind{
	{kind: "site", api: "sites", remove: "delete", object: Site{}, create: SiteCreate{}, list: ObjectList[Site]{}},
	{kind: "providerAccount", api: "providerAccounts", remove: "delete", object: ProviderAccount{}, create: ProviderAccountCreate{},
		update: ProviderAccountUpdate{}, list: ObjectList[ProviderAccount]{}},
	{kind: "pool", api: "pools", remove: "archive", object: Pool{}, create: PoolCreate{}, update: PoolUpdate{}, list: ObjectList[Pool]{}},
	{kind: "ownerQuota", api: "ownerQuotas", remove: "delete", object: OwnerQuota{}, create: OwnerQuotaCreate{},
		update: OwnerQuotaUpdate{}, list: ObjectList[OwnerQuota]{}},
	{kind: "offer", api: "offers", remove: "delete", object: Offer{}, create: OfferCreate{}, update: OfferUpdate{}, list: ObjectList[Offer]{}},
	{kind: "flavor", api: "flavors", remove: "delete", object: Flavor{}, create: FlavorCreate{}, update: FlavorUpdate{}, list: ObjectList[Flavor]{}},
	{kind: "sandboxTemplate", api: "sandboxTemplates", remove: "delete", object: SandboxTemplate{}, create: SandboxTemplateCreate{},
		update: SandboxTemplateUpdate{}, list: ObjectList[SandboxTemplate]{}},
}

// computeMethods returns the compute.<api>.<verb> rows of every kind, in the order create,
// get, list, update, remove.
func computeMethods() []Method {
	var out []Method
	for _, k := range computeKinds {
		row := func(verb, summary string, write bool, maxBody int64, in, outV any) {
			out = append(out, Method{Name: "compute." + k.api + "." + verb, Summary: summary, Permission: "compute:" + k.api + ":" + verb,
				Scope: OnTenant, Write: write, MaxBody: maxBody, Input: in, Output: outV})
		}
		row("create", "Create a "+k.kind+" (idempotencyKey makes a retry return the same object)", true, MaxDocumentBody, k.create, k.object)
		row("get", "Get a "+k.kind+" by id", false, 0, ObjectRef{}, k.object)
		row("list", "List a tenant's "+k.api+" by id, a page at a time (limit, cursor)", false, 0, ListInput{}, k.list)
		if k.update != nil {
			row("update", "Change a "+k.kind+"'s updatable fields (revision, when given, must be current)", true, MaxDocumentBody, k.update, k.object)
		}
		if k.remove == "archive" {
			row("archive", "Archive a "+k.kind+" (refused while other objects use it)", true, 0, ObjectRef{}, k.object)
		} else {
			row("delete", "Delete a "+k.kind+" (refused while other objects use it)", true, 0, ObjectRef{}, k.object)
		}
	}
	return out
}
