// Package compute holds the compute objects a fleet is made of: sites, provider accounts, pools,
// owner quotas, offers, flavors and sandbox templates (docs/fleet-document.md). Every
// operation takes a store.Querier, so it runs alone or inside a caller's transaction (fleet
// apply runs a whole plan in one). Permission decisions and audit rows belong to the callers: the
// API's method table, and fleet apply for the calls of a plan.
package compute

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/strictjson"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Module is the compute module's migrations (`compute/0001_objects`).
var Module = store.EmbeddedModule("compute", migrations)

// FleetNamer gives sites and pools the names fleet as code keeps for them (table fleet_names).
type FleetNamer interface {
	// FleetNames returns id -> fleet name for those of ids that have one.
	FleetNames(ctx context.Context, q store.Querier, ids []string) (map[string]string, error)
}

// Service runs the compute operations. The zero value serves every module and names nothing.
type Service struct {
	// Disabled lists the modules this deployment leaves out (ModuleVPS, ModuleTemplates).
	Disabled map[string]bool
	// Names adds fleet names to sites and pools; nil adds none.
	Names FleetNamer
	// VaultConfigured is true when a Vault server is configured (--vault-addr); without one,
	// vault:// references are INVALID_INPUT, as they block a fleet plan.
	VaultConfigured bool
	// EnvRefs is the rule of env:// references (--env-ref-allow): the root tenant's only, for
	// the variables it allows; the zero value allows none.
	EnvRefs fieldrules.EnvRefs
	// DeferCounts leaves the counts one fleet document holds to the caller, which runs
	// CheckCounts before it commits: fleet apply, which creates up to 20,000 objects in one
	// transaction and checks once. Without it, every Create checks its tenant.
	DeferCounts bool
	// DeferEgress leaves the rule that a template's egressAllow lies inside its pool's
	// policy.egressAllow to the caller, which runs CheckEgress before it commits: fleet apply,
	// where a pool's policy and its templates change in one transaction, in either order.
	// Without it, every template create or update and every pool update checks it.
	DeferEgress bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Serves reports whether this deployment serves kind.
func (s *Service) Serves(kind string) bool {
	info, ok := Info(kind)
	if !ok {
		return false
	}
	if info.Module == "" {
		return true
	}
	if s.Disabled[ModuleVPS] {
		return false
	}
	return !(info.Module == ModuleTemplates && s.Disabled[ModuleTemplates])
}

func (s *Service) served(kind string) error {
	if !s.Serves(kind) {
		return cubefleet.Errorf(cubefleet.CodeUnsupported, "this deployment does not run sandboxes: %ss need the vps module", kind)
	}
	return nil
}

// Ref is the input that names one object: {"tenantId", "id", "revision"}. Revision, when set,
// must be the object's current revision (CONFLICT otherwise).
type Ref struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
	Revision *int64 `json:"revision,omitempty"`
}

// Create creates an object of kind from the API input in: `tenantId`, an optional
// `idempotencyKey` (1-255 characters, no control character; the id then derives from it and
// callerID, and a repeated create returns the object it made), `name` for named kinds, and the
// spec's fields, which follow the rule table the fleet document reads (package fieldrules).
// Reference fields take an id or `key:<idempotency key>`. Errors: INVALID_INPUT (with
// details.path: a field breaks its rule, a reference names no live object of the tenant, a
// secret:// reference no secret of the tenant, a vault:// reference with no Vault configured),
// CONFLICT (name taken, the key's object is archived, or the tenant or pool already holds as many
// objects of the kind as one fleet document does), UNSUPPORTED (module off).
func (s *Service) Create(ctx context.Context, q store.Querier, kind, callerID string, in json.RawMessage) (Object, error) {
	if err := s.served(kind); err != nil {
		return Object{}, err
	}
	info, _ := Info(kind)
	fields, err := splitObject(in)
	if err != nil {
		return Object{}, err
	}
	var tenantID, key, name string
	if err := takeString(fields, "tenantId", &tenantID, true); err != nil {
		return Object{}, err
	}
	if err := checkTenantID(tenantID); err != nil {
		return Object{}, err
	}
	if err := takeString(fields, "idempotencyKey", &key, false); err != nil {
		return Object{}, err
	}
	if err := checkIdempotencyKey(key); err != nil {
		return Object{}, err
	}
	if info.Named {
		if err := takeString(fields, "name", &name, true); err != nil {
			return Object{}, err
		}
		if !ValidName(name) {
			return Object{}, cubefleet.Invalid("name", "name must be %s", fieldrules.Name.Rule())
		}
	}
	sp := newSpec(kind)
	if err := strictjson.Decode(joinObject(fields), sp); err != nil {
		return Object{}, err
	}
	return s.create(ctx, q, info, callerID, tenantID, key, name, sp)
}

