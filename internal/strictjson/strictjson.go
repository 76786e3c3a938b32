// Package strictjson decodes API inputs strictly: one JSON object, no unknown fields, no wrong
// types; every refusal is an INVALID_INPUT error whose details.path names the field.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/cubefleet/cubefleet"
)

// Decode decodes data, which must hold exactly one JSON value, into v.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return cubefleet.Invalid(typeErr.Field, "%s must be %s", fieldName(typeErr.Field), typeName(typeErr.Type))
		}
		var field string
		if n, _ := fmt.Sscanf(err.Error(), "json: unknown field %q", &field); n == 1 {
			return cubefleet.Invalid(field, "unknown field %s", field)
		}
		return cubefleet.Invalid("", "the input is not a valid JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return cubefleet.Invalid("", "the input must be one JSON object")
	}
	return nil
}

func fieldName(f string) string {
	if f == "" {
		return "the input"
	}
	return f
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "an integer"
}
