package compute

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// The rules below hold against stored state, so that every tenant's objects export into a fleet
// document that decodes and plans with no changes (fleet spec, "The document" and "Plan"): the
// planner blocks on the same conditions.

// checkCounts refuses a new object of kind in tenantID that would take the tenant past what one
// fleet document holds: fieldrules.MaxItems live sites, provider accounts, pools, flavors and
// sandbox templates; fieldrules.MaxKeys owner quotas and fieldrules.MaxItems offers on one pool;
// fieldrules.MaxObjects live objects in all. It returns CONFLICT naming the count and the fix.
func checkCounts(ctx context.Context, q store.Querier, kind, tenantID string, sp spec) error {
	info, _ := Info(kind)
	limit, where, args := fieldrules.MaxItems, `tenant_id = $1 AND kind = $2 AND archived_at IS NULL`, []any{tenantID, kind}
	scope := "tenant " + tenantID
	switch kind {
	case KindOwnerQuota, KindOffer:
		if kind == KindOwnerQuota {
			limit = fieldrules.MaxKeys
		}
		where += ` AND parent_id = $3`
		args = append(args, sp.parent())
		scope = "pool " + sp.parent()
	}
	var n, all int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM compute_objects WHERE `+where, args...).Scan(&n); err != nil {
		return fmt.Errorf("count %s: %w", info.API, err)
	}
	if n >= limit {
		return cubefleet.Errorf(cubefleet.CodeConflict, "%s already has %d %s, the most one fleet document holds: remove one before creating another", scope, n, info.API)
	}
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM compute_objects WHERE tenant_id = $1 AND archived_at IS NULL`, tenantID).Scan(&all); err != nil {
		return fmt.Errorf("count objects: %w", err)
	}
	if all >= fieldrules.MaxObjects {
		return cubefleet.Errorf(cubefleet.CodeConflict, "tenant %s already has %d objects (owner quotas and offers included), the most one fleet document describes: remove some before creating more", tenantID, all)
	}
	return nil
}

// checkSecretRefs checks the secret references among the values of a provider account's config
// or a template's env (every value that parses as one, whatever its key): a secret:// reference
// names the object's own tenant's secret store (secret://NAME, or secret://TENANT/NAME with its
// own tenant) and a secret it holds; a vault:// reference needs a Vault server (vault). Errors:
// INVALID_INPUT at the entry's path, naming the fix.
func checkSecretRefs(ctx context.Context, q store.Querier, sp spec, tenantID string, vault bool) error {
	var field string
	var values map[string]string
	switch s := sp.(type) {
	case *ProviderAccountSpec:
		field, values = "config", s.Config
	case *SandboxTemplateSpec:
		field, values = "env", s.Env
	default:
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		msg, err := fieldrules.CheckSecretRef(k, values[k], tenantID, vault, func(name string) (bool, error) {
			return secrets.Exists(ctx, q, tenantID, name)
		})
		if err != nil {
			return fmt.Errorf("look up the secrets of %s: %w", field+"."+k, err)
		}
		if msg != "" {
			return cubefleet.Invalid(field+"."+k, "%s", msg)
		}
	}
	return nil
}

// offerInUse refuses withdrawing offer o while the tenant it offers the pool to still has
// sandbox templates on the pool (CONFLICT naming the first).
func offerInUse(ctx context.Context, q store.Querier, o Object) error {
	var s OfferSpec
	if err := o.DecodeSpec(&s); err != nil {
		return err
	}
	users, err := queryObjects(ctx, q, `tenant_id = $1 AND kind = $2 AND ref_a = $3 ORDER BY id LIMIT 1`, s.ToTenantID, KindSandboxTemplate, o.ParentID)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return cubefleet.Errorf(cubefleet.CodeConflict, "%s is still used: tenant %s has %s on the pool; delete the template first", describe(o), s.ToTenantID, describe(users[0]))
	}
	return nil
}