// create creates an object of info's kind with spec sp, its tenant, idempotency key and name
// already checked: the end of Create and of a create Op.
func (s *Service) create(ctx context.Context, q store.Querier, info KindInfo, callerID, tenantID, key, name string, sp spec) (Object, error) {
	kind := info.Kind
	var err error
	if err := s.checkSpec(ctx, q, sp, tenantID, callerID); err != nil {
		return Object{}, err
	}
	now := s.now().UnixMilli()
	o := Object{TenantID: tenantID, Kind: kind, ParentID: sp.parent(), Refs: refsOf(sp), Name: sp.uniqueName(name),
		Revision: 1, IdempotencyKey: key, CreatedBy: callerID, CreatedAt: now, UpdatedAt: now}
	if o.Spec, err = json.Marshal(sp); err != nil {
		return Object{}, err
	}
	if key == "" {
		o.ID = cubefleet.NewID(info.Prefix)
		if _, err := insertObject(ctx, q, o); err != nil {
			return Object{}, err
		}
		return o, s.admit(ctx, q, o) // a new id has no fleet name yet
	}
	// The id derives from the key and the caller. An archived object keeps its id, so a key
	// reused after an archive derives the next generation's id: still deterministic, since it
	// depends only on stored state. A retried create returns what the first one made.
	for gen := 0; ; gen++ {
		o.ID = cubefleet.DerivedID(info.Prefix, generation(key, gen), callerID)
		inserted, err := insertObject(ctx, q, o)
		if err != nil {
			return Object{}, err
		}
		if inserted {
			return o, s.admit(ctx, q, o)
		}
		prior, err := Load(ctx, q, o.ID)
		if err != nil {
			return Object{}, err
		}
		if prior.TenantID != tenantID || prior.Kind != kind {
			return Object{}, cubefleet.Errorf(cubefleet.CodeConflict, "idempotency key %q already made %s", key, describe(prior))
		}
		if !prior.Archived() {
			return s.named(ctx, q, prior)
		}
	}
}

func (s *Service) checkSpec(ctx context.Context, q store.Querier, sp spec, tenantID, callerID string) error {
	var p problems
	sp.validate(&p)
	if len(p) > 0 {
		return cubefleet.InvalidAll(p)
	}
	if err := checkSecretRefs(ctx, q, sp, tenantID, s.VaultConfigured, s.EnvRefs); err != nil {
		return err
	}
	refs, err := resolveRefs(ctx, q, sp, tenantID, callerID)
	if err != nil {
		return err
	}
	if err := sp.check(ctx, q, tenantID, refs); err != nil {
		return err
	}
	if ts, ok := sp.(*SandboxTemplateSpec); ok {
		return s.templateEgress(ctx, q, ts, refs[ts.PoolID])
	}
	return nil
}

// Get returns object id of kind in tenantID, or NOT_FOUND.
func (s *Service) Get(ctx context.Context, q store.Querier, kind string, ref Ref) (Object, error) {
	if err := s.served(kind); err != nil {
		return Object{}, err
	}
	o, err := s.load(ctx, q, kind, ref)
	if err != nil {
		return Object{}, err
	}
	return s.named(ctx, q, o)
}

func (s *Service) load(ctx context.Context, q store.Querier, kind string, ref Ref) (Object, error) {
	if info, _ := Info(kind); !cubefleet.IsID(ref.ID, info.Prefix) {
		return Object{}, cubefleet.Invalid("id", "id takes %s id (%s_ and 26 characters), not %q; compute.%s.list shows them with their names", cubefleet.Article(kind), info.Prefix, ref.ID, info.API)
	}
	o, err := Load(ctx, q, ref.ID)
	if err != nil || o.Kind != kind || o.TenantID != ref.TenantID {
		if err == nil || cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			return Object{}, cubefleet.Errorf(cubefleet.CodeNotFound, "tenant %s has no %s %s", ref.TenantID, kind, ref.ID)
		}
		return Object{}, err
	}
	if ref.Revision != nil && *ref.Revision != o.Revision {
		return Object{}, revisionConflict(o.ID, *ref.Revision)
	}
	return o, nil
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

