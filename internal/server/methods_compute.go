package server

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"

	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/compute"
)

// objectOut is a compute object as a method returns it; it names the object in the audit row.
type objectOut struct{ compute.Object }

// AuditTarget implements api.Targeted.
func (o objectOut) AuditTarget() string { return o.ID }

// registerComputeMethods registers compute.<api>.<verb> for every kind in compute.Kinds:
// create, get, list, update (kinds with updatable fields) and delete or archive, each deciding
// compute:<api>:<verb> on tenant/<tenantId>. Kinds of a disabled module stay registered and
// answer UNSUPPORTED.
func registerComputeMethods(r *api.Registry, d *deps) {
	for _, info := range compute.Kinds {
		kind := info.Kind
		name := func(verb string) string { return "compute." + info.API + "." + verb }
		perm := func(verb string) string { return "compute:" + info.API + ":" + verb }
		r.Register(api.Method{
			Name: name("create"), Summary: "Create a " + kind + " (idempotencyKey makes a retry return the same object)", Write: true,
			Decide: api.OnTenant(perm("create")),
			Handle: func(ctx context.Context, c *api.Call, in json.RawMessage) (any, error) {
				o, err := d.compute.Create(ctx, c.Q, kind, c.Principal.ID, in)
				return objectOut{o}, err
			},
			Input: objectSchema{info: info, form: formCreate}, Output: objectSchema{info: info, form: formObject},
		})
		r.Register(api.Method{
			Name: name("get"), Summary: "Get a " + kind + " by id",
			Decide: api.OnTenant(perm("get")),
			Handle: api.Typed(func(ctx context.Context, c *api.Call, in compute.Ref) (any, error) {
				o, err := d.compute.Get(ctx, c.Q, kind, in)
				return objectOut{o}, err
			}),
			Input: compute.Ref{}, Output: objectSchema{info: info, form: formObject},
		})
		r.Register(api.Method{
			Name: name("list"), Summary: "List a tenant's " + info.API + " by id, a page at a time (limit, cursor)",
			Decide: api.OnTenant(perm("list")),
			Handle: api.Typed(func(ctx context.Context, c *api.Call, in compute.ListInput) (any, error) {
				return d.compute.List(ctx, c.Q, kind, in)
			}),
			Input: compute.ListInput{}, Output: objectSchema{info: info, form: formList},
		})
		if len(info.Updatable) > 0 {
			r.Register(api.Method{
				Name: name("update"), Summary: "Change a " + kind + "'s updatable fields (revision, when given, must be current)", Write: true,
				Decide: api.OnTenant(perm("update")),
				Handle: func(ctx context.Context, c *api.Call, in json.RawMessage) (any, error) {
					o, err := d.compute.Update(ctx, c.Q, kind, c.Principal.ID, in)
					return objectOut{o}, err
				},
				Input: objectSchema{info: info, form: formUpdate}, Output: objectSchema{info: info, form: formObject},
			})
		}
		verb := info.RemoveVerb
		summary := "Delete a " + kind + " (refused while other objects use it)"
		if verb == "archive" {
			summary = "Archive a " + kind + " (refused while other objects use it)"
		}
		r.Register(api.Method{
			Name: name(verb), Summary: summary, Write: true,
			Decide: api.OnTenant(perm(verb)),
			Handle: api.Typed(func(ctx context.Context, c *api.Call, in compute.Ref) (any, error) {
				o, err := d.compute.Remove(ctx, c.Q, kind, in)
				return objectOut{o}, err
			}),
			Input: compute.Ref{}, Output: objectSchema{info: info, form: formObject},
		})
	}
}

// specOf returns a zero value of kind's spec type.
func specOf(kind string) any {
	switch kind {
	case compute.KindSite:
		return compute.SiteSpec{}
	case compute.KindProviderAccount:
		return compute.ProviderAccountSpec{}
	case compute.KindPool:
		return compute.PoolSpec{}
	case compute.KindOwnerQuota:
		return compute.OwnerQuotaSpec{}
	case compute.KindOffer:
		return compute.OfferSpec{}
	case compute.KindFlavor:
		return compute.FlavorSpec{}
	case compute.KindSandboxTemplate:
		return compute.SandboxTemplateSpec{}
	}
	return nil
}

type objectForm int

const (
	formCreate objectForm = iota // create input: tenantId, idempotencyKey, name, spec fields
	formUpdate                   // update input: tenantId, id, revision, updatable fields
	formObject                   // an object: metadata and spec fields
	formList                     // {items: [object], nextCursor}
)

// objectSchema is the JSON Schema of a compute kind's input or output (compute objects marshal
// flat, so reflection on compute.Object cannot describe them).
type objectSchema struct {
	info compute.KindInfo
	form objectForm
}

// JSONSchema implements schemaProvider.
func (s objectSchema) JSONSchema() map[string]any {
	spec := schemaOf(reflect.TypeOf(specOf(s.info.Kind)), 0)
	specProps, _ := spec["properties"].(map[string]any)
	specRequired, _ := spec["required"].([]string)
	str := map[string]any{"type": "string"}
	props := map[string]any{}
	var required []string
	switch s.form {
	case formList:
		return map[string]any{
			"type":     "object",
			"required": []string{"items"},
			"properties": map[string]any{
				"items":      map[string]any{"type": "array", "items": objectSchema{info: s.info, form: formObject}.JSONSchema()},
				"nextCursor": map[string]any{"type": "string", "description": "pass as cursor for the next page; absent on the last page"},
			},
		}
	case formCreate:
		props["tenantId"] = str
		props["idempotencyKey"] = map[string]any{"type": "string", "maxLength": 255, "description": "the id derives from it and the caller, so a retried create returns the same object; reference fields accept key:<idempotencyKey>"}
		required = append(required, "tenantId")
		if s.info.Named {
			props["name"] = str
			required = append(required, "name")
		}
		for k, v := range specProps {
			props[k] = v
		}
	case formUpdate:
		props["tenantId"] = str
		props["id"] = str
		props["revision"] = map[string]any{"type": "integer", "minimum": 1, "description": "when given, the update fails with CONFLICT unless it is the current revision"}
		required = append(required, "tenantId", "id")
		for _, f := range s.info.Updatable {
			if v, ok := specProps[f]; ok {
				props[f] = v
			}
		}
	case formObject:
		for k, v := range specProps {
			props[k] = v
		}
		for _, f := range []string{"id", "tenantId", "createdBy"} {
			props[f] = str
		}
		props["name"] = map[string]any{"type": "string", "description": "own name, or the fleet name of a site or pool"}
		props["idempotencyKey"] = str
		for _, f := range []string{"revision", "createdAt", "updatedAt", "archivedAt"} {
			props[f] = map[string]any{"type": "integer"}
		}
		required = append(required, "id", "tenantId", "revision", "createdBy", "createdAt", "updatedAt")
		required = append(required, specRequired...)
	}
	slices.Sort(required)
	return map[string]any{"type": "object", "properties": props, "required": slices.Compact(required)}
}
