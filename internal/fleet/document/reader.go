package document

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The reader walks a document's JSON values in document order, for the mapper (which builds the
// Document as it goes) and for the tree (tree.go, built only to place Validate's problems). It
// reads with jsontext, which hands out tokens and values without allocating; a string without
// escapes is a substring of one copy of the input.
//
// Offsets are byte offsets in the input, as encoding/json's Decoder.InputOffset gave them when
// the decoder read through it: a value's offset is just after its key, or where an array element
// starts (its comma for all but the first), or 0 for the document; a key's is where its member
// starts (its comma for all but the first); an object's end is just after its closing brace.
// Problems are sorted by these offsets, so what matters is that they grow through the document.
//
// The first problem with the input itself (malformed JSON, nesting deeper than maxDepth) stops
// the reader: every later value reads as null, and finish reports the problem, described by
// syntaxError in the words Decode has always used.

// value is the next value of the input as its reader sees it: a scalar has been read, an object
// or an array has not. A callback of members or elements may walk a container with members or
// elements; what it leaves is skipped.
type value struct {
	kind  kind
	off   int64
	text  string // a string's value, a number's literal, "true" for true
	depth int    // the nesting of a container, the document being 1
}

// reader reads one document. Create it with newReader, read the document with root, then call
// finish.
type reader struct {
	dec  *jsontext.Decoder
	data []byte
	text string // data, once: strings and numbers without escapes are substrings of it
	err  error  // the first problem with the input
}

// precheck reports the problems Decode finds before reading any JSON: invalid UTF-8, a byte order
// mark, no value at all.
func precheck(data []byte) *parseError {
	if i := invalidUTF8(data); i >= 0 {
		return &parseError{fmt.Sprintf("the document is not valid UTF-8 at %s; save it as UTF-8", position(data, int64(i)))}
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return &parseError{"the document starts with a byte order mark; save it as UTF-8 without one"}
	}
	if skipBlank(data, 0) == int64(len(data)) {
		return &parseError{"the document is empty; it must be a JSON object such as {\"version\": 1}"}
	}
	return nil
}

// newReader returns a reader of data, which passed precheck.
func newReader(data []byte) *reader {
	// Repeated keys are kept (the mapper reports them, with their paths), and an escaped lone
	// surrogate (\ud800) reads as U+FFFD, as encoding/json reads it. Raw invalid UTF-8 never
	// gets here.
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	return &reader{dec: dec, data: data, text: string(data)}
}

// errTooDeep stops the reader at nesting deeper than maxDepth; syntaxError describes it.
var errTooDeep = errors.New("nesting too deep")

// fail records the first problem with the input.
func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// root returns the document's value.
func (r *reader) root() value { return r.next(0, 1) }

// finish reads what the callbacks left of the document v returned by root, and returns the first
// problem with the input, if any: malformed JSON, nesting too deep, or data after the document.
func (r *reader) finish(v value) *parseError {
	r.done(v, 0) // the reader starts at offset 0
	if r.err != nil {
		if pe := syntaxError(r.data); pe != nil {
			return pe
		}
		// Not reached: encoding/json rejects all jsontext does here (FuzzDecodeMatchesReference).
		return &parseError{fmt.Sprintf("malformed JSON near %s", position(r.data, r.dec.InputOffset()))}
	}
	if end := r.dec.InputOffset(); skipBlank(r.data, end) < int64(len(r.data)) {
		return trailingData(r.data, end)
	}
	return nil
}

// trailingData is the problem of data that goes on after its first value, which ends at end.
func trailingData(data []byte, end int64) *parseError {
	return &parseError{fmt.Sprintf("unexpected data after the document at %s; a file holds exactly one JSON object", position(data, skipBlank(data, end)))}
}

