package client

import (
	"context"
	"iter"

	"github.com/cubefleet/cubefleet/api"
)

// ComputeService holds the compute objects' methods, one field per kind
// (compute.<kind>.<verb>). Each decides compute:<kind>:<verb> on tenant/<tenantId>.
type ComputeService struct {
	Sites            *Deletable[api.Site, api.SiteCreate]
	ProviderAccounts *Updatable[api.ProviderAccount, api.ProviderAccountCreate, api.ProviderAccountUpdate]
	Pools            *PoolsService
	OwnerQuotas      *Updatable[api.OwnerQuota, api.OwnerQuotaCreate, api.OwnerQuotaUpdate]
	Offers           *Updatable[api.Offer, api.OfferCreate, api.OfferUpdate]
	Flavors          *Updatable[api.Flavor, api.FlavorCreate, api.FlavorUpdate]
	SandboxTemplates *Updatable[api.SandboxTemplate, api.SandboxTemplateCreate, api.SandboxTemplateUpdate]
}

func newComputeService(c *Client) *ComputeService {
	return &ComputeService{
		Sites:            &Deletable[api.Site, api.SiteCreate]{objects[api.Site, api.SiteCreate]{c, "sites"}},
		ProviderAccounts: &Updatable[api.ProviderAccount, api.ProviderAccountCreate, api.ProviderAccountUpdate]{objects[api.ProviderAccount, api.ProviderAccountCreate]{c, "providerAccounts"}},
		Pools:            &PoolsService{objects[api.Pool, api.PoolCreate]{c, "pools"}},
		OwnerQuotas:      &Updatable[api.OwnerQuota, api.OwnerQuotaCreate, api.OwnerQuotaUpdate]{objects[api.OwnerQuota, api.OwnerQuotaCreate]{c, "ownerQuotas"}},
		Offers:           &Updatable[api.Offer, api.OfferCreate, api.OfferUpdate]{objects[api.Offer, api.OfferCreate]{c, "offers"}},
		Flavors:          &Updatable[api.Flavor, api.FlavorCreate, api.FlavorUpdate]{objects[api.Flavor, api.FlavorCreate]{c, "flavors"}},
		SandboxTemplates: &Updatable[api.SandboxTemplate, api.SandboxTemplateCreate, api.SandboxTemplateUpdate]{objects[api.SandboxTemplate, api.SandboxTemplateCreate]{c, "sandboxTemplates"}},
	}
}

// objects are the methods every compute kind has: create, get, list.
type objects[O, C any] struct {
	c   *Client
	api string // the kind's plural in method names, e.g. "pools"
}

// Create runs compute.<kind>.create: the object as created (or, for a retried create with
// the same idempotencyKey by the same caller, as it was created the first time).
func (k objects[O, C]) Create(ctx context.Context, in C) (O, error) {
	return call[O](ctx, k.c, "compute."+k.api+".create", in)
}

// Get runs compute.<kind>.get: the object by id (NOT_FOUND when the tenant has none).
func (k objects[O, C]) Get(ctx context.Context, in api.ObjectRef) (O, error) {
	return call[O](ctx, k.c, "compute."+k.api+".get", in)
}

// List runs compute.<kind>.list: one page of the tenant's objects, by id.
func (k objects[O, C]) List(ctx context.Context, in api.ListInput) (api.ObjectList[O], error) {
	return call[api.ObjectList[O]](ctx, k.c, "compute."+k.api+".list", in)
}

// All iterates over every object List finds from in (in.Cursor is ignored), a page at a time.
func (k objects[O, C]) All(ctx context.Context, in api.ListInput) iter.Seq2[O, error] {
	return pages(ctx, func(ctx context.Context, cursor string) ([]O, string, error) {
		in.Cursor = cursor
		p, err := k.List(ctx, in)
		return p.Items, p.NextCursor, err
	})
}

// Deletable are the methods of a kind without updatable fields (sites).
type Deletable[O, C any] struct{ objects[O, C] }

// Delete runs compute.<kind>.delete (CONFLICT while other objects use it): the object as it was.
func (k *Deletable[O, C]) Delete(ctx context.Context, in api.ObjectRef) (O, error) {
	return call[O](ctx, k.c, "compute."+k.api+".delete", in)
}

// Updatable are the methods of a kind with updatable fields that is deleted.
type Updatable[O, C, U any] struct{ objects[O, C] }

// Update runs compute.<kind>.update: the object after the change (CONFLICT when in.Revision is
// given and not current).
func (k *Updatable[O, C, U]) Update(ctx context.Context, in U) (O, error) {
	return call[O](ctx, k.c, "compute."+k.api+".update", in)
}

// Delete runs compute.<kind>.delete (CONFLICT while other objects use it): the object as it was.
func (k *Updatable[O, C, U]) Delete(ctx context.Context, in api.ObjectRef) (O, error) {
	return call[O](ctx, k.c, "compute."+k.api+".delete", in)
}

// PoolsService are the pools' methods: pools are archived, not deleted.
type PoolsService struct {
	objects[api.Pool, api.PoolCreate]
}

// Update runs compute.pools.update.
func (k *PoolsService) Update(ctx context.Context, in api.PoolUpdate) (api.Pool, error) {
	return call[api.Pool](ctx, k.c, "compute.pools.update", in)
}

// Archive runs compute.pools.archive (CONFLICT while other objects use it): the pool, archived.
func (k *PoolsService) Archive(ctx context.Context, in api.ObjectRef) (api.Pool, error) {
	return call[api.Pool](ctx, k.c, "compute.pools.archive", in)
}
