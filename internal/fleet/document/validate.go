package document

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/secretref"
)

// The rules in words, shared by the messages of Validate and Decode.
const (
	nameNoun    = nameRule
	siteRefNoun = "a site name (" + nameRule + ") or a site id (site_ and 26 upper-case Crockford base32 characters)"
	poolRefNoun = "a pool name (" + nameRule + ") or a pool id (pool_ and 26 upper-case Crockford base32 characters)"
	regionNoun  = "1-63 lower-case letters, digits or '-', starting with a letter or digit, e.g. eu-central"
	gpuNoun     = "1-63 letters, digits, '.', '_' or '-', e.g. L40S"
	imageNoun   = "1-255 characters without whitespace or control characters, e.g. ubuntu-24.04"
	quotaNoun   = "a whole number from 0 to 9007199254740992 (2^53): a count, in GiB for memoryGiB and diskGiB"

	disruptionBudgetRule = "disruptionBudget must be a number from 0 to 1: the fraction of the pool's hosts that may be disrupted at once, e.g. 0.1"
)

// Validate checks d against the rules of a version 1 document (specs/fleet-config.md, "The
// document") and returns every problem, in the order of d's fields, each with the JSON path of
// the place it concerns and a message that says how to fix it; nil means d is valid. Callers
// report the list with cubefleet.InvalidAll (INVALID_INPUT); it is not capped. Validate checks
// each item on its own and names unique within their list; it does not check that references
// (a pool's site, a flavor's pool, ...) resolve, since they may name objects fleet already manages:
// the planner does.
func (d *Document) Validate() []cubefleet.FieldError { return d.check().errs }

// check runs every rule on d.
func (d *Document) check() *checker {
	c := &checker{}
	if d == nil {
		c.add("", "the document is missing; it must be an object with version 1")
		return c
	}
	if d.Version != version {
		c.add("version", "version must be 1, the only format of the fleet document")
	}
	c.listLen("sites", len(d.Sites))
	u := newUnique("sites", "site names must be unique", len(d.Sites))
	for i := range d.Sites {
		c.site(&d.Sites[i], index("sites", i), u, i)
	}
	c.listLen("providerAccounts", len(d.ProviderAccounts))
	u = newUnique("providerAccounts", "provider account names must be unique", len(d.ProviderAccounts))
	for i := range d.ProviderAccounts {
		c.providerAccount(&d.ProviderAccounts[i], index("providerAccounts", i), u, i)
	}
	c.listLen("pools", len(d.Pools))
	u = newUnique("pools", "pool names must be unique", len(d.Pools))
	for i := range d.Pools {
		c.pool(&d.Pools[i], index("pools", i), u, i)
	}
	c.listLen("flavors", len(d.Flavors))
	u = newUnique("flavors", "a pool's flavor names must be unique", len(d.Flavors))
	for i := range d.Flavors {
		c.flavor(&d.Flavors[i], index("flavors", i), u, i)
	}
	c.listLen("sandboxTemplates", len(d.SandboxTemplates))
	u = newUnique("sandboxTemplates", "sandbox template names must be unique", len(d.SandboxTemplates))
	for i := range d.SandboxTemplates {
		c.template(&d.SandboxTemplates[i], index("sandboxTemplates", i), u, i)
	}
	return c
}

// checker collects problems. deps[i], when set, is another field problem i depends on: Decode
// drops the problem when it could not map that field (warm.min > warm.max means nothing when max
// was missing).
type checker struct {
	errs []cubefleet.FieldError
	deps map[int]string
}

func (c *checker) add(path, msg string) {
	c.errs = append(c.errs, cubefleet.FieldError{Path: path, Message: msg})
}

func (c *checker) listLen(path string, n int) {
	if n > maxItems {
		c.add(path, fmt.Sprintf("%s has %d items; at most %d are allowed", path, n, maxItems))
	}
}

