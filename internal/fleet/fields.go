package fleet

import (
	"reflect"
	"strings"
	"sync"
)

// A spec's JSON fields, read by reflection instead of a JSON round trip: planning compares and
// copies thousands of them.

// fieldIndex maps a spec type's JSON field names to struct field indexes.
type fieldIndex struct {
	names     []string
	index     map[string]int
	omitEmpty map[string]bool
}

var fieldIndexes sync.Map // reflect.Type -> *fieldIndex; types are fixed, so the cache is bounded

func indexOf(t reflect.Type) *fieldIndex {
	if fi, ok := fieldIndexes.Load(t); ok {
		return fi.(*fieldIndex)
	}
	fi := &fieldIndex{index: map[string]int{}, omitEmpty: map[string]bool{}}
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fi.names = append(fi.names, name)
		fi.index[name] = i
		fi.omitEmpty[name] = strings.Contains(opts, "omitempty")
	}
	fieldIndexes.Store(t, fi)
	return fi
}

// field returns the value of spec's JSON field name (spec is a struct value).
func field(spec any, name string) reflect.Value {
	v := reflect.ValueOf(spec)
	return v.Field(indexOf(v.Type()).index[name])
}

// empty reports whether v is a zero value, a nil pointer, or an empty map, slice or string.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	}
	return v.IsZero()
}

// diff returns the names of the fields, in the order given, whose values differ between the
// desired and current specs (two structs of one type); empty values are all equal. Strings and
// numbers compare directly, the rest with reflect.DeepEqual.
func diff(names []string, desired, current any) []string {
	dv, cv := reflect.ValueOf(desired), reflect.ValueOf(current)
	fi := indexOf(dv.Type())
	var out []string
	for _, name := range names {
		i := fi.index[name]
		d, c := dv.Field(i), cv.Field(i)
		if empty(d) && empty(c) {
			continue
		}
		if !equal(d, c) {
			out = append(out, name)
		}
	}
	return out
}

// equal reports whether two values of one field are reflect.DeepEqual.
func equal(d, c reflect.Value) bool {
	switch d.Kind() {
	case reflect.String:
		return d.String() == c.String()
	case reflect.Int, reflect.Int64:
		return d.Int() == c.Int()
	}
	return reflect.DeepEqual(d.Interface(), c.Interface())
}

// diffs returns the current and desired values of the named fields (those of the spec type;
// others are left out).
func diffs(names []string, desired, current any) []FieldDiff {
	fi := indexOf(reflect.TypeOf(desired))
	var out []FieldDiff
	for _, name := range names {
		if _, ok := fi.index[name]; ok {
			out = append(out, FieldDiff{Field: name, From: value(current, name), To: value(desired, name)})
		}
	}
	return out
}

// value returns spec's field name for a call's input: nil (JSON null) when it is empty.
func value(spec any, name string) any {
	v := field(spec, name)
	if empty(v) {
		return nil
	}
	return v.Interface()
}

// copyFields copies spec's fields into in, leaving out empty omitempty fields.
func copyFields(in map[string]any, spec any) {
	fi := indexOf(reflect.TypeOf(spec))
	for _, name := range fi.names {
		v := field(spec, name)
		if fi.omitEmpty[name] && empty(v) {
			continue
		}
		in[name] = v.Interface()
	}
}
