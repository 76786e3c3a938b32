package document

// The decoder as it was before it read with jsontext and mapped while reading: the tree builder on
// encoding/json's Decoder.Token, the mapper that walked the tree, and the rules as Validate ran
// them. FuzzDecodeMatchesReference holds Decode, parse and check to exactly what these give.
// Everything they share with the decoder (the types, paths, numbers, patterns, messages and
// object specs) is the decoder's own.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/secretref"
)

var refImageIDRE = regexp.MustCompile(fieldrules.ImageID.Pattern())

// refParse reads data, a single JSON value, into a tree. It rejects invalid UTF-8, malformed JSON,
// nesting deeper than maxDepth and trailing data, each with the position of the problem.
func refParse(data []byte) (*node, error) {
	if i := invalidUTF8(data); i >= 0 {
		return nil, &parseError{fmt.Sprintf("the document is not valid UTF-8 at %s; save it as UTF-8", position(data, int64(i)))}
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, &parseError{"the document starts with a byte order mark; save it as UTF-8 without one"}
	}
	if skipBlank(data, 0) == int64(len(data)) {
		return nil, &parseError{"the document is empty; it must be a JSON object such as {\"version\": 1}"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := refParser{dec: dec, data: data}
	root, err := p.value(1)
	if err != nil {
		return nil, p.describe(err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &parseError{fmt.Sprintf("unexpected data after the document at %s; a file holds exactly one JSON object", position(data, skipBlank(data, end)))}
	}
	return root, nil
}

type refParser struct {
	dec  *json.Decoder
	data []byte
	slab []node // nodes are carved from here, a chunk at a time
}

// node returns a new node, allocating nodes in chunks rather than one by one.
func (p *refParser) node(k kind, off int64) *node {
	if len(p.slab) == cap(p.slab) {
		p.slab = make([]node, 0, 256)
	}
	p.slab = append(p.slab, node{kind: k, off: off})
	return &p.slab[len(p.slab)-1]
}

// value reads the next value; depth is the nesting it would have if it is a container.
func (p *refParser) value(depth int) (*node, error) {
	off := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth > maxDepth {
			return nil, &parseError{fmt.Sprintf("the document nests arrays and objects deeper than %d levels at %s", maxDepth, position(p.data, off))}
		}
		if t == '{' {
			return p.object(off, depth)
		}
		if t == '[' {
			return p.array(off, depth)
		}
		return nil, &parseError{fmt.Sprintf("malformed JSON at %s: unexpected %q", position(p.data, off), rune(t))}
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
	return nil, &parseError{fmt.Sprintf("malformed JSON at %s", position(p.data, off))}
}

func (p *refParser) object(off int64, depth int) (*node, error) {
	n := p.node(kindObject, off)
	for p.dec.More() {
		koff := p.dec.InputOffset()
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, &parseError{fmt.Sprintf("malformed JSON at %s: an object key must be a string", position(p.data, koff))}
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

func (p *refParser) array(off int64, depth int) (*node, error) {
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
func (p *refParser) describe(err error) error {
	var pe *parseError
	if errors.As(err, &pe) {
		return pe
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &parseError{fmt.Sprintf("malformed JSON at %s: %s", position(p.data, se.Offset), se.Error())}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &parseError{fmt.Sprintf("malformed JSON: the document ends early at %s; close every string, array and object", position(p.data, int64(len(p.data))))}
	}
	return &parseError{fmt.Sprintf("malformed JSON near %s", position(p.data, p.dec.InputOffset()))}
}

func refDecode(data []byte) (*Document, error) {
	root, err := refParse(data)
	if err != nil {
		return nil, cubefleet.InvalidAll([]cubefleet.FieldError{{Path: "", Message: err.Error()}})
	}
	m := refMapper{bad: make(map[string]struct{})}
	doc := m.document(root)
	c := refCheck(doc)
	for i, fe := range c.errs {
		if dep, ok := c.deps[i]; m.suppressed(fe.Path) || ok && m.suppressed(dep) {
			continue
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

// refMapper turns the tree into a Document, reporting what the types cannot hold. bad holds the
// paths whose value it could not map (wrong type, missing, unknown): Validate's complaints at or
// below them are about zero values the document never had, and are dropped.
type refMapper struct {
	errs []located
	bad  map[string]struct{}
}

func (m *refMapper) fail(off int64, path, msg string) {
	m.errs = append(m.errs, located{off: off, fe: cubefleet.FieldError{Path: path, Message: msg}})
}

func (m *refMapper) failBad(off int64, path, msg string) {
	m.fail(off, path, msg)
	m.bad[path] = struct{}{}
}

// suppressed reports whether path is, or lies below, a path the refMapper could not map.
func (m *refMapper) suppressed(path string) bool {
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

// object walks the fields of the object n at path, calling each for every known field once (the
// first occurrence), and reports unknown, repeated and missing fields. label names n in a
// wrong-type message. It returns false when n is not an object.
func (m *refMapper) object(n *node, path, label string, s *objSpec, each func(key string, v *node)) bool {
	if n.kind != kindObject {
		m.failBad(n.off, path, label+" must be an object, not "+n.kind.article())
		return false
	}
	var seen uint64
	for _, mem := range n.members {
		i := s.find(mem.key)
		switch {
		case i < 0:
			m.failBad(mem.off, join(path, mem.key), "unknown field; "+s.what+" has the fields "+s.allowed)
		case seen&(1<<i) != 0:
			m.fail(mem.off, join(path, mem.key), mem.key+" appears twice in the same object; keep one")
		default:
			seen |= 1 << i
			each(mem.key, mem.val)
		}
	}
	for i, f := range s.fields {
		if f.fix != "" && seen&(1<<i) == 0 {
			m.failBad(n.end-1, join(path, f.name), f.name+" is required; "+f.fix)
		}
	}
	return true
}

// list calls each for every element of the array n at path, a list field.
func (m *refMapper) list(n *node, path string, each func(i int, el *node, path string)) {
	if n.kind != kindArray {
		m.failBad(n.off, path, path[strings.LastIndexAny(path, ".]")+1:]+" must be an array, not "+n.kind.article())
		return
	}
	for i, el := range n.elems {
		each(i, el, index(path, i))
	}
}

// str returns the string at v, the value of key in the object at path.
func (m *refMapper) str(v *node, path, key string) string {
	if v.kind != kindString {
		m.failBad(v.off, join(path, key), key+" must be a string, not "+v.kind.article())
		return ""
	}
	return v.text
}

// optStr is str for an optional field, which may be left out but not empty: an empty string
// would vanish on re-encoding (omitempty).
func (m *refMapper) optStr(v *node, path, key, rule string) string {
	s := m.str(v, path, key)
	if v.kind == kindString && s == "" {
		m.failBad(v.off, join(path, key), key+" must not be empty; leave it out or set it to "+rule)
	}
	return s
}

// integer returns the whole number at v, clamped to ±bigInt (see intValue).
func (m *refMapper) integer(v *node, path, key string) int64 {
	if v.kind != kindNumber {
		m.failBad(v.off, join(path, key), key+" must be a whole number, not "+v.kind.article())
		return 0
	}
	n, ok := intValue(v.text)
	if !ok {
		m.failBad(v.off, join(path, key), key+" must be a whole number, not a fraction")
	}
	return n
}

// strMap returns the object under key at path as a map of strings.
func (m *refMapper) strMap(n *node, path, key string) map[string]string {
	if !m.isMap(n, path, key) || len(n.members) == 0 {
		return nil
	}
	out := make(map[string]string, len(n.members))
	for _, mem := range n.members {
		if _, dup := out[mem.key]; dup {
			m.fail(mem.off, join(join(path, key), mem.key), "the key appears twice in "+key+"; keep one")
			continue
		}
		if mem.val.kind != kindString {
			m.failBad(mem.val.off, join(join(path, key), mem.key), key+" values must be strings, not "+mem.val.kind.article())
			out[mem.key] = "" // marks the key as seen
			continue
		}
		out[mem.key] = mem.val.text
	}
	return out
}

// quotaMap returns the object under key at path as a map of resource name to whole number.
func (m *refMapper) quotaMap(n *node, path, key string) map[string]int64 {
	if !m.isMap(n, path, key) || len(n.members) == 0 {
		return nil
	}
	out := make(map[string]int64, len(n.members))
	for _, mem := range n.members {
		if _, dup := out[mem.key]; dup {
			m.fail(mem.off, join(join(path, key), mem.key), "the resource appears twice in "+key+"; keep one")
			continue
		}
		v, ok := int64(0), false
		if mem.val.kind == kindNumber {
			v, ok = intValue(mem.val.text)
		}
		if !ok {
			m.failBad(mem.val.off, join(join(path, key), mem.key), key+" values must be "+quotaNoun)
		}
		out[mem.key] = v
	}
	return out
}

func (m *refMapper) isMap(n *node, path, key string) bool {
	if n.kind != kindObject {
		m.failBad(n.off, join(path, key), key+" must be an object, not "+n.kind.article())
		return false
	}
	return true
}

func (m *refMapper) document(n *node) *Document {
	d := &Document{}
	m.object(n, "", "the document", documentSpec, func(key string, v *node) {
		p := join("", key)
		switch key {
		case "version":
			d.Version = toInt(m.integer(v, "", key))
		case "sites":
			d.Sites = make([]Site, len(v.elems))
			m.list(v, p, func(i int, el *node, p string) { d.Sites[i] = m.site(el, p) })
		case "providerAccounts":
			d.ProviderAccounts = make([]ProviderAccount, len(v.elems))
			m.list(v, p, func(i int, el *node, p string) { d.ProviderAccounts[i] = m.providerAccount(el, p) })
		case "pools":
			d.Pools = make([]Pool, len(v.elems))
			m.list(v, p, func(i int, el *node, p string) { d.Pools[i] = m.pool(el, p) })
		case "flavors":
			d.Flavors = make([]Flavor, len(v.elems))
			m.list(v, p, func(i int, el *node, p string) { d.Flavors[i] = m.flavor(el, p) })
		case "sandboxTemplates":
			d.SandboxTemplates = make([]SandboxTemplate, len(v.elems))
			m.list(v, p, func(i int, el *node, p string) { d.SandboxTemplates[i] = m.template(el, p) })
		case schemaKey:
			m.str(v, "", key)
		}
	})
	d.Sites = refNilIfEmpty(d.Sites)
	d.ProviderAccounts = refNilIfEmpty(d.ProviderAccounts)
	d.Pools = refNilIfEmpty(d.Pools)
	d.Flavors = refNilIfEmpty(d.Flavors)
	d.SandboxTemplates = refNilIfEmpty(d.SandboxTemplates)
	return d
}

func refNilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (m *refMapper) site(n *node, path string) (s Site) {
	m.object(n, path, "each site", siteSpec, func(key string, v *node) {
		switch key {
		case "name":
			s.Name = m.str(v, path, key)
		case "kind":
			s.Kind = m.str(v, path, key)
		case "region":
			s.Region = m.str(v, path, key)
		}
	})
	return s
}

func (m *refMapper) providerAccount(n *node, path string) (a ProviderAccount) {
	m.object(n, path, "each provider account", providerAccountSpec, func(key string, v *node) {
		switch key {
		case "name":
			a.Name = m.str(v, path, key)
		case "provider":
			a.Provider = m.str(v, path, key)
		case "config":
			a.Config = m.strMap(v, path, key)
		}
	})
	return a
}

func (m *refMapper) pool(n *node, path string) (p Pool) {
	m.object(n, path, "each pool", poolSpec, func(key string, v *node) {
		switch key {
		case "name":
			p.Name = m.str(v, path, key)
		case "site":
			p.Site = m.str(v, path, key)
		case "class":
			p.Class = m.str(v, path, key)
		case "gpuModel":
			p.GPUModel = m.optStr(v, path, key, "the GPU model, e.g. L40S")
		case "policy":
			p.Policy = m.policy(v, join(path, key))
		case "providerAccount":
			p.ProviderAccount = m.optStr(v, path, key, "the name of a provider account")
		case "ownerQuota":
			p.OwnerQuota = m.quotaMap(v, path, key)
		case "offers":
			op := join(path, key)
			p.Offers = make([]Offer, len(v.elems))
			m.list(v, op, func(i int, el *node, ep string) { p.Offers[i] = m.offer(el, ep) })
			p.Offers = refNilIfEmpty(p.Offers)
		}
	})
	return p
}

// strList is the list of strings under key at path, "" for an item that is not a string.
func (m *refMapper) strList(v *node, path, key string) []string {
	if v.kind != kindArray {
		m.failBad(v.off, join(path, key), key+" must be an array, not "+v.kind.article())
		return nil
	}
	var out []string
	for i, el := range v.elems {
		if el.kind != kindString {
			m.failBad(el.off, index(join(path, key), i), key+" items must be strings, not "+el.kind.article())
			out = append(out, "")
			continue
		}
		out = append(out, el.text)
	}
	return out
}

func (m *refMapper) policy(n *node, path string) *Policy {
	pol := &Policy{}
	ok := m.object(n, path, "policy", policySpec, func(key string, v *node) {
		if key == "egressAllow" {
			pol.EgressAllow = m.strList(v, path, key)
			return
		}
		if v.kind != kindNumber {
			m.failBad(v.off, join(path, key), key+" must be a number, not "+v.kind.article())
			return
		}
		if !inUnitInterval(v.text) {
			m.failBad(v.off, join(path, key), disruptionBudgetRule)
		}
		f, _ := strconv.ParseFloat(v.text, 64) // in range it is finite
		pol.DisruptionBudget = &f
	})
	if !ok {
		return nil
	}
	return pol
}

func (m *refMapper) offer(n *node, path string) (o Offer) {
	m.object(n, path, "each offer", offerSpec, func(key string, v *node) {
		switch key {
		case "tenant":
			o.Tenant = m.str(v, path, key)
		case "quota":
			o.Quota = m.quotaMap(v, path, key)
		case "priority":
			o.Priority = toInt(m.integer(v, path, key))
		}
	})
	return o
}

func (m *refMapper) flavor(n *node, path string) (f Flavor) {
	m.object(n, path, "each flavor", flavorSpec, func(key string, v *node) {
		switch key {
		case "pool":
			f.Pool = m.str(v, path, key)
		case "name":
			f.Name = m.str(v, path, key)
		case "vcpu":
			f.VCPU = toInt(m.integer(v, path, key))
		case "memoryGiB":
			f.MemoryGiB = toInt(m.integer(v, path, key))
		case "diskGiB":
			f.DiskGiB = toInt(m.integer(v, path, key))
		case "gpu":
			f.GPU = toInt(m.integer(v, path, key))
		}
	})
	return f
}

func (m *refMapper) template(n *node, path string) (t SandboxTemplate) {
	m.object(n, path, "each sandbox template", templateSpec, func(key string, v *node) {
		switch key {
		case "name":
			t.Name = m.str(v, path, key)
		case "pool":
			t.Pool = m.str(v, path, key)
		case "flavor":
			t.Flavor = m.str(v, path, key)
		case "imageId":
			t.ImageID = m.str(v, path, key)
		case "env":
			t.Env = m.strMap(v, path, key)
		case "network":
			t.Network = m.str(v, path, key)
		case "warm":
			t.Warm = m.warm(v, join(path, key))
		case "terminationGraceSeconds":
			t.TerminationGraceSeconds = m.integer(v, path, key)
		case "disconnectGraceSeconds":
			t.DisconnectGraceSeconds = m.integer(v, path, key)
		case "runtime":
			t.Runtime = m.optStr(v, path, key, fieldrules.Runtimes.Rule())
		case "egressAllow":
			t.EgressAllow = m.strList(v, path, key)
		}
	})
	return t
}

func (m *refMapper) warm(n *node, path string) *Warm {
	w := &Warm{}
	ok := m.object(n, path, "warm", warmSpec, func(key string, v *node) {
		switch key {
		case "min":
			w.Min = toInt(m.integer(v, path, key))
		case "max":
			w.Max = toInt(m.integer(v, path, key))
		}
	})
	if !ok {
		return nil
	}
	return w
}

// refCheck runs every rule on d.
func refCheck(d *Document) *refChecker {
	c := &refChecker{}
	if d == nil {
		c.add("", "the document is missing; it must be an object with version 1")
		return c
	}
	if d.Version != version {
		c.add("version", "version must be 1, the only format of the fleet document")
	}
	if n := d.Objects(); n > fieldrules.MaxObjects {
		c.add("", tooManyObjects(n))
	}
	c.listLen("sites", len(d.Sites))
	u := newRefUnique("sites", "site names must be unique", len(d.Sites))
	for i := range d.Sites {
		c.site(&d.Sites[i], index("sites", i), u, i)
	}
	c.listLen("providerAccounts", len(d.ProviderAccounts))
	u = newRefUnique("providerAccounts", "provider account names must be unique", len(d.ProviderAccounts))
	for i := range d.ProviderAccounts {
		c.providerAccount(&d.ProviderAccounts[i], index("providerAccounts", i), u, i)
	}
	c.listLen("pools", len(d.Pools))
	u = newRefUnique("pools", "pool names must be unique", len(d.Pools))
	for i := range d.Pools {
		c.pool(&d.Pools[i], index("pools", i), u, i)
	}
	c.listLen("flavors", len(d.Flavors))
	u = newRefUnique("flavors", "a pool's flavor names must be unique", len(d.Flavors))
	for i := range d.Flavors {
		c.flavor(&d.Flavors[i], index("flavors", i), u, i)
	}
	c.listLen("sandboxTemplates", len(d.SandboxTemplates))
	u = newRefUnique("sandboxTemplates", "sandbox template names must be unique", len(d.SandboxTemplates))
	for i := range d.SandboxTemplates {
		c.template(&d.SandboxTemplates[i], index("sandboxTemplates", i), u, i)
	}
	for i, t := range d.SandboxTemplates {
		for _, pl := range d.Pools {
			if pl.Name != t.Pool {
				continue
			}
			var policy []string
			if pl.Policy != nil {
				policy = pl.Policy.EgressAllow
			}
			for j, e := range t.EgressAllow {
				if _, msg := fieldrules.CheckEgressPrefix(e); msg == "" && !fieldrules.EgressWithin(e, policy) {
					c.add(index(join(index("sandboxTemplates", i), "egressAllow"), j), fieldrules.EgressOutsidePolicy(e, t.Pool, policy))
				}
			}
			break
		}
	}
	return c
}

// refChecker collects problems. deps[i], when set, is another field problem i depends on: Decode
// drops the problem when it could not map that field (warm.min > warm.max means nothing when max
// was missing).
type refChecker struct {
	errs []cubefleet.FieldError
	deps map[int]string
}

func (c *refChecker) add(path, msg string) {
	c.errs = append(c.errs, cubefleet.FieldError{Path: path, Message: msg})
}

func (c *refChecker) listLen(path string, n int) {
	if n > fieldrules.MaxItems {
		c.add(path, fmt.Sprintf("%s has %d items; at most %d are allowed", path, n, fieldrules.MaxItems))
	}
}

func (c *refChecker) mapLen(path, key string, n int) {
	if n > fieldrules.MaxKeys {
		c.add(join(path, key), fmt.Sprintf("%s has %d keys; at most %d are allowed", key, n, fieldrules.MaxKeys))
	}
}

// need checks a required string field: empty is missing, otherwise ok must hold.
func (c *refChecker) need(path, key, v string, ok func(string) bool, rule string) {
	switch {
	case v == "":
		c.add(join(path, key), key+" is required: "+rule)
	case !ok(v):
		c.add(join(path, key), key+" must be "+rule)
	}
}

func (c *refChecker) enum(path, key, v string, allowed fieldrules.Enum) {
	c.need(path, key, v, allowed.Has, allowed.Rule())
}

func (c *refChecker) intRange(path, key string, v int64, r fieldrules.Range, note string) {
	if v < r.Min || v > r.Max {
		c.add(join(path, key), fmt.Sprintf("%s must be a whole number from %d to %d (%s%s)", key, r.Min, r.Max, r.Unit, note))
	}
}

// refUnique finds repeated names in one list, reporting each repeat at its name's path.
type refUnique struct {
	list, rule string
	first      map[string]int
}

func newRefUnique(list, rule string, n int) *refUnique {
	return &refUnique{list: list, rule: rule, first: make(map[string]int, n)}
}

// check records key, the what ("name", "tenant", ...) of item i at path, and reports a repeat
// at its field. An empty key is missing, not repeated.
func (u *refUnique) check(c *refChecker, key string, i int, path, field, what string) {
	if key == "" {
		return
	}
	if j, ok := u.first[key]; ok {
		c.add(join(path, field), fmt.Sprintf("repeats the %s of %s; %s", what, index(u.list, j), u.rule))
		return
	}
	u.first[key] = i
}

func (c *refChecker) site(s *Site, p string, u *refUnique, i int) {
	c.need(p, "name", s.Name, isSiteRef, siteRefNoun)
	u.check(c, s.Name, i, p, "name", "name")
	c.enum(p, "kind", s.Kind, fieldrules.SiteKinds)
	c.need(p, "region", s.Region, fieldrules.Region.Match, fieldrules.Region.Rule())
}

func (c *refChecker) providerAccount(a *ProviderAccount, p string, u *refUnique, i int) {
	c.need(p, "name", a.Name, isName, nameNoun)
	u.check(c, a.Name, i, p, "name", "name")
	c.enum(p, "provider", a.Provider, fieldrules.Providers)
	c.mapLen(p, "config", len(a.Config))
	for _, k := range refSortedKeys(a.Config) {
		if !fieldrules.ConfigKey.Match(k) {
			c.add(join(join(p, "config"), k), "config keys must be "+fieldrules.ConfigKey.Rule())
		}
		c.secretValue(p, "config", k, a.Config[k], secretref.IsCredentialName(k))
	}
}

// secretValue checks the value v of key in the map field of the object at path (config or
// env). It never puts the value in a message.
func (c *refChecker) secretValue(path, field, key, v string, secretBearing bool) {
	if len(v) > fieldrules.MaxValueLen { // more bytes than allowed characters: count them
		if n := utf8.RuneCountInString(v); n > fieldrules.MaxValueLen {
			c.add(join(join(path, field), key), fmt.Sprintf("the value is %d characters long; at most %d are allowed", n, fieldrules.MaxValueLen))
		}
	}
	if !secretBearing || secretref.IsRef(v) {
		return
	}
	for _, scheme := range []string{"secret:", "vault:", "env:"} {
		if strings.HasPrefix(v, scheme) {
			c.add(join(join(path, field), key), key+" is not a well-formed secret reference; write it as "+secretref.Forms)
			return
		}
	}
	c.add(join(join(path, field), key), key+" names a credential, so its value must be a secret reference, not a literal secret: "+fieldrules.StoreSecret)
}

func (c *refChecker) pool(pl *Pool, p string, u *refUnique, i int) {
	c.need(p, "name", pl.Name, isPoolRef, poolRefNoun)
	u.check(c, pl.Name, i, p, "name", "name")
	c.need(p, "site", pl.Site, isSiteRef, siteRefNoun)
	c.enum(p, "class", pl.Class, fieldrules.PoolClasses)
	if pl.GPUModel != "" && !fieldrules.GPUModel.Match(pl.GPUModel) {
		c.add(join(p, "gpuModel"), "gpuModel must be "+fieldrules.GPUModel.Rule())
	}
	if pl.Policy != nil && pl.Policy.DisruptionBudget != nil {
		if b := *pl.Policy.DisruptionBudget; !(b >= 0 && b <= 1) { // NaN fails too
			c.add(join(join(p, "policy"), "disruptionBudget"), disruptionBudgetRule)
		}
	}
	if pl.Policy != nil {
		for _, e := range fieldrules.CheckEgressPolicy(pl.Policy.EgressAllow) {
			at := join(join(p, "policy"), "egressAllow")
			if e.Index >= 0 {
				at = index(at, e.Index)
			}
			c.add(at, e.Message)
		}
	}
	switch {
	case pl.Class == "provider" && pl.ProviderAccount == "":
		c.add(join(p, "providerAccount"), "providerAccount is required when class is provider; name the provider account the pool buys servers from")
	case pl.Class == "vps-host" && pl.ProviderAccount != "":
		c.add(join(p, "providerAccount"), "providerAccount is only for class provider; remove it, or set class to provider")
	case pl.ProviderAccount != "" && !isName(pl.ProviderAccount):
		c.add(join(p, "providerAccount"), "providerAccount must be "+nameNoun)
	}
	c.quota(p, "ownerQuota", pl.OwnerQuota)
	op := join(p, "offers")
	c.listLen(op, len(pl.Offers))
	tenants := newRefUnique(op, "a pool is offered to each tenant at most once", len(pl.Offers))
	for j := range pl.Offers {
		c.offer(&pl.Offers[j], index(op, j), tenants, j)
	}
}

func (c *refChecker) quota(path, key string, q map[string]int64) {
	c.mapLen(path, key, len(q))
	for _, k := range refSortedKeys(q) {
		if !fieldrules.Resource.Match(k) {
			c.add(join(join(path, key), k), key+" keys must be resource names: "+fieldrules.Resource.Rule())
		}
		if v := q[k]; v < 0 || v > fieldrules.Quota.Max {
			c.add(join(join(path, key), k), key+" values must be "+quotaNoun)
		}
	}
}

func (c *refChecker) offer(o *Offer, p string, u *refUnique, i int) {
	c.need(p, "tenant", o.Tenant, isName, "a tenant id of "+nameNoun)
	u.check(c, o.Tenant, i, p, "tenant", "tenant")
	c.quota(p, "quota", o.Quota)
	c.intRange(p, "priority", int64(o.Priority), fieldrules.Priority, ", 0 when left out")
}

func (c *refChecker) flavor(f *Flavor, p string, u *refUnique, i int) {
	c.need(p, "pool", f.Pool, isPoolRef, poolRefNoun)
	c.need(p, "name", f.Name, isName, nameNoun)
	if f.Pool != "" && f.Name != "" {
		u.check(c, f.Pool+"\x00"+f.Name, i, p, "name", "pool and name")
	}
	c.intRange(p, "vcpu", int64(f.VCPU), fieldrules.VCPU, "")
	c.intRange(p, "memoryGiB", int64(f.MemoryGiB), fieldrules.MemoryGiB, "")
	c.intRange(p, "diskGiB", int64(f.DiskGiB), fieldrules.DiskGiB, "")
	c.intRange(p, "gpu", int64(f.GPU), fieldrules.GPU, ", 0 when left out")
}

func (c *refChecker) template(t *SandboxTemplate, p string, u *refUnique, i int) {
	c.need(p, "name", t.Name, isName, nameNoun)
	u.check(c, t.Name, i, p, "name", "name")
	c.need(p, "pool", t.Pool, isPoolRef, poolRefNoun)
	c.need(p, "flavor", t.Flavor, isName, "the name of a flavor of the pool: "+nameNoun)
	c.need(p, "imageId", t.ImageID, refImageIDRE.MatchString, fieldrules.ImageID.Rule())
	c.mapLen(p, "env", len(t.Env))
	for _, k := range refSortedKeys(t.Env) {
		if !fieldrules.EnvName.Match(k) {
			c.add(join(join(p, "env"), k), "env names must be "+fieldrules.EnvName.Rule())
		}
		c.secretValue(p, "env", k, t.Env[k], secretref.IsCredentialName(k))
	}
	c.enum(p, "network", t.Network, fieldrules.Networks)
	if t.Runtime != "" && t.Runtime != "process" && t.Runtime != "microvm" {
		c.add(join(p, "runtime"), "runtime must be process or microvm, or left out for the node's default runtime")
	}
	for _, e := range fieldrules.CheckEgressAllow(t.Network, t.EgressAllow) {
		at := join(p, "egressAllow")
		if e.Index >= 0 {
			at = index(at, e.Index)
		}
		c.add(at, e.Message)
	}
	if t.Warm != nil {
		wp := p + ".warm"
		c.intRange(wp, "min", int64(t.Warm.Min), fieldrules.Warm, "")
		c.intRange(wp, "max", int64(t.Warm.Max), fieldrules.Warm, "")
		if t.Warm.Min > t.Warm.Max && t.Warm.Min <= int(fieldrules.Warm.Max) && t.Warm.Max >= 0 {
			c.add(join(wp, "min"), "min must not exceed max; raise max or lower min")
			if c.deps == nil {
				c.deps = make(map[int]string)
			}
			c.deps[len(c.errs)-1] = join(wp, "max")
		}
	}
}

func refSortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