// ListOutput is a page of objects, ordered by id; NextCursor is "" on the last page.
type ListOutput struct {
	Items      []Object `json:"items"`
	NextCursor string   `json:"nextCursor,omitempty"`
}

// List returns a page of tenantID's objects of kind.
func (s *Service) List(ctx context.Context, q store.Querier, kind string, in ListInput) (ListOutput, error) {
	if err := s.served(kind); err != nil {
		return ListOutput{}, err
	}
	if in.Limit < 0 || in.Limit > 1000 {
		return ListOutput{}, cubefleet.Invalid("limit", "limit is 1 to 1000")
	}
	if err := checkTenantID(in.TenantID); err != nil {
		return ListOutput{}, err
	}
	if info, _ := Info(kind); in.Cursor != "" && !cubefleet.IsID(in.Cursor, info.Prefix) {
		return ListOutput{}, cubefleet.Invalid("cursor", "cursor %q is not a page's nextCursor (%s id, %s_...): pass the nextCursor of the previous page", in.Cursor, cubefleet.Article(kind), info.Prefix)
	}
	if in.PoolID != "" && !cubefleet.IsID(in.PoolID, "pool") {
		return ListOutput{}, cubefleet.Invalid("poolId", "poolId takes a pool id (pool_ and 26 characters); compute.pools.list shows them")
	}
	if in.Limit == 0 {
		in.Limit = 100
	}
	where := `tenant_id = $1 AND kind = $2 AND id > $3`
	args := []any{in.TenantID, kind, in.Cursor}
	if in.PoolID != "" {
		where += ` AND (parent_id = $4 OR ref_a = $4)`
		args = append(args, in.PoolID)
	}
	if !in.IncludeArchived {
		where += ` AND archived_at IS NULL`
	}
	items, err := queryObjects(ctx, q, fmt.Sprintf(`%s ORDER BY id LIMIT %d`, where, in.Limit+1), args...)
	if err != nil {
		return ListOutput{}, err
	}
	out := ListOutput{Items: items}
	if len(items) > in.Limit {
		out.Items = items[:in.Limit]
		out.NextCursor = out.Items[in.Limit-1].ID
	}
	if out.Items == nil {
		out.Items = []Object{}
	}
	if err := s.addNames(ctx, q, out.Items); err != nil {
		return ListOutput{}, err
	}
	return out, nil
}

// Pools returns every pool of every tenant, archived ones included, ordered by id, with their
// fleet names (through Names): the node registry matches a Cubelet's cluster_label against
// them. The rows are compute's (compute_objects); the names are fleet's (fleet_names).
func (s *Service) Pools(ctx context.Context, q store.Querier) ([]Object, error) {
	pools, err := queryObjects(ctx, q, `kind = $1 ORDER BY id`, KindPool)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	if err := s.addNames(ctx, q, pools); err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return pools, nil
}

// Update changes the updatable fields of an object: the input is `tenantId`, `id`, optional
// `revision`, and the fields to change (null removes an optional field). Changing a fixed field
// is INVALID_INPUT naming the field and saying to create a new object instead; a stale revision
// is CONFLICT (wrapping ErrRevision).
func (s *Service) Update(ctx context.Context, q store.Querier, kind, callerID string, in json.RawMessage) (Object, error) {
	if err := s.served(kind); err != nil {
		return Object{}, err
	}
	info, _ := Info(kind)
	fields, err := splitObject(in)
	if err != nil {
		return Object{}, err
	}
	ref, err := takeRef(fields)
	if err != nil {
		return Object{}, err
	}
	o, err := s.load(ctx, q, kind, ref)
	if err != nil {
		return Object{}, err
	}
	if o.Archived() {
		return Object{}, cubefleet.Errorf(cubefleet.CodeConflict, "%s is archived", describe(o))
	}
	current, err := splitObject(o.Spec)
	if err != nil {
		return Object{}, err
	}
	for _, k := range sortedKeys(fields) {
		if err := updatable(info, k); err != nil {
			return Object{}, err
		}
		if bytes.Equal(bytes.TrimSpace(fields[k]), []byte("null")) {
			delete(current, k)
		} else {
			current[k] = fields[k]
		}
	}
	sp := newSpec(kind)
	if err := strictjson.Decode(joinObject(current), sp); err != nil {
		return Object{}, err
	}
	return s.update(ctx, q, o, sp, callerID)
}

