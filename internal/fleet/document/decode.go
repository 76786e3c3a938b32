package document

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cubefleet/cubefleet"
)

// Decode reads a fleet document strictly (specs/fleet-config.md, "The document"). It returns the
// document, or nil and one *cubefleet.Error with code INVALID_INPUT that lists every problem at
// once, in document order, each with the JSON path of the place it concerns
// (`pools[0].offers[1].quota.gpu`; "" for the document as a whole): Details["path"] is the first
// path and Details["errors"] the []cubefleet.FieldError. It reports:
//
//   - input that is not one JSON object: invalid UTF-8, malformed JSON, nesting deeper than 32,
//     data after the document (each alone, with its line, column and byte offset);
//   - repeated keys in one object, unknown fields (the message lists the allowed ones), values
//     of the wrong JSON type, missing required fields, and empty optional strings;
//   - every rule of Validate.
//
// The document may carry a top-level "$schema" string (the address of Schema, SchemaID, for
// editors): Decode checks that it is a string and otherwise ignores it.
//
// At most 200 problems are listed, followed by one "...and N more" entry. Messages never repeat
// the value of a config or env entry, so a literal secret is not echoed. Empty lists and maps
// decode as nil, so Decode, json.Marshal and Decode again give the same Document. Decode never
// panics; the caller bounds the size of data.
func Decode(data []byte) (*Document, error) {
	if pe := precheck(data); pe != nil {
		return nil, cubefleet.InvalidAll([]cubefleet.FieldError{{Path: "", Message: pe.Error()}})
	}
	r := newReader(data)
	m := mapper{r: r, bad: make(map[string]struct{})}
	v := r.root()
	doc := m.document(v)
	if pe := r.finish(v); pe != nil {
		return nil, cubefleet.InvalidAll([]cubefleet.FieldError{{Path: "", Message: pe.Error()}})
	}
	c := doc.check()
	var root *node // the tree, built only to place a problem Validate found
	for i, fe := range c.errs {
		if dep, ok := c.deps[i]; m.suppressed(fe.Path) || ok && m.suppressed(dep) {
			continue
		}
		if root == nil {
			var err error
			if root, err = parse(data); err != nil { // not reached: the mapper read data already
				return nil, cubefleet.InvalidAll([]cubefleet.FieldError{{Path: "", Message: err.Error()}})
			}
		}
		m.errs = append(m.errs, located{off: offsetOf(root, fe.Path), fe: fe})
	}
	if len(m.errs) == 0 {
		return doc, nil
	}
	sort.SliceStable(m.errs, func(i, j int) bool { return m.errs[i].off < m.errs[j].off })
	n := min(len(m.errs), maxErrors)
	list := make([]cubefleet.FieldError, n, n+1)
	for i := range list {
		list[i] = m.errs[i].fe
	}
	if more := len(m.errs) - n; more > 0 {
		list = append(list, cubefleet.FieldError{Path: "", Message: fmt.Sprintf(
			"…and %d more problems; fix these and decode again to see the rest", more)})
	}
	return nil, cubefleet.InvalidAll(list)
}

// located is a problem with the offset that sorts it into document order.
type located struct {
	off int64
	fe  cubefleet.FieldError
}

// mapper turns the document into a Document as its reader reads it, reporting what the types
// cannot hold. bad holds the paths whose value it could not map (wrong type, missing, unknown):
// Validate's complaints at or below them are about zero values the document never had, and are
// dropped.
type mapper struct {
	r    *reader
	errs []located
	bad  map[string]struct{}
}

func (m *mapper) fail(off int64, path, msg string) {
	m.errs = append(m.errs, located{off: off, fe: cubefleet.FieldError{Path: path, Message: msg}})
}

func (m *mapper) failBad(off int64, path, msg string) {
	m.fail(off, path, msg)
	m.bad[path] = struct{}{}
}

// suppressed reports whether path is, or lies below, a path the mapper could not map.
func (m *mapper) suppressed(path string) bool {
	if len(m.bad) == 0 {
		return false
	}
	if _, ok := m.bad[""]; ok { // the document is not an object: nothing else to say
		return true
	}
	for i := 0; i < len(path); i++ {
		if path[i] == '.' || path[i] == '[' {
			if _, ok := m.bad[path[:i]]; ok {
				return true
			}
		}
	}
	_, ok := m.bad[path]
	return ok
}

// objSpec lists the fields of one object type, in the order of its Go struct.
type objSpec struct {
	what    string // "a site", for messages
	fields  []fieldSpec
	allowed string // the field names, for the unknown-field message
}

// fieldSpec is one field; fix, when set, makes the field required and says what to put there.
type fieldSpec struct {
	name string
	fix  string
}

func spec(what string, fields ...fieldSpec) *objSpec {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return &objSpec{what: what, fields: fields, allowed: strings.Join(names, ", ")}
}

