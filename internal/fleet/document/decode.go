package document

import (
	"fmt"
	"sort"
	"strconv"
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
//     data after the document (each alone, with its byte offset);
//   - repeated keys in one object, unknown fields (the message lists the allowed ones), values
//     of the wrong JSON type, missing required fields, and empty optional strings;
//   - every rule of Validate.
//
// At most 200 problems are listed, followed by one "...and N more" entry. Messages never repeat
// the value of a config or env entry, so a literal secret is not echoed. Empty lists and maps
// decode as nil, so Decode, json.Marshal and Decode again give the same Document. Decode never
// panics; the caller bounds the size of data.
func Decode(data []byte) (*Document, error) {
	root, err := parse(data)
	if err != nil {
		return nil, cubefleet.InvalidAll([]cubefleet.FieldError{{Path: "", Message: err.Error()}})
	}
	m := mapper{bad: make(map[string]struct{})}
	doc := m.document(root)
	for _, fe := range doc.Validate() {
		if !m.suppressed(fe.Path) {
			m.errs = append(m.errs, located{off: offsetOf(root, fe.Path), fe: fe})
		}
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

// mapper turns the tree into a Document, reporting what the types cannot hold. bad holds the
// paths whose value it could not map (wrong type, missing, unknown): Validate's complaints at or
// below them are about zero values the document never had, and are dropped.
type mapper struct {
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

// object walks the fields of the object n at path, calling each for every known field once (the
// first occurrence), and reports unknown, repeated and missing fields. label names n in a
// wrong-type message. It returns false when n is not an object.
func (m *mapper) object(n *node, path, label string, s *objSpec, each func(key string, v *node)) bool {
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

func (s *objSpec) find(key string) int {
	for i, f := range s.fields {
		if f.name == key {
			return i
		}
	}
	return -1
}

// list calls each for every element of the array n at path; it returns the number of elements,
// or 0 when n is not an array.
func (m *mapper) list(n *node, path string, each func(i int, el *node, path string)) int {
	if n.kind != kindArray {
		m.failBad(n.off, path, path[strings.LastIndexAny(path, ".]")+1:]+" must be an array, not "+n.kind.article())
		return 0
	}
	for i, el := range n.elems {
		each(i, el, index(path, i))
	}
	return len(n.elems)
}

// str returns the string at v, the value of key in the object at path.
func (m *mapper) str(v *node, path, key string) string {
	if v.kind != kindString {
		m.failBad(v.off, join(path, key), key+" must be a string, not "+v.kind.article())
		return ""
	}
	return v.text
}

// optStr is str for an optional field, which may be left out but not empty: an empty string
// would vanish on re-encoding (omitempty).
func (m *mapper) optStr(v *node, path, key, rule string) string {
	s := m.str(v, path, key)
	if v.kind == kindString && s == "" {
		m.failBad(v.off, join(path, key), key+" must not be empty; leave it out or set it to "+rule)
	}
	return s
}

// integer returns the whole number at v, clamped to ±bigInt (see intValue).
func (m *mapper) integer(v *node, path, key string) int64 {
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

// strMap returns the object at path as a map of strings; label names its values in messages.
func (m *mapper) strMap(n *node, path, key string) map[string]string {
	if !m.isMap(n, path, key) || len(n.members) == 0 {
		return nil
	}
	out := make(map[string]string, len(n.members))
	for _, mem := range n.members {
		kp := join(path, mem.key)
		if _, dup := out[mem.key]; dup {
			m.fail(mem.off, kp, "the key appears twice in "+key+"; keep one")
			continue
		}
		if mem.val.kind != kindString {
			m.failBad(mem.val.off, kp, key+" values must be strings, not "+mem.val.kind.article())
		}
		out[mem.key] = mem.val.text
	}
	return out
}

// quotaMap returns the object at path as a map of resource name to whole number.
func (m *mapper) quotaMap(n *node, path, key string) map[string]int64 {
	if !m.isMap(n, path, key) || len(n.members) == 0 {
		return nil
	}
	out := make(map[string]int64, len(n.members))
	for _, mem := range n.members {
		kp := join(path, mem.key)
		if _, dup := out[mem.key]; dup {
			m.fail(mem.off, kp, "the resource appears twice in "+key+"; keep one")
			continue
		}
		v, ok := int64(0), false
		if mem.val.kind == kindNumber {
			v, ok = intValue(mem.val.text)
		}
		if !ok {
			m.failBad(mem.val.off, kp, key+" values must be whole numbers from 0 to 2^53 (a count; GiB for memoryGiB and diskGiB)")
		}
		out[mem.key] = v
	}
	return out
}

func (m *mapper) isMap(n *node, path, key string) bool {
	if n.kind != kindObject {
		m.failBad(n.off, join(path, key), key+" must be an object, not "+n.kind.article())
		return false
	}
	return true
}

// The object types of the document, as Decode knows them.
var (
	documentSpec = spec("the document",
		fieldSpec{"version", "set it to 1"}, fieldSpec{name: "sites"}, fieldSpec{name: "providerAccounts"},
		fieldSpec{name: "pools"}, fieldSpec{name: "flavors"}, fieldSpec{name: "sandboxTemplates"})
	siteSpec = spec("a site",
		fieldSpec{"name", "name the site, e.g. fra"},
		fieldSpec{"kind", "set it to shared or dedicated"},
		fieldSpec{"region", "set the site's region, e.g. eu-central"})
	providerAccountSpec = spec("a provider account",
		fieldSpec{"name", "name the account, e.g. cloud"},
		fieldSpec{"provider", "set it to hetzner-cloud or ionos-cloud"},
		fieldSpec{name: "config"})
	poolSpec = spec("a pool",
		fieldSpec{"name", "name the pool, e.g. vps-fra"},
		fieldSpec{"site", "name the pool's site, by name or site id"},
		fieldSpec{"class", "set it to vps-host or provider"},
		fieldSpec{name: "gpuModel"}, fieldSpec{name: "policy"}, fieldSpec{name: "providerAccount"},
		fieldSpec{name: "ownerQuota"}, fieldSpec{name: "offers"})
	policySpec = spec("a policy", fieldSpec{name: "disruptionBudget"})
	offerSpec  = spec("an offer",
		fieldSpec{"tenant", "name the tenant the pool is offered to, e.g. acme"},
		fieldSpec{name: "quota"}, fieldSpec{name: "priority"})
	flavorSpec = spec("a flavor",
		fieldSpec{"pool", "name the flavor's pool, by name or pool id"},
		fieldSpec{"name", "name the flavor, e.g. g1.small"},
		fieldSpec{"vcpu", "give the number of virtual CPUs, 1 to 4096"},
		fieldSpec{"memoryGiB", "give the memory in GiB, 1 to 65536"},
		fieldSpec{"diskGiB", "give the disk size in GiB, 1 to 1048576"},
		fieldSpec{name: "gpu"})
	templateSpec = spec("a sandbox template",
		fieldSpec{"name", "name the template, e.g. py-small"},
		fieldSpec{"pool", "name the template's pool, by name or pool id"},
		fieldSpec{"flavor", "name a flavor of the pool, e.g. g1.small"},
		fieldSpec{"imageId", "give the image the sandbox boots, e.g. ubuntu-24.04"},
		fieldSpec{name: "env"},
		fieldSpec{"network", "set it to private or public"},
		fieldSpec{name: "warm"})
	warmSpec = spec("warm",
		fieldSpec{"min", "give the least number of warm sandboxes, 0 to 1000"},
		fieldSpec{"max", "give the most number of warm sandboxes, 0 to 1000"})
)

func (m *mapper) document(n *node) *Document {
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
		}
	})
	d.Sites = nilIfEmpty(d.Sites)
	d.ProviderAccounts = nilIfEmpty(d.ProviderAccounts)
	d.Pools = nilIfEmpty(d.Pools)
	d.Flavors = nilIfEmpty(d.Flavors)
	d.SandboxTemplates = nilIfEmpty(d.SandboxTemplates)
	return d
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (m *mapper) site(n *node, path string) (s Site) {
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

func (m *mapper) providerAccount(n *node, path string) (a ProviderAccount) {
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

func (m *mapper) pool(n *node, path string) (p Pool) {
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
			p.Offers = nilIfEmpty(p.Offers)
		}
	})
	return p
}

func (m *mapper) policy(n *node, path string) *Policy {
	pol := &Policy{}
	ok := m.object(n, path, "policy", policySpec, func(key string, v *node) {
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

func (m *mapper) offer(n *node, path string) (o Offer) {
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

func (m *mapper) flavor(n *node, path string) (f Flavor) {
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

func (m *mapper) template(n *node, path string) (t SandboxTemplate) {
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
		}
	})
	return t
}

func (m *mapper) warm(n *node, path string) *Warm {
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