// updatable refuses field k of an update of info's kind unless an update may change it:
// INVALID_INPUT naming the field, saying to create a new object for a fixed one.
func updatable(info KindInfo, k string) error {
	if slices.Contains(info.Updatable, k) {
		return nil
	}
	if k == "name" || slices.Contains(specFields(info.Kind), k) {
		return cubefleet.Invalid(k, "%s of %s cannot change: create a new %s instead", k, cubefleet.Article(info.Kind), info.Kind)
	}
	return cubefleet.Invalid(k, "unknown field %s; %s update takes %s", k, cubefleet.Article(info.Kind), strings.Join(info.Updatable, ", "))
}

// update stores sp as live object o's new spec, checked as a create's is: the end of Update
// and of an update Op.
func (s *Service) update(ctx context.Context, q store.Querier, o Object, sp spec, callerID string) (Object, error) {
	var err error
	if err := s.checkSpec(ctx, q, sp, o.TenantID, callerID); err != nil {
		return Object{}, err
	}
	if ps, ok := sp.(*PoolSpec); ok {
		if err := s.poolEgress(ctx, q, o, ps); err != nil {
			return Object{}, err
		}
	}
	if o.Spec, err = json.Marshal(sp); err != nil {
		return Object{}, err
	}
	o.Refs = refsOf(sp)
	o.Revision++
	o.UpdatedAt = s.now().UnixMilli()
	if err := updateObject(ctx, q, o); err != nil {
		return Object{}, err
	}
	return s.named(ctx, q, o)
}

// Remove deletes an object, or archives it for pools. It refuses (CONFLICT, naming up to five)
// while live objects still reference it, and an offer while the tenant it offers the pool to has
// sandbox templates on the pool.
func (s *Service) Remove(ctx context.Context, q store.Querier, kind string, ref Ref) (Object, error) {
	if err := s.served(kind); err != nil {
		return Object{}, err
	}
	o, err := s.load(ctx, q, kind, ref)
	if err != nil {
		return Object{}, err
	}
	if o.Archived() {
		return Object{}, cubefleet.Errorf(cubefleet.CodeConflict, "%s is already archived", describe(o))
	}
	users, err := referrers(ctx, q, o.ID)
	if err != nil {
		return Object{}, err
	}
	if len(users) > 0 {
		var names []string
		for i, u := range users {
			if i == 5 {
				names = append(names, fmt.Sprintf("and %d more", len(users)-5))
				break
			}
			names = append(names, describe(u))
		}
		return Object{}, cubefleet.Errorf(cubefleet.CodeConflict, "%s is still used by %s", describe(o), strings.Join(names, ", "))
	}
	if kind == KindOffer {
		if err := offerInUse(ctx, q, o); err != nil {
			return Object{}, err
		}
	}
	o, err = s.named(ctx, q, o)
	if err != nil {
		return Object{}, err
	}
	if kind == KindPool {
		now := s.now().UnixMilli()
		o.ArchivedAt = &now
		o.Revision++
		o.UpdatedAt = now
		return o, updateObject(ctx, q, o)
	}
	return o, deleteObject(ctx, q, o)
}

func (s *Service) named(ctx context.Context, q store.Querier, o Object) (Object, error) {
	one := []Object{o}
	err := s.addNames(ctx, q, one)
	return one[0], err
}

func (s *Service) addNames(ctx context.Context, q store.Querier, objs []Object) error {
	if s.Names == nil {
		return nil
	}
	var ids []string
	for _, o := range objs {
		if o.Kind == KindSite || o.Kind == KindPool {
			ids = append(ids, o.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	names, err := s.Names.FleetNames(ctx, q, ids)
	if err != nil {
		return err
	}
	for i := range objs {
		if n, ok := names[objs[i].ID]; ok {
			objs[i].Name = n
		}
	}
	return nil
}

// specFields lists the JSON field names of kind's spec.
func specFields(kind string) []string {
	t := reflect.TypeOf(newSpec(kind)).Elem()
	out := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

func generation(key string, gen int) string {
	if gen == 0 {
		return key
	}
	return fmt.Sprintf("%s#%d", key, gen)
}