// object walks the fields of the object v at at, calling each for every known field once (the
// first occurrence), and reports unknown, repeated and missing fields. label names v in a
// wrong-type message. It returns false when v is not an object.
func (m *mapper) object(v value, at *path, label string, s *objSpec, each func(key string, v value)) bool {
	if v.kind != kindObject {
		m.failBad(v.off, at.String(), label+" must be an object, not "+v.kind.article())
		return false
	}
	var seen uint64
	end := m.r.members(v, func(key string, koff int64, val value) {
		i := s.find(key)
		switch {
		case i < 0:
			m.failBad(koff, at.member(key), "unknown field; "+s.what+" has the fields "+s.allowed)
		case seen&(1<<i) != 0:
			m.fail(koff, at.member(key), key+" appears twice in the same object; keep one")
		default:
			seen |= 1 << i
			each(key, val)
		}
	})
	for i, f := range s.fields {
		if f.fix != "" && seen&(1<<i) == 0 {
			m.failBad(end-1, at.member(f.name), f.name+" is required; "+f.fix)
		}
	}
	return true
}

func (s *objSpec) find(key string) int {
	for i, f := range s.fields {
		if f.name == key {
			return i
		}
	}
	return -1
}

// mapList maps the array v at at, a list field, with item, and returns the items; nil for an
// empty list or one that is not an array. An item's path comes by value: a pointer passed through
// the func value item would move to the heap, for every item.
func mapList[T any](m *mapper, v value, at *path, item func(el value, at path) T) []T {
	if v.kind != kindArray {
		p := at.String()
		m.failBad(v.off, p, p[strings.LastIndexAny(p, ".]")+1:]+" must be an array, not "+v.kind.article())
		return nil
	}
	var items []T
	m.r.elements(v, func(i int, el value) {
		if items == nil {
			items = make([]T, 0, 4) // most lists of an item (offers) are short
		}
		items = append(items, item(el, path{up: at.up, key: at.key, i: i}))
	})
	return items
}

// str returns the string at v, the value of key in the object at at.
func (m *mapper) str(v value, at *path, key string) string {
	if v.kind != kindString {
		m.failBad(v.off, at.member(key), key+" must be a string, not "+v.kind.article())
		return ""
	}
	return v.text
}

// optStr is str for an optional field, which may be left out but not empty: an empty string
// would vanish on re-encoding (omitempty).
func (m *mapper) optStr(v value, at *path, key, rule string) string {
	s := m.str(v, at, key)
	if v.kind == kindString && s == "" {
		m.failBad(v.off, at.member(key), key+" must not be empty; leave it out or set it to "+rule)
	}
	return s
}

// integer returns the whole number at v, clamped to ±bigInt (see intValue).
func (m *mapper) integer(v value, at *path, key string) int64 {
	if v.kind != kindNumber {
		m.failBad(v.off, at.member(key), key+" must be a whole number, not "+v.kind.article())
		return 0
	}
	n, ok := intValue(v.text)
	if !ok {
		m.failBad(v.off, at.member(key), key+" must be a whole number, not a fraction")
	}
	return n
}

// strMap returns the object under key at at as a map of strings; nil when it is empty.
func (m *mapper) strMap(v value, at *path, key string) map[string]string {
	if !m.isMap(v, at, key) {
		return nil
	}
	var out map[string]string
	m.r.members(v, func(k string, koff int64, val value) {
		if out == nil {
			out = make(map[string]string)
		}
		if _, dup := out[k]; dup {
			m.fail(koff, join(at.member(key), k), "the key appears twice in "+key+"; keep one")
			return
		}
		if val.kind != kindString {
			m.failBad(val.off, join(at.member(key), k), key+" values must be strings, not "+val.kind.article())
			out[k] = "" // marks the key as seen
			return
		}
		out[k] = val.text
	})
	return out
}

// strList returns the array under key at at as a list of strings; nil when it is empty.
func (m *mapper) strList(v value, at *path, key string) []string {
	if v.kind != kindArray {
		m.failBad(v.off, at.member(key), key+" must be an array, not "+v.kind.article())
		return nil
	}
	var out []string
	m.r.elements(v, func(i int, el value) {
		if el.kind != kindString {
			m.failBad(el.off, fmt.Sprintf("%s[%d]", at.member(key), i), key+" items must be strings, not "+el.kind.article())
			out = append(out, "")
			return
		}
		out = append(out, el.text)
	})
	return out
}

// quotaMap returns the object under key at at as a map of resource name to whole number; nil
// when it is empty.
func (m *mapper) quotaMap(v value, at *path, key string) map[string]int64 {
	if !m.isMap(v, at, key) {
		return nil
	}
	var out map[string]int64
	m.r.members(v, func(k string, koff int64, val value) {
		if out == nil {
			out = make(map[string]int64)
		}
		if _, dup := out[k]; dup {
			m.fail(koff, join(at.member(key), k), "the resource appears twice in "+key+"; keep one")
			return
		}
		n, ok := int64(0), false
		if val.kind == kindNumber {
			n, ok = intValue(val.text)
		}
		if !ok {
			m.failBad(val.off, join(at.member(key), k), key+" values must be "+quotaNoun)
		}
		out[k] = n
	})
	return out
}

func (m *mapper) isMap(v value, at *path, key string) bool {
	if v.kind != kindObject {
		m.failBad(v.off, at.member(key), key+" must be an object, not "+v.kind.article())
		return false
	}
	return true
}
