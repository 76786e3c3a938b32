package document

// kind is the JSON type of a value.
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

// node is one JSON value of the order-preserving tree that places a problem Validate finds in the
// document (offsetOf): Decode builds it only then. Offsets are the reader's (reader.go): off lies
// just before the value (after the previous token), end just after a container's closing
// delimiter. Errors are sorted by these offsets into document order.
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
// nesting deeper than maxDepth and trailing data, each with the position of the problem.
// Decode maps documents without it; it builds the tree only to place the problems Validate finds
// (offsetOf).
func parse(data []byte) (*node, error) {
	if pe := precheck(data); pe != nil {
		return nil, pe
	}
	r := newReader(data)
	v := r.root()
	p := treeBuilder{r: r}
	root := p.node(v)
	if pe := r.finish(v); pe != nil {
		return nil, pe
	}
	return root, nil
}

// treeBuilder builds the tree, allocating nodes in chunks rather than one by one.
type treeBuilder struct {
	r    *reader
	slab []node
}

// node returns the node of v, walking it if it is a container.
func (p *treeBuilder) node(v value) *node {
	if len(p.slab) == cap(p.slab) {
		p.slab = make([]node, 0, 256)
	}
	p.slab = append(p.slab, node{kind: v.kind, off: v.off, text: v.text})
	n := &p.slab[len(p.slab)-1]
	switch v.kind {
	case kindObject:
		n.end = p.r.members(v, func(key string, koff int64, val value) {
			n.members = append(n.members, member{key: key, off: koff, val: p.node(val)})
		})
	case kindArray:
		n.end = p.r.elements(v, func(_ int, el value) {
			n.elems = append(n.elems, p.node(el))
		})
	}
	return n
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
