package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
)

// schemaProvider is implemented by Method.Input/Output values whose JSON shape reflection
// cannot see (compute objects, which marshal flat): they give their JSON Schema themselves,
// given reflect, which returns the JSON Schema of a value's type (schemaOfValue).
type schemaProvider interface {
	JSONSchema(reflect func(v any) map[string]any) map[string]any
}

// openAPIDocument renders the OpenAPI 3.1 document of every method in r: one POST path per
// method, request and response schemas reflected from Method.Input and Method.Output through
// their json tags, and the permission each decides as x-permission and x-scope.
func openAPIDocument(r *api.Registry) ([]byte, error) {
	paths := map[string]any{}
	for _, m := range r.Methods() {
		op := map[string]any{
			"operationId": m.Name,
			"summary":     m.Summary,
			"tags":        []string{strings.SplitN(m.Name, ".", 2)[0]},
			"requestBody": map[string]any{
				"required": true,
				"content":  map[string]any{"application/json": map[string]any{"schema": schemaOfValue(m.Input)}},
			},
			"responses": map[string]any{
				"200": map[string]any{
					"description": "the method's result",
					"content":     map[string]any{"application/json": map[string]any{"schema": schemaOfValue(m.Output)}},
				},
				"default": map[string]any{"$ref": "#/components/responses/Error"},
			},
			"x-write": m.Write,
		}
		if d, err := m.Decide(json.RawMessage(`{"tenantId":"{tenantId}"}`)); err == nil {
			op["x-permission"] = d.Permission
			op["x-scope"] = d.Scope // the scope form, e.g. tenant/{tenantId}
		}
		paths["/api/v1/"+m.Name] = map[string]any{"post": op}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "cubefleet control plane API",
			"version":     "1",
			"description": "Methods, not resources: POST /api/v1/<method> with a JSON object in and a JSON object out. Authenticate with Authorization: Bearer <api key>. Every method decides the permission in x-permission on the scope in x-scope before it touches data. Times are Unix milliseconds.",
		},
		"paths":    paths,
		"security": []any{map[string]any{"bearer": []string{}}},
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"responses": map[string]any{"Error": map[string]any{
				"description": "an error: " + errorStatuses(),
				"content":     map[string]any{"application/json": map[string]any{"schema": errorSchema()}},
			}},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

// errorStatuses lists the error codes with the status each is answered with, from the one
// table (cubefleet.HTTPStatus): "INVALID_INPUT 400, UNAUTHENTICATED 401, ...".
func errorStatuses() string {
	var out []string
	for _, c := range cubefleet.WireCodes() {
		out = append(out, fmt.Sprintf("%s %d", c, cubefleet.HTTPStatus(c)))
	}
	return strings.Join(out, ", ")
}

func errorSchema() map[string]any {
	return map[string]any{
		"type":     "object",
		"required": []string{"error"},
		"properties": map[string]any{"error": map[string]any{
			"type":     "object",
			"required": []string{"code", "message"},
			"properties": map[string]any{
				"code":    map[string]any{"type": "string"},
				"message": map[string]any{"type": "string"},
				"details": map[string]any{"type": "object", "description": "for INVALID_INPUT: path (the first problem) and errors ([{path, message}], every problem in order)"},
			},
		}},
	}
}

func schemaOfValue(v any) map[string]any {
	if v == nil {
		return map[string]any{"type": "object"}
	}
	if p, ok := v.(schemaProvider); ok {
		return p.JSONSchema(schemaOfValue)
	}
	return schemaOf(reflect.TypeOf(v), 0)
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	marshalerType  = reflect.TypeFor[json.Marshaler]()
	providerType   = reflect.TypeFor[schemaProvider]()
)

// schemaOf reflects t's JSON Schema as encoding/json would marshal it.
func schemaOf(t reflect.Type, depth int) map[string]any {
	if depth > 12 {
		return map[string]any{}
	}
	if t.Implements(providerType) {
		return reflect.Zero(t).Interface().(schemaProvider).JSONSchema(schemaOfValue)
	}
	if t == rawMessageType {
		return map[string]any{}
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return map[string]any{"description": "custom JSON form"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem(), depth+1)
	case reflect.Interface:
		return map[string]any{}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), depth+1)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), depth+1)}
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		addStructFields(t, depth, props, &required)
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}

// addStructFields adds t's JSON fields to props, flattening embedded structs the way
// encoding/json does. A field without omitempty (and not a pointer) is required.
func addStructFields(t reflect.Type, depth int, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !ft.Implements(marshalerType) {
				addStructFields(ft, depth, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = schemaOf(ft, depth+1)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") && ft.Kind() != reflect.Pointer {
			*required = append(*required, name)
		}
	}
}