func (c *checker) mapLen(path, key string, n int) {
	if n > maxKeys {
		c.add(join(path, key), fmt.Sprintf("%s has %d keys; at most %d are allowed", key, n, maxKeys))
	}
}

// need checks a required string field: empty is missing, otherwise ok must hold.
func (c *checker) need(path, key, v string, ok func(string) bool, rule string) {
	switch {
	case v == "":
		c.add(join(path, key), key+" is required: "+rule)
	case !ok(v):
		c.add(join(path, key), key+" must be "+rule)
	}
}

func (c *checker) enum(path, key, v string, allowed []string) {
	c.need(path, key, v, func(s string) bool { return oneOf(s, allowed) }, strings.Join(allowed, " or "))
}

func (c *checker) intRange(path, key string, v, lo, hi int64, unit string) {
	if v < lo || v > hi {
		c.add(join(path, key), fmt.Sprintf("%s must be a whole number from %d to %d (%s)", key, lo, hi, unit))
	}
}

// unique finds repeated names in one list, reporting each repeat at its name's path.
type unique struct {
	list, rule string
	first      map[string]int
}

func newUnique(list, rule string, n int) *unique {
	return &unique{list: list, rule: rule, first: make(map[string]int, n)}
}

// check records key, the what ("name", "tenant", ...) of item i at path, and reports a repeat
// at its field. An empty key is missing, not repeated.
func (u *unique) check(c *checker, key string, i int, path, field, what string) {
	if key == "" {
		return
	}
	if j, ok := u.first[key]; ok {
		c.add(join(path, field), fmt.Sprintf("repeats the %s of %s; %s", what, index(u.list, j), u.rule))
		return
	}
	u.first[key] = i
}

func (c *checker) site(s *Site, p string, u *unique, i int) {
	c.need(p, "name", s.Name, isSiteRef, siteRefNoun)
	u.check(c, s.Name, i, p, "name", "name")
	c.enum(p, "kind", s.Kind, siteKinds)
	c.need(p, "region", s.Region, isRegion, regionNoun)
}

func (c *checker) providerAccount(a *ProviderAccount, p string, u *unique, i int) {
	c.need(p, "name", a.Name, isName, nameNoun)
	u.check(c, a.Name, i, p, "name", "name")
	c.enum(p, "provider", a.Provider, providers)
	c.mapLen(p, "config", len(a.Config))
	for _, k := range sortedKeys(a.Config) {
		if !isConfigKey(k) {
			c.add(join(join(p, "config"), k), "config keys must be 1-63 letters, digits, '_', '.' or '-'")
		}
		c.secretValue(p, "config", k, a.Config[k], secretref.IsCredentialName(k))
	}
}

// secretValue checks the value v of key in the map field of the object at path (config or
// env). It never puts the value in a message.
func (c *checker) secretValue(path, field, key, v string, secretBearing bool) {
	if len(v) > maxValueLen { // more bytes than allowed characters: count them
		if n := utf8.RuneCountInString(v); n > maxValueLen {
			c.add(join(join(path, field), key), fmt.Sprintf("the value is %d characters long; at most %d are allowed", n, maxValueLen))
		}
	}
	if !secretBearing || secretref.IsRef(v) {
		return
	}
	for _, scheme := range []string{"secret:", "vault:", "env:"} {
		if strings.HasPrefix(v, scheme) {
			c.add(join(join(path, field), key), key+" is not a well-formed secret reference; write it as "+secretRefRule)
			return
		}
	}
	c.add(join(join(path, field), key), key+" names a credential, so its value must be a secret reference, not a literal secret: "+storeSecret)
}

