package compute

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// The rules below hold against stored state, so that every tenant's objects export into a fleet
// document that decodes and plans with no changes (fleet spec, "The document" and "Plan"): the
// planner blocks on the same conditions.

// admit checks the counts of o's tenant once o, just inserted, is among its live objects
// (unless s.DeferCounts), and when o takes the tenant past what one fleet document holds, removes
// it again and returns the CONFLICT of countsOver.
func (s *Service) admit(ctx context.Context, q store.Querier, o Object) error {
	if s.DeferCounts {
		return nil
	}
	refusal, err := countsOver(ctx, q, o.TenantID, &o)
	if err != nil {
		return err
	}
	if refusal == nil {
		return nil
	}
	if err := deleteObject(ctx, q, o); err != nil {
		return err
	}
	return refusal
}

// CheckCounts returns CONFLICT when tenantID holds more live objects than one fleet document
// describes: fieldrules.MaxItems sites, provider accounts, pools, flavors or sandbox templates;
// fieldrules.MaxKeys owner quotas or fieldrules.MaxItems offers on one pool;
// fieldrules.MaxObjects objects in all. Every Create checks its own object's counts; a caller
// that sets Service.DeferCounts runs CheckCounts once before it commits. It costs one grouped
// count of the tenant's objects.
func CheckCounts(ctx context.Context, q store.Querier, tenantID string) error {
	refusal, err := countsOver(ctx, q, tenantID, nil)
	if err != nil {
		return err
	}
	if refusal == nil {
		return nil
	}
	return refusal
}

// countsOver counts tenantID's live objects by kind and pool and returns the CONFLICT of the
// first limit they pass (nil when none), naming the count and the fix. With o, it looks only at
// the limits o's creation could have passed: its kind's, its pool's and the total.
func countsOver(ctx context.Context, q store.Querier, tenantID string, o *Object) (*cubefleet.Error, error) {
	rows, err := q.QueryContext(ctx, `SELECT kind, parent_id, count(*) FROM compute_objects
		WHERE tenant_id = $1 AND archived_at IS NULL GROUP BY kind, parent_id ORDER BY kind, parent_id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("count the objects of %s: %w", tenantID, err)
	}
	defer rows.Close()
	perKind := map[string]int{}
	var over *cubefleet.Error
	all := 0
	for rows.Next() {
		var kind, parent string
		var n int
		if err := rows.Scan(&kind, &parent, &n); err != nil {
			return nil, fmt.Errorf("count the objects of %s: %w", tenantID, err)
		}
		perKind[kind] += n
		all += n
		limit := fieldrules.MaxItems
		switch kind {
		case KindOwnerQuota:
			limit = fieldrules.MaxKeys
		case KindOffer:
		default:
			continue
		}
		if over == nil && n > limit && (o == nil || o.Kind == kind && o.ParentID == parent) {
			over = tooMany("pool "+parent, kind, n, limit)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count the objects of %s: %w", tenantID, err)
	}
	if over != nil {
		return over, nil
	}
	for _, k := range Kinds {
		if k.Kind == KindOwnerQuota || k.Kind == KindOffer || o != nil && o.Kind != k.Kind {
			continue
		}
		if n := perKind[k.Kind]; n > fieldrules.MaxItems {
			return tooMany("tenant "+tenantID, k.Kind, n, fieldrules.MaxItems), nil
		}
	}
	if all > fieldrules.MaxObjects {
		return conflict("tenant %s would hold %d objects (owner quotas and offers included); one fleet document describes at most %d: remove some before creating more", tenantID, all, fieldrules.MaxObjects), nil
	}
	return nil, nil
}

func tooMany(scope, kind string, n, limit int) *cubefleet.Error {
	info, _ := Info(kind)
	return conflict("%s would hold %d %s; one fleet document holds at most %d: remove one before creating another", scope, n, info.API, limit)
}

// checkSecretRefs checks the secret references among the values of a provider account's config
// or a template's env (every value that parses as one, whatever its key): a secret:// reference
// names the object's own tenant's secret store (secret://NAME, or secret://TENANT/NAME with its
// own tenant) and a secret it holds; a vault:// reference needs a Vault server (vault); an
// env:// reference is the root tenant's, for a variable env allows. Errors: INVALID_INPUT at
// the entry's path, naming the rule and the fix.
func checkSecretRefs(ctx context.Context, q store.Querier, sp spec, tenantID string, vault bool, env fieldrules.EnvRefs) error {
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
		if msg := env.Check(k, values[k], tenantID == iam.RootTenant); msg != "" {
			return cubefleet.Invalid(strictjson.Member(field, k), "%s", msg)
		}
		msg, err := fieldrules.CheckSecretRef(k, values[k], tenantID, vault, func(name string) (bool, error) {
			return secrets.Exists(ctx, q, tenantID, name)
		})
		if err != nil {
			return fmt.Errorf("look up the secrets of %s: %w", field+"."+k, err)
		}
		if msg != "" {
			return cubefleet.Invalid(strictjson.Member(field, k), "%s", msg)
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

func conflict(format string, args ...any) *cubefleet.Error {
	return &cubefleet.Error{Code: cubefleet.CodeConflict, Message: fmt.Sprintf(format, args...)}
}
