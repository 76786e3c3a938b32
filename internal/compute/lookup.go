package compute

import (
	"context"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/store"
)

// What the sandboxes read of the compute objects when they admit, place and warm sandboxes
// (docs/sandboxes.md): a tenant's template by id or name, the offer of a pool to a tenant, a
// pool's owner quotas, and the templates on a pool or with a warm pool.

// FindNamed returns tenantID's live object of kind named ref: its id, or its own name (kinds
// that have one: provider accounts, flavors, templates). Errors: NOT_FOUND.
func FindNamed(ctx context.Context, q store.Querier, tenantID, kind, ref string) (Object, error) {
	objs, err := queryObjects(ctx, q, `tenant_id = $1 AND kind = $2 AND (id = $3 OR unique_name = $3) AND archived_at IS NULL ORDER BY id LIMIT 2`, tenantID, kind, ref)
	if err != nil {
		return Object{}, err
	}
	switch {
	case len(objs) == 0:
		return Object{}, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no %s %s", tenantID, kind, ref)
	case len(objs) > 1: // flavors are named per pool: only an id names one of them
		return Object{}, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has several %ss named %s: give the id", tenantID, kind, ref)
	}
	return objs[0], nil
}

// OfferTo returns the offer of pool poolID to tenantID; ok is false when the pool is not offered
// to it.
func OfferTo(ctx context.Context, q store.Querier, poolID, tenantID string) (spec OfferSpec, ok bool, err error) {
	objs, err := queryObjects(ctx, q, `kind = $1 AND parent_id = $2 AND unique_name = $3`, KindOffer, poolID, tenantID)
	if err != nil || len(objs) == 0 {
		return OfferSpec{}, false, err
	}
	if err := objs[0].DecodeSpec(&spec); err != nil {
		return OfferSpec{}, false, err
	}
	return spec, true, nil
}

// OwnerQuotas returns the owner quotas of pool poolID: resource -> the units its owner keeps.
func OwnerQuotas(ctx context.Context, q store.Querier, poolID string) (map[string]int64, error) {
	objs, err := queryObjects(ctx, q, `kind = $1 AND parent_id = $2`, KindOwnerQuota, poolID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(objs))
	for _, o := range objs {
		var s OwnerQuotaSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		out[s.Resource] = s.Max
	}
	return out, nil
}

// Templates returns every sandbox template (of every tenant), ordered by id: the sandboxes'
// loops prepare them on their pools' nodes and keep their warm pools.
func Templates(ctx context.Context, q store.Querier) ([]Object, error) {
	objs, err := queryObjects(ctx, q, `kind = $1 ORDER BY id`, KindSandboxTemplate)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	return objs, nil
}

// Offers returns every offer (of every pool), ordered by id: the console's Pools page shows
// each with what its tenant uses.
func Offers(ctx context.Context, q store.Querier) ([]Object, error) {
	objs, err := queryObjects(ctx, q, `kind = $1 ORDER BY id`, KindOffer)
	if err != nil {
		return nil, fmt.Errorf("list offers: %w", err)
	}
	return objs, nil
}
