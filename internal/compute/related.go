package compute

import (
	"context"
	"strings"

	"github.com/cubefleet/cubefleet/internal/store"
)

// Related is what planning a tenant's fleet needs besides the tenant's own objects.
type Related struct {
	Offers           []Object // offers other tenants make to this tenant
	OfferedPools     []Object // the pools those offers name
	OfferedFlavors   []Object // the flavors sold on those pools
	ForeignTemplates []Object // other tenants' templates on this tenant's pools
}

// LoadRelated loads the Related objects of tenantID in four queries.
func LoadRelated(ctx context.Context, q store.Querier, tenantID string) (Related, error) {
	var r Related
	var err error
	if r.Offers, err = queryObjects(ctx, q, `kind = $1 AND unique_name = $2 ORDER BY id`, KindOffer, tenantID); err != nil {
		return r, err
	}
	const offeredPools = `SELECT parent_id FROM compute_objects WHERE kind = $2 AND unique_name = $1`
	if r.OfferedPools, err = queryObjects(ctx, q, `kind = $3 AND id IN (`+offeredPools+`) ORDER BY id`, tenantID, KindOffer, KindPool); err != nil {
		return r, err
	}
	if r.OfferedFlavors, err = queryObjects(ctx, q, `kind = $3 AND parent_id IN (`+offeredPools+`) ORDER BY id`, tenantID, KindOffer, KindFlavor); err != nil {
		return r, err
	}
	r.ForeignTemplates, err = queryObjects(ctx, q, `kind = $1 AND tenant_id <> $2 AND ref_a IN (SELECT id FROM compute_objects WHERE tenant_id = $2 AND kind = $3) ORDER BY id`,
		KindSandboxTemplate, tenantID, KindPool)
	return r, err
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// SecretUsers returns tenantID's objects whose spec holds one of refs as a value (provider
// account config, template env), so a secret in use is not deleted from under them.
func SecretUsers(ctx context.Context, q store.Querier, tenantID string, refs []string) ([]Object, error) {
	var out []Object
	for _, ref := range refs {
		pattern := `%:"` + likeEscaper.Replace(ref) + `"%`
		objs, err := queryObjects(ctx, q, `tenant_id = $1 AND spec LIKE $2 ESCAPE '\' ORDER BY kind, id`, tenantID, pattern)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}
