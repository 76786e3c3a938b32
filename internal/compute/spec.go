package compute

import (
	"context"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
)

// spec is what every kind's spec type does.
type spec interface {
	validate(p *problems)
	// refFields lists the fields that hold ids of other objects, in Refs order.
	refFields() []refField
	// parent is the pool that scopes the object's unique name ("" for tenant scope).
	parent() string
	// uniqueName is the name unique within (tenant, kind, parent), "" for none.
	uniqueName(name string) string
	// check runs the kind's own rules against stored state (beyond reference existence);
	// refs holds the objects the reference fields name, by id.
	check(ctx context.Context, q store.Querier, tenantID string, refs map[string]Object) error
}

// refField is one reference field: its JSON name, a pointer to its value, the kind it names,
// and whether the referenced object may belong to another tenant that offers it.
type refField struct {
	name    string
	id      *string
	kind    string
	offered bool
}

// newSpec returns a new zero spec of kind (the kind table's constructor).
func newSpec(kind string) spec {
	info, ok := Info(kind)
	if !ok {
		panic("compute: unknown kind " + kind) // kinds come from the method table, never from input
	}
	return info.newSpec()
}

func (s *SiteSpec) refFields() []refField                                                 { return nil }
func (s *SiteSpec) parent() string                                                        { return "" }
func (s *SiteSpec) uniqueName(string) string                                              { return "" }
func (s *SiteSpec) check(context.Context, store.Querier, string, map[string]Object) error { return nil }

func (s *ProviderAccountSpec) refFields() []refField         { return nil }
func (s *ProviderAccountSpec) parent() string                { return "" }
func (s *ProviderAccountSpec) uniqueName(name string) string { return name }
func (s *ProviderAccountSpec) check(context.Context, store.Querier, string, map[string]Object) error {
	return nil
}

func (s *PoolSpec) refFields() []refField {
	f := []refField{{name: "siteId", id: &s.SiteID, kind: KindSite}}
	if s.ProviderAccountID != "" {
		f = append(f, refField{name: "providerAccountId", id: &s.ProviderAccountID, kind: KindProviderAccount})
	}
	return f
}
func (s *PoolSpec) parent() string                                                        { return "" }
func (s *PoolSpec) uniqueName(string) string                                              { return "" }
func (s *PoolSpec) check(context.Context, store.Querier, string, map[string]Object) error { return nil }

func (s *OwnerQuotaSpec) refFields() []refField {
	return []refField{{name: "poolId", id: &s.PoolID, kind: KindPool}}
}
func (s *OwnerQuotaSpec) parent() string           { return s.PoolID }
func (s *OwnerQuotaSpec) uniqueName(string) string { return s.Resource }
func (s *OwnerQuotaSpec) check(context.Context, store.Querier, string, map[string]Object) error {
	return nil
}

func (s *OfferSpec) refFields() []refField {
	return []refField{{name: "poolId", id: &s.PoolID, kind: KindPool}}
}
func (s *OfferSpec) parent() string           { return s.PoolID }
func (s *OfferSpec) uniqueName(string) string { return s.ToTenantID }
func (s *OfferSpec) check(ctx context.Context, q store.Querier, tenantID string, _ map[string]Object) error {
	if s.ToTenantID == tenantID {
		return cubefleet.Invalid("toTenantId", "a pool cannot be offered to its own owner (%s)", tenantID)
	}
	ok, err := iam.TenantExists(ctx, q, s.ToTenantID)
	if err != nil {
		return err
	}
	if !ok {
		return cubefleet.Invalid("toTenantId", "tenant %s does not exist", s.ToTenantID)
	}
	return nil
}

func (s *FlavorSpec) refFields() []refField {
	return []refField{{name: "poolId", id: &s.PoolID, kind: KindPool}}
}
func (s *FlavorSpec) parent() string                { return s.PoolID }
func (s *FlavorSpec) uniqueName(name string) string { return name }
func (s *FlavorSpec) check(context.Context, store.Querier, string, map[string]Object) error {
	return nil
}

