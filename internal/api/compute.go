package api

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/cubefleet/cubefleet/internal/compute"
)

// objectOut is a compute object as a method returns it; it names the object in the audit row.
type objectOut struct{ compute.Object }

// AuditTarget implements Targeted.
func (o objectOut) AuditTarget() string { return o.ID }

// registerComputeMethods registers compute.<api>.<verb> for every kind in compute.Kinds and
// every verb of its kind (compute.KindInfo.Verbs: create, get, list, update for kinds with
// updatable fields, and delete or archive), each deciding the kind's permission of the verb
// (compute.KindInfo.Permission: compute:<api>:<verb>) on tenant/<tenantId>. Kinds of a
// disabled module stay registered and answer UNSUPPORTED.
func registerComputeMethods(r *Registry, d *deps) {
	for _, info := range compute.Kinds {
		kind := info.Kind
		for _, verb := range info.Verbs() {
			m := Method{Name: info.Method(verb), Permission: info.Permission(verb), Scope: OnTenant, Write: info.Writes(verb),
				Output: objectSchema{info: info, form: formObject}}
			switch verb {
			case compute.VerbCreate:
				m.Summary = "Create a " + kind + " (idempotencyKey makes a retry return the same object)"
				m.Handle = func(ctx context.Context, c *Call, in json.RawMessage) (any, error) {
					o, err := d.compute.Create(ctx, c.Q, kind, c.Principal.ID, in)
					return objectOut{o}, err
				}
				m.Input, m.MaxBody = objectSchema{info: info, form: formCreate}, MaxDocumentBody
			case compute.VerbGet:
				m.Summary = "Get a " + kind + " by id"
				m.Handle = Typed(func(ctx context.Context, c *Call, in compute.Ref) (any, error) {
					o, err := d.compute.Get(ctx, c.Q, kind, in)
					return objectOut{o}, err
				})
				m.Input = compute.Ref{}
			case compute.VerbList:
				m.Summary = "List a tenant's " + info.API + " by id, a page at a time (limit, cursor)"
				m.Handle = Typed(func(ctx context.Context, c *Call, in compute.ListInput) (any, error) {
					return d.compute.List(ctx, c.Q, kind, in)
				})
				m.Input, m.Output = compute.ListInput{}, objectSchema{info: info, form: formList}
			case compute.VerbUpdate:
				m.Summary = "Change a " + kind + "'s updatable fields (revision, when given, must be current)"
				m.Handle = func(ctx context.Context, c *Call, in json.RawMessage) (any, error) {
					o, err := d.compute.Update(ctx, c.Q, kind, c.Principal.ID, in)
					return objectOut{o}, err
				}
				m.Input, m.MaxBody = objectSchema{info: info, form: formUpdate}, MaxDocumentBody
			case info.RemoveVerb:
				m.Summary = "Delete a " + kind + " (refused while other objects use it)"
				if verb == compute.VerbArchive {
					m.Summary = "Archive a " + kind + " (refused while other objects use it)"
				}
				m.Handle = Typed(func(ctx context.Context, c *Call, in compute.Ref) (any, error) {
					o, err := d.compute.Remove(ctx, c.Q, kind, in)
					return objectOut{o}, err
				})
				m.Input = compute.Ref{}
			}
			r.Register(m)
		}
	}
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

// JSONSchema returns the schema; reflect returns the JSON Schema of a value's type (the OpenAPI
// renderer's reflection), which describes the kind's spec fields.
func (s objectSchema) JSONSchema(reflect func(v any) map[string]any) map[string]any {
	spec := reflect(s.info.Spec())
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
				"items":      map[string]any{"type": "array", "items": objectSchema{info: s.info, form: formObject}.JSONSchema(reflect)},
				"nextCursor": map[string]any{"type": "string", "description": "pass as cursor for the next page; absent on the last page"},
			},
		}
	case formCreate:
		props["tenantId"] = str
		props["idempotencyKey"] = map[string]any{"type": "string", "maxLength": compute.MaxIdempotencyKey, "description": "the id derives from it and the caller, so a retried create returns the same object; reference fields accept key:<idempotencyKey>"}
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
