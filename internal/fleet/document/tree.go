package document

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
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
//
// The tree is read with jsontext, which hands out tokens and values without allocating. When it
// finds data is not one JSON value, syntaxError (syntax.go) reads data again with encoding/json
// to describe the first problem: Decode's messages name the problem as encoding/json does.
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
	// Repeated keys are kept (the mapper reports them with their paths), and escaped lone
	// surrogates (\ud800) read as U+FFFD, as encoding/json reads them. Raw invalid UTF-8 never
	// gets this far.
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	p := parser{dec: dec, data: data, text: string(data)}
	root, err := p.value(0, 1)
	if err != nil {
		if pe := syntaxError(data); pe != nil {
			return nil, pe
		}
		// Not reached: encoding/json rejects everything jsontext does here (FuzzParseMatchesReference).
		return nil, &parseError{fmt.Sprintf("malformed JSON near byte offset %d", dec.InputOffset())}
	}
	if end := dec.InputOffset(); skipBlank(data, end) < int64(len(data)) {
		return nil, trailingData(data, end)
	}
	return root, nil
}

// trailingData is the problem of data that goes on after its first value, which ends at end.
func trailingData(data []byte, end int64) *parseError {
	return &parseError{fmt.Sprintf("unexpected data after the document at byte offset %d; a file holds exactly one JSON object", skipBlank(data, end))}
}

// errTooDeep stops parse at nesting deeper than maxDepth; syntaxError describes it.
var errTooDeep = errors.New("nesting too deep")

// parser builds the tree. Nodes, members and elements are carved from slabs a chunk at a time;
// an object's members and an array's elements are gathered on a stack shared by every level and
// copied out, at their final length, when the container closes.
type parser struct {
	dec  *jsontext.Decoder
	data []byte
	text string // data, once: strings and numbers without escapes are substrings of it

	nodes   []node
	members []member
	elems   []*node

	memberStack []member
	elemStack   []*node
}

// node returns a new node.
func (p *parser) node(k kind, off int64) *node {
	if len(p.nodes) == cap(p.nodes) {
		p.nodes = make([]node, 0, 512)
	}
	p.nodes = p.nodes[:len(p.nodes)+1]
	n := &p.nodes[len(p.nodes)-1]
	n.kind, n.off = k, off // field by field: the new slot is zero, and storing zero pointers is no work
	return n
}

// value reads the next value, whose node offset is off (see node); depth is the nesting it would
// have if it is a container.
func (p *parser) value(off int64, depth int) (*node, error) {
	switch k := p.dec.PeekKind(); k {
	case '{', '[':
		if depth > maxDepth {
			return nil, errTooDeep
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		if k == '{' {
			return p.object(off, depth)
		}
		return p.array(off, depth)
	case '"', '0', 't', 'f', 'n':
		v, err := p.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		switch k {
		case '"':
			n := p.node(kindString, off)
			n.text = p.str(v)
			return n, nil
		case '0':
			n := p.node(kindNumber, off)
			end := int(p.dec.InputOffset())
			n.text = p.text[end-len(v) : end]
			return n, nil
		case 't':
			n := p.node(kindBool, off)
			n.text = "true"
			return n, nil
		case 'f':
			return p.node(kindBool, off), nil
		}
		return p.node(kindNull, off), nil
	}
	_, err := p.dec.ReadToken() // the error PeekKind saw
	if err == nil {
		err = errors.New("unexpected token") // not reached: PeekKind reports every other kind
	}
	return nil, err
}

// object reads the members of the object that opened at off, up to its closing brace. A key's
// offset is where its member starts (its comma for all but the first) and a value's is just after
// its key, as encoding/json's Decoder.InputOffset gave them before this parser used jsontext; the
// offsets only sort problems, so what matters is that they increase through the document.
func (p *parser) object(off int64, depth int) (*node, error) {
	base := len(p.memberStack)
	for {
		koff := skipBlank(p.data, p.dec.InputOffset())
		if p.dec.PeekKind() == '}' {
			break
		}
		k, err := p.dec.ReadValue() // jsontext accepts only a string here
		if err != nil {
			return nil, err
		}
		key := p.str(k)
		val, err := p.value(p.dec.InputOffset(), depth+1)
		if err != nil {
			return nil, err
		}
		p.memberStack = append(p.memberStack, member{key: key, off: koff, val: val})
	}
	if _, err := p.dec.ReadToken(); err != nil { // the closing '}'
		return nil, err
	}
	n := p.node(kindObject, off)
	n.end = p.dec.InputOffset()
	if m := len(p.memberStack) - base; m > 0 {
		if cap(p.members)-len(p.members) < m {
			p.members = make([]member, 0, max(m, 1024))
		}
		p.members = append(p.members, p.memberStack[base:]...)
		n.members = p.members[len(p.members)-m : len(p.members) : len(p.members)]
		p.memberStack = p.memberStack[:base]
	}
	return n, nil
}

// array reads the elements of the array that opened at off, up to its closing bracket. An
// element's offset is where it starts, or its comma for all but the first (see object).
func (p *parser) array(off int64, depth int) (*node, error) {
	base := len(p.elemStack)
	for {
		eoff := skipBlank(p.data, p.dec.InputOffset())
		if p.dec.PeekKind() == ']' {
			break
		}
		val, err := p.value(eoff, depth+1)
		if err != nil {
			return nil, err
		}
		p.elemStack = append(p.elemStack, val)
	}
	if _, err := p.dec.ReadToken(); err != nil { // the closing ']'
		return nil, err
	}
	n := p.node(kindArray, off)
	n.end = p.dec.InputOffset()
	if m := len(p.elemStack) - base; m > 0 {
		if cap(p.elems)-len(p.elems) < m {
			p.elems = make([]*node, 0, max(m, 1024))
		}
		p.elems = append(p.elems, p.elemStack[base:]...)
		n.elems = p.elems[len(p.elems)-m : len(p.elems) : len(p.elems)]
		p.elemStack = p.elemStack[:base]
	}
	return n, nil
}

// str returns the value of the JSON string v, which the decoder has just read and checked. A
// string without escapes is a substring of p.text, so reading it does not allocate.
func (p *parser) str(v jsontext.Value) string {
	if bytes.IndexByte(v, '\\') < 0 {
		end := int(p.dec.InputOffset()) - 1 // v ends just before InputOffset, with its quote
		return p.text[end-(len(v)-2) : end]
	}
	b, _ := jsontext.AppendUnquote(nil, v) // only an escaped lone surrogate errs; it reads as U+FFFD
	return string(b)
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
