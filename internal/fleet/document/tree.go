package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// kind is the JSON type of a node.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// article names a kind in a message: "must be a string, not an array".
func (k kind) article() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

// node is one JSON value of the order-preserving tree Decode walks. Offsets are byte offsets in
// the input: off lies just before the value (after the previous token), end just after a
// container's closing delimiter. Errors are sorted by these offsets into document order.
type node struct {
	kind    kind
	off     int64
	end     int64
	text    string // a string's value, or a number's literal
	elems   []*node
	members []member
	index   map[string]int // first member per key, built by lookup for large objects
}

// member is one key of an object, in document order; repeated keys are all kept.
type member struct {
	key string
	off int64 // just before the key
	val *node
}

// parseError is a document Decode cannot walk at all: one problem, at the root.
type parseError struct{ msg string }

func (e *parseError) Error() string { return e.msg }

// parse reads data, a single JSON value, into a tree. It rejects invalid UTF-8, malformed JSON,
// nesting deeper than maxDepth and trailing data, each with the byte offset of the problem.
func parse(data []byte) (*node, error) {
	if i := invalidUTF8(data); i >= 0 {
		return nil, &parseError{fmt.Sprintf("the document is not valid UTF-8 at byte offset %d; save it as UTF-8", i)}
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, &parseError{"the document starts with a byte order mark; save it as UTF-8 without one"}
	}
	if skipBlank(data, 0) == int64(len(data)) {
		return nil, &parseError{"the document is empty; it must be a JSON object such as {\"version\": 1}"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := parser{dec: dec, size: int64(len(data))}
	root, err := p.value(1)
	if err != nil {
		return nil, p.describe(err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &parseError{fmt.Sprintf("unexpected data after the document at byte offset %d; a file holds exactly one JSON object", skipBlank(data, end))}
	}
	return root, nil
}

type parser struct {
	dec  *json.Decoder
	size int64
	slab []node // nodes are carved from here, a chunk at a time
}

// node returns a new node, allocating nodes in chunks rather than one by one.
func (p *parser) node(k kind, off int64) *node {
	if len(p.slab) == cap(p.slab) {
		p.slab = make([]node, 0, 256)
	}
	p.slab = append(p.slab, node{kind: k, off: off})
	return &p.slab[len(p.slab)-1]
}

// value reads the next value; depth is the nesting it would have if it is a container.
func (p *parser) value(depth int) (*node, error) {
	off := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth > maxDepth {
			return nil, &parseError{fmt.Sprintf("the document nests arrays and objects deeper than %d levels at byte offset %d", maxDepth, off)}
		}
		if t == '{' {
			return p.object(off, depth)
		}
		if t == '[' {
			return p.array(off, depth)
		}
		return nil, &parseError{fmt.Sprintf("malformed JSON at byte offset %d: unexpected %q", off, rune(t))}
	case string:
		n := p.node(kindString, off)
		n.text = t
		return n, nil
	case json.Number:
		n := p.node(kindNumber, off)
		n.text = string(t)
		return n, nil
	case bool:
		n := p.node(kindBool, off)
		if t {
			n.text = "true"
		}
		return n, nil
	case nil:
		return p.node(kindNull, off), nil
	}
	return nil, &parseError{fmt.Sprintf("malformed JSON at byte offset %d", off)}
}

func (p *parser) object(off int64, depth int) (*node, error) {
	n := p.node(kindObject, off)
	for p.dec.More() {
		koff := p.dec.InputOffset()
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, &parseError{fmt.Sprintf("malformed JSON at byte offset %d: an object key must be a string", koff)}
		}
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.members = append(n.members, member{key: key, off: koff, val: val})
	}
	if _, err := p.dec.Token(); err != nil { // the closing '}'
		return nil, err
	}
	n.end = p.dec.InputOffset()
	return n, nil
}

func (p *parser) array(off int64, depth int) (*node, error) {
	n := p.node(kindArray, off)
	for p.dec.More() {
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, val)
	}
	if _, err := p.dec.Token(); err != nil { // the closing ']'
		return nil, err
	}
	n.end = p.dec.InputOffset()
	return n, nil
}

// describe turns a decoder error into a parseError with the byte offset of the problem.
func (p *parser) describe(err error) error {
	var pe *parseError
	if errors.As(err, &pe) {
		return pe
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &parseError{fmt.Sprintf("malformed JSON at byte offset %d: %s", se.Offset, se.Error())}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &parseError{fmt.Sprintf("malformed JSON: the document ends early at byte offset %d; close every string, array and object", p.size)}
	}
	return &parseError{fmt.Sprintf("malformed JSON near byte offset %d", p.dec.InputOffset())}
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

// lookup returns the value of the first member named key, or nil. Large objects get an index on
// first use, so reporting a problem at each key of a huge map stays linear.
func (n *node) lookup(key string) *node {
	if len(n.members) <= 16 {
		for i := range n.members {
			if n.members[i].key == key {
				return n.members[i].val
			}
		}
		return nil
	}
	if n.index == nil {
		n.index = make(map[string]int, len(n.members))
		for i := len(n.members) - 1; i >= 0; i-- {
			n.index[n.members[i].key] = i
		}
	}
	if i, ok := n.index[key]; ok {
		return n.members[i].val
	}
	return nil
}