func (s *SandboxTemplateSpec) refFields() []refField {
	return []refField{
		{name: "poolId", id: &s.PoolID, kind: KindPool, offered: true},
		{name: "flavorId", id: &s.FlavorID, kind: KindFlavor, offered: true},
	}
}
func (s *SandboxTemplateSpec) parent() string                { return "" }
func (s *SandboxTemplateSpec) uniqueName(name string) string { return name }
func (s *SandboxTemplateSpec) check(_ context.Context, _ store.Querier, _ string, refs map[string]Object) error {
	if refs[s.FlavorID].ParentID != s.PoolID {
		return cubefleet.Invalid("flavorId", "flavor %s is not sold on pool %s", s.FlavorID, s.PoolID)
	}
	return nil
}

// resolveRefs turns `key:<idempotency key>` references into the ids that key derives for
// caller, then checks that every referenced object exists, is of the right kind, is live, and
// belongs to tenantID (or, where allowed, to a tenant that offers its pool to tenantID). It
// returns the referenced objects by id.
func resolveRefs(ctx context.Context, q store.Querier, sp spec, tenantID, callerID string) (map[string]Object, error) {
	refs := map[string]Object{}
	for _, f := range sp.refFields() {
		info, _ := Info(f.kind)
		var o Object
		var err error
		if key, ok := cutKeyRef(*f.id); ok {
			o, err = loadKeyRef(ctx, q, info.Prefix, key, callerID)
			*f.id = o.ID
		} else if !cubefleet.IsID(*f.id, info.Prefix) {
			return nil, cubefleet.Invalid(f.name, "%s must be %s id (%s_...) or key:<idempotency key>", f.name, cubefleet.Article(f.kind), info.Prefix)
		} else {
			o, err = Load(ctx, q, *f.id)
		}
		if cubefleet.IsCode(err, cubefleet.CodeNotFound) || (err == nil && o.Kind != f.kind) {
			return nil, cubefleet.Invalid(f.name, "no %s %s", f.kind, *f.id)
		}
		if err != nil {
			return nil, err
		}
		if o.Archived() {
			return nil, cubefleet.Invalid(f.name, "%s %s is archived", f.kind, *f.id)
		}
		refs[o.ID] = o
		if o.TenantID == tenantID {
			continue
		}
		poolID := o.ID
		if f.kind != KindPool {
			poolID = o.ParentID
		}
		if !f.offered || !offered(ctx, q, poolID, tenantID) {
			return nil, cubefleet.Invalid(f.name, "no %s %s in tenant %s", f.kind, *f.id, tenantID)
		}
	}
	return refs, nil
}

// loadKeyRef loads the live object key made for caller, skipping archived generations (see
// Service.Create). When there is none, the error is NOT_FOUND and the returned object carries
// the id the next create with key would get.
func loadKeyRef(ctx context.Context, q store.Querier, prefix, key, callerID string) (Object, error) {
	for gen := 0; ; gen++ {
		id := cubefleet.DerivedID(prefix, generation(key, gen), callerID)
		o, err := Load(ctx, q, id)
		if cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			return Object{ID: id}, err
		}
		if err != nil || !o.Archived() {
			return o, err
		}
	}
}

func offered(ctx context.Context, q store.Querier, poolID, tenantID string) bool {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM compute_objects WHERE kind = $1 AND parent_id = $2 AND unique_name = $3`, KindOffer, poolID, tenantID).Scan(&n)
	return err == nil && n > 0
}

// KeyRef returns the reference form of an idempotency key, `key:<key>`: a reference field
// holding it names the object that key created for the calling principal.
func KeyRef(key string) string { return "key:" + key }

func cutKeyRef(s string) (string, bool) {
	if len(s) > 4 && s[:4] == "key:" {
		return s[4:], true
	}
	return "", false
}

func refsOf(sp spec) [2]string {
	var r [2]string
	for i, f := range sp.refFields() {
		if i < 2 {
			r[i] = *f.id
		}
	}
	return r
}

func describe(o Object) string {
	if o.Name != "" {
		return fmt.Sprintf("%s %s (%s)", o.Kind, o.Name, o.ID)
	}
	return o.Kind + " " + o.ID
}
