package document

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/cubefleet/cubefleet/internal/strictjson"
)

// Paths name a place in the document the way details.path does, in the one path form of API
// inputs (strictjson.Member, strictjson.Index): `pools[0].offers[1].quota.gpu`, a key that needs
// it quoted in brackets, `quota["gpu.l40s"]`, so every path reads back unambiguously (see
// offsetOf), and a key longer than any valid key cut short.

// join returns the path of key inside the object at path.
func join(path, key string) string { return strictjson.Member(path, key) }

// A path is where a value sits in the document, kept as the steps that lead there, so that
// building one costs nothing: only a problem writes it out (String), and most values have none.
// The nil *path is the document itself.
type path struct {
	up  *path  // the object with the member; nil for the document
	key string // the member
	i   int    // the element of the member's array, or -1 for the member itself
}

// String writes p out: pools[0].offers[1].
func (p *path) String() string {
	if p == nil {
		return ""
	}
	// A copy of the key, so that the compiler sees nothing of p escape: a path that points to
	// another keeps both on the stack.
	s := join(p.up.String(), strings.Clone(p.key))
	if p.i >= 0 {
		s = index(s, p.i)
	}
	return s
}

// member returns the path of key in the object at p, written out.
func (p *path) member(key string) string { return join(p.String(), key) }

// index returns the path of element i of the array at path.
func index(path string, i int) string { return strictjson.Index(path, i) }

// offsetOf returns where the problem at path sits in the tree rooted at root, for sorting
// problems into document order: the offset of the value at path, or, when the path ends in a
// key the object does not have, the offset of that object's closing brace (a missing field is
// noticed at the end of its object). A path that does not read back gives the offset of the
// deepest value it reached.
func offsetOf(root *node, path string) int64 {
	n := root
	for i := 0; i < len(path); {
		var key string
		switch {
		case path[i] == '[' && i+1 < len(path) && path[i+1] == '"':
			j := closingQuote(path, i+1)
			if j < 0 || json.Unmarshal([]byte(path[i+1:j+1]), &key) != nil {
				return n.off
			}
			i = j + 2 // past `"]`
		case path[i] == '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return n.off
			}
			k, err := strconv.Atoi(path[i+1 : i+j])
			if err != nil || n.kind != kindArray || k < 0 || k >= len(n.elems) {
				return n.off
			}
			n = n.elems[k]
			i += j + 1
			continue
		default:
			if path[i] == '.' {
				i++
			}
			j := strings.IndexAny(path[i:], ".[")
			if j < 0 {
				j = len(path) - i
			}
			key = path[i : i+j]
			i += j
		}
		if n.kind != kindObject {
			return n.off
		}
		v := n.lookup(key)
		if v == nil {
			return n.end - 1
		}
		n = v
	}
	return n.off
}

// closingQuote returns the index of the quote that closes the JSON string opening at path[open].
func closingQuote(path string, open int) int {
	for i := open + 1; i < len(path); i++ {
		switch path[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}