func (c *checker) pool(pl *Pool, p string, u *unique, i int) {
	c.need(p, "name", pl.Name, isPoolRef, poolRefNoun)
	u.check(c, pl.Name, i, p, "name", "name")
	c.need(p, "site", pl.Site, isSiteRef, siteRefNoun)
	c.enum(p, "class", pl.Class, poolClass)
	if pl.GPUModel != "" && !isGPUModel(pl.GPUModel) {
		c.add(join(p, "gpuModel"), "gpuModel must be "+gpuNoun)
	}
	if pl.Policy != nil && pl.Policy.DisruptionBudget != nil {
		if b := *pl.Policy.DisruptionBudget; !(b >= 0 && b <= 1) { // NaN fails too
			c.add(join(join(p, "policy"), "disruptionBudget"), disruptionBudgetRule)
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
	tenants := newUnique(op, "a pool is offered to each tenant at most once", len(pl.Offers))
	for j := range pl.Offers {
		c.offer(&pl.Offers[j], index(op, j), tenants, j)
	}
}

func (c *checker) quota(path, key string, q map[string]int64) {
	c.mapLen(path, key, len(q))
	for _, k := range sortedKeys(q) {
		if !isResource(k) {
			c.add(join(join(path, key), k), key+" keys must be resource names: a letter, then up to 63 letters, digits, '.', '_' or '-' (vcpu, memoryGiB, diskGiB, gpu, sandboxes)")
		}
		if v := q[k]; v < 0 || v > maxQuota {
			c.add(join(join(path, key), k), key+" values must be "+quotaNoun)
		}
	}
}

func (c *checker) offer(o *Offer, p string, u *unique, i int) {
	c.need(p, "tenant", o.Tenant, isName, "a tenant id of "+nameNoun)
	u.check(c, o.Tenant, i, p, "tenant", "tenant")
	c.quota(p, "quota", o.Quota)
	c.intRange(p, "priority", int64(o.Priority), 0, maxPriority, "0 when left out")
}

func (c *checker) flavor(f *Flavor, p string, u *unique, i int) {
	c.need(p, "pool", f.Pool, isPoolRef, poolRefNoun)
	c.need(p, "name", f.Name, isName, nameNoun)
	if f.Pool != "" && f.Name != "" {
		u.check(c, f.Pool+"\x00"+f.Name, i, p, "name", "pool and name")
	}
	c.intRange(p, "vcpu", int64(f.VCPU), 1, maxVCPU, "virtual CPUs")
	c.intRange(p, "memoryGiB", int64(f.MemoryGiB), 1, maxMemoryGiB, "GiB")
	c.intRange(p, "diskGiB", int64(f.DiskGiB), 1, maxDiskGiB, "GiB")
	c.intRange(p, "gpu", int64(f.GPU), 0, maxGPU, "GPUs, 0 when left out")
}

func (c *checker) template(t *SandboxTemplate, p string, u *unique, i int) {
	c.need(p, "name", t.Name, isName, nameNoun)
	u.check(c, t.Name, i, p, "name", "name")
	c.need(p, "pool", t.Pool, isPoolRef, poolRefNoun)
	c.need(p, "flavor", t.Flavor, isName, "the name of a flavor of the pool: "+nameNoun)
	c.need(p, "imageId", t.ImageID, imageIDRE.MatchString, imageNoun)
	c.mapLen(p, "env", len(t.Env))
	for _, k := range sortedKeys(t.Env) {
		if !isEnvName(k) {
			c.add(join(join(p, "env"), k), "env names must be a letter or '_', then up to 254 letters, digits or '_'")
		}
		c.secretValue(p, "env", k, t.Env[k], secretref.IsCredentialName(k))
	}
	c.enum(p, "network", t.Network, networks)
	if t.Warm != nil {
		wp := p + ".warm"
		c.intRange(wp, "min", int64(t.Warm.Min), 0, maxWarm, "warm sandboxes")
		c.intRange(wp, "max", int64(t.Warm.Max), 0, maxWarm, "warm sandboxes")
		if t.Warm.Min > t.Warm.Max && t.Warm.Min <= maxWarm && t.Warm.Max >= 0 {
			c.add(join(wp, "min"), "min must not exceed max; raise max or lower min")
			if c.deps == nil {
				c.deps = make(map[int]string)
			}
			c.deps[len(c.errs)-1] = join(wp, "max")
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
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
