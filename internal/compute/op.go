package compute

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/store"
)

// An Op is one compute operation as a Go value: what the input of a compute API call says once
// decoded, so a caller in the same process (fleet apply, for each call of a plan) runs it
// without encoding it to JSON. Run checks it with the rules Create, Update and Remove apply to
// an API input.
type Op struct {
	// Verb is VerbCreate, VerbUpdate or the kind's RemoveVerb (KindInfo.RemoveVerb).
	Verb string
	// Kind is the object's kind (KindSite, ...).
	Kind string
	// Ref names the object: for a create only Ref.TenantID (the tenant it is created in); for
	// an update or a remove the object's tenant, id and, when set, its expected revision.
	Ref Ref
	// IdempotencyKey is a create's optional idempotency key (as Create's idempotencyKey).
	IdempotencyKey string
	// Name is a create's name, for named kinds only (KindInfo.Named).
	Name string
	// Spec is a create's spec, or the spec an update takes Fields from: a value of the kind's
	// spec type (SiteSpec, PoolSpec, ...). Reference fields take an id or KeyRef(key).
	Spec any
	// Fields are the updatable fields (KindInfo.Updatable, by JSON name) an update sets from
	// Spec; an empty value removes an optional field, as null does in an API input.
	Fields []string
}

// Run runs op inside q as callerID and returns the object it created, updated or removed, with
// the errors of Create, Update and Remove; a Spec that is not of the kind's spec type is an
// error naming both types.
func (s *Service) Run(ctx context.Context, q store.Querier, callerID string, op Op) (Object, error) {
	if err := s.served(op.Kind); err != nil {
		return Object{}, err
	}
	info, ok := Info(op.Kind)
	if !ok {
		return Object{}, fmt.Errorf("compute has no kind %q", op.Kind)
	}
	switch op.Verb {
	case VerbCreate:
		return s.runCreate(ctx, q, info, callerID, op)
	case VerbUpdate:
		return s.runUpdate(ctx, q, info, callerID, op)
	case info.RemoveVerb:
		return s.Remove(ctx, q, op.Kind, op.Ref)
	}
	return Object{}, fmt.Errorf("compute cannot %s %s", op.Verb, cubefleet.Article(op.Kind))
}

func (s *Service) runCreate(ctx context.Context, q store.Querier, info KindInfo, callerID string, op Op) (Object, error) {
	if err := checkTenantID(op.Ref.TenantID); err != nil {
		return Object{}, err
	}
	if err := checkIdempotencyKey(op.IdempotencyKey); err != nil {
		return Object{}, err
	}
	switch {
	case info.Named && op.Name == "":
		return Object{}, cubefleet.Invalid("name", "name is required")
	case info.Named && !ValidName(op.Name):
		return Object{}, cubefleet.Invalid("name", "name must be %s", fieldrules.Name.Rule())
	case !info.Named && op.Name != "":
		return Object{}, cubefleet.Invalid("name", "%s has no name field", cubefleet.Article(info.Kind))
	}
	sp, err := specOf(info.Kind, op.Spec)
	if err != nil {
		return Object{}, err
	}
	return s.create(ctx, q, info, callerID, op.Ref.TenantID, op.IdempotencyKey, op.Name, sp)
}

func (s *Service) runUpdate(ctx context.Context, q store.Querier, info KindInfo, callerID string, op Op) (Object, error) {
	want, err := specOf(info.Kind, op.Spec)
	if err != nil {
		return Object{}, err
	}
	o, err := s.load(ctx, q, info.Kind, op.Ref)
	if err != nil {
		return Object{}, err
	}
	if o.Archived() {
		return Object{}, cubefleet.Errorf(cubefleet.CodeConflict, "%s is archived", describe(o))
	}
	sp := newSpec(info.Kind)
	if err := o.DecodeSpec(sp); err != nil {
		return Object{}, err
	}
	dst, src := reflect.ValueOf(sp).Elem(), reflect.ValueOf(want).Elem()
	for _, f := range op.Fields {
		if err := updatable(info, f); err != nil {
			return Object{}, err
		}
		i := slices.Index(specFields(info.Kind), f) // the spec's fields in order: i is f's
		if i < 0 {
			return Object{}, fmt.Errorf("compute: the %s spec has no field %s", info.Kind, f)
		}
		dst.Field(i).Set(src.Field(i))
	}
	return s.update(ctx, q, o, sp, callerID)
}

// specOf returns v, a value of kind's spec type, as that kind's spec.
func specOf(kind string, v any) (spec, error) {
	sp := newSpec(kind)
	t := reflect.TypeOf(sp).Elem()
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Type() != t {
		return nil, fmt.Errorf("compute: the spec of %s is a %s, not %T", cubefleet.Article(kind), t, v)
	}
	reflect.ValueOf(sp).Elem().Set(rv)
	return sp, nil
}