// next returns the next value, whose offset is off and whose nesting as a container is depth.
func (r *reader) next(off int64, depth int) value {
	v := value{off: off, depth: depth}
	if r.err != nil {
		return v
	}
	switch k := r.dec.PeekKind(); k {
	case '{', '[':
		v.kind = kindObject
		if k == '[' {
			v.kind = kindArray
		}
		if depth > maxDepth {
			r.fail(errTooDeep)
		}
	case '"', '0', 't', 'f', 'n':
		raw, err := r.dec.ReadValue()
		if err != nil {
			r.fail(err)
			return v
		}
		switch k {
		case '"':
			v.kind, v.text = kindString, r.str(raw)
		case '0':
			end := int(r.dec.InputOffset())
			v.kind, v.text = kindNumber, r.text[end-len(raw):end]
		case 't':
			v.kind, v.text = kindBool, "true"
		case 'f':
			v.kind = kindBool
		}
	default:
		_, err := r.dec.ReadToken() // the problem PeekKind saw
		if err == nil {
			err = errors.New("unexpected token") // not reached: PeekKind names every other kind
		}
		r.fail(err)
	}
	return v
}

// str returns the value of the JSON string raw, which the decoder has just read and checked.
func (r *reader) str(raw jsontext.Value) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		end := int(r.dec.InputOffset()) - 1 // raw ends at InputOffset, with its closing quote
		return r.text[end-(len(raw)-2) : end]
	}
	b, _ := jsontext.AppendUnquote(nil, raw) // only an escaped lone surrogate errs; it reads as U+FFFD
	return string(b)
}

// done skips v, a value just handed to a callback, if the callback did not walk it; pos is the
// input offset before the callback.
func (r *reader) done(v value, pos int64) {
	if r.err == nil && v.kind >= kindArray && r.dec.InputOffset() == pos {
		if v.kind == kindObject {
			r.members(v, func(string, int64, value) {})
		} else {
			r.elements(v, func(int, value) {})
		}
	}
}

// members walks the object v, calling each for every member in document order, repeated keys
// included, with the key, the key's offset and the value. It returns the offset just after the
// closing brace.
func (r *reader) members(v value, each func(key string, koff int64, val value)) (end int64) {
	if r.err != nil {
		return 0
	}
	if _, err := r.dec.ReadToken(); err != nil { // the opening '{'
		r.fail(err)
		return 0
	}
	for r.err == nil {
		koff := skipBlank(r.data, r.dec.InputOffset())
		if r.dec.PeekKind() == '}' {
			break
		}
		raw, err := r.dec.ReadValue() // jsontext accepts only a string here
		if err != nil {
			r.fail(err)
			return 0
		}
		key := r.str(raw)
		pos := r.dec.InputOffset()
		val := r.next(pos, v.depth+1)
		each(key, koff, val)
		r.done(val, pos)
	}
	if r.err != nil {
		return 0
	}
	if _, err := r.dec.ReadToken(); err != nil { // the closing '}'
		r.fail(err)
		return 0
	}
	return r.dec.InputOffset()
}

// elements walks the array v, calling each for every element in order with its index and value.
// It returns the offset just after the closing bracket.
func (r *reader) elements(v value, each func(i int, el value)) (end int64) {
	if r.err != nil {
		return 0
	}
	if _, err := r.dec.ReadToken(); err != nil { // the opening '['
		r.fail(err)
		return 0
	}
	for i := 0; r.err == nil; i++ {
		pos := r.dec.InputOffset()
		if r.dec.PeekKind() == ']' {
			break
		}
		el := r.next(skipBlank(r.data, pos), v.depth+1)
		each(i, el)
		r.done(el, pos)
	}
	if r.err != nil {
		return 0
	}
	if _, err := r.dec.ReadToken(); err != nil { // the closing ']'
		r.fail(err)
		return 0
	}
	return r.dec.InputOffset()
}

// invalidUTF8 returns the offset of the first byte that is not UTF-8, or -1.
func invalidUTF8(data []byte) int {
	if utf8.Valid(data) {
		return -1
	}
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// skipBlank returns the offset of the first non-whitespace byte at or after off.
func skipBlank(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\n', '\r':
			off++
		default:
			return off
		}
	}
	return off
}
