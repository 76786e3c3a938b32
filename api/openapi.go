package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/cubefleet/cubefleet"
)

// OpenAPI returns the OpenAPI 3.1 document of every method (what the control plane serves at
// /api/v1/openapi.json): one POST path per method, the request and response schemas reflected
// from the contract's Input and Output types through their json tags, and the permission each
// decides as x-permission on the scope in x-scope.
func OpenAPI() ([]byte, error) {
	paths := map[string]any{}
	for _, m := range Methods() {
		paths["/api/v1/"+m.Name] = map[string]any{"post": Operation(m)}
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
				"content":     map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeFor[ErrorBody](), 0)}},
			}},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

// Operation returns m's OpenAPI operation object: operationId, summary, tag (the name's first
// part), request and response schemas, x-write, x-permission, x-scope and x-max-body.
func Operation(m Method) map[string]any {
	return map[string]any{
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
		"x-write":      m.Write,
		"x-permission": m.Permission,
		"x-scope":      m.Scope.String(),
		"x-max-body":   m.MaxBody,
	}
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

func schemaOfValue(v any) map[string]any {
	if v == nil {
		return map[string]any{"type": "object"}
	}
	return schemaOf(reflect.TypeOf(v), 0)
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	durationType   = reflect.TypeFor[Duration]()
)

// schemaOf reflects t's JSON Schema as encoding/json would marshal it.
func schemaOf(t reflect.Type, depth int) map[string]any {
	if depth > 12 {
		return map[string]any{}
	}
	switch t {
	case rawMessageType:
		return map[string]any{}
	case durationType:
		return map[string]any{"type": "string", "description": "a duration such as 300s or 1m30s"}
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
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addStructFields(ft, depth, props, required)
			continue
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
