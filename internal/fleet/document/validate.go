package document

import (
	"fmt"
	"slices"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// The rules in words, shared by the messages of Validate and Decode. Those of the rule table
// are its own words.
var (
	nameNoun    = nameRule
	tenantNoun  = "a tenant id of " + nameRule
	flavorNoun  = "the name of a flavor of the pool: " + nameRule
	siteRefNoun = "a site name (" + nameRule + ") or a site id (site_ and 26 upper-case Crockford base32 characters)"
	poolRefNoun = "a pool name (" + nameRule + ") or a pool id (pool_ and 26 upper-case Crockford base32 characters)"
	quotaNoun   = fmt.Sprintf("a whole number from %d to %d (2^53): a count, in GiB for memoryGiB and diskGiB", fieldrules.Quota.Min, fieldrules.Quota.Max)

	disruptionBudgetRule = "disruptionBudget must be " + fieldrules.DisruptionBudgetRule
)

// Validate checks d against the rules of a version 1 document (docs/fleet-document.md)
// and returns every problem, in the order of d's fields, each with the JSON path of
// the place it concerns and a message that says how to fix it; nil means d is valid. Callers
// report the list with cubefleet.InvalidAll (INVALID_INPUT); it is not capped. Validate checks
// each item on its own and names unique within their list; it does not check that references
// (a pool's site, a flavor's pool, ...) resolve, since they may name objects fleet already manages:
// the planner does.
func (d *Document) Validate() []cubefleet.FieldError { return d.check().errs }

// Objects returns how many objects d describes: every list item, owner quota key and offer.
// One document describes at most fieldrules.MaxObjects, the most one tenant holds.
func (d *Document) Objects() int {
	n := len(d.Sites) + len(d.ProviderAccounts) + len(d.Pools) + len(d.Flavors) + len(d.SandboxTemplates)
	for _, p := range d.Pools {
		n += len(p.OwnerQuota) + len(p.Offers)
	}
	return n
}

// CheckObjects returns the INVALID_INPUT error Validate reports for a document that describes
// more than fieldrules.MaxObjects objects (see Objects), or nil: the one rule a planner checks
// again on a document it did not decode, at the cost of a count.
func (d *Document) CheckObjects() error {
	if n := d.Objects(); n > fieldrules.MaxObjects {
		return cubefleet.Invalid("", "%s", tooManyObjects(n))
	}
	return nil
}

func tooManyObjects(n int) string {
	return fmt.Sprintf("the document describes %d objects (owner quotas and offers included); one document holds at most %d: split the fleet across documents of different tenants, or trim quota keys and offers", n, fieldrules.MaxObjects)
}

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
	if n := d.Objects(); n > fieldrules.MaxObjects {
		c.add("", tooManyObjects(n))
	}
	c.listLen(&path{key: "sites", i: -1}, len(d.Sites))
	u := newUnique("site names must be unique", len(d.Sites))
	for i := range d.Sites {
		c.site(&d.Sites[i], &path{key: "sites", i: i}, u, i)
	}
	c.listLen(&path{key: "providerAccounts", i: -1}, len(d.ProviderAccounts))
	u = newUnique("provider account names must be unique", len(d.ProviderAccounts))
	for i := range d.ProviderAccounts {
		c.providerAccount(&d.ProviderAccounts[i], &path{key: "providerAccounts", i: i}, u, i)
	}
	c.listLen(&path{key: "pools", i: -1}, len(d.Pools))
	u = newUnique("pool names must be unique", len(d.Pools))
	for i := range d.Pools {
		c.pool(&d.Pools[i], &path{key: "pools", i: i}, u, i)
	}
	c.listLen(&path{key: "flavors", i: -1}, len(d.Flavors))
	u = newUnique("a pool's flavor names must be unique", len(d.Flavors))
	for i := range d.Flavors {
		c.flavor(&d.Flavors[i], &path{key: "flavors", i: i}, u, i)
	}
	c.listLen(&path{key: "sandboxTemplates", i: -1}, len(d.SandboxTemplates))
	u = newUnique("sandbox template names must be unique", len(d.SandboxTemplates))
	for i := range d.SandboxTemplates {
		c.template(&d.SandboxTemplates[i], &path{key: "sandboxTemplates", i: i}, u, i)
	}
	c.egressPolicies(d)
	return c
}

// egress adds the problems of the prefix list under key at p (a template's egressAllow, a
// pool's policy.egressAllow), each at its entry's path.
func (c *checker) egress(p *path, key string, list []fieldrules.EgressProblem) {
	for _, e := range list {
		if e.Index < 0 {
			c.add(p.member(key), e.Message)
		} else {
			c.add(fmt.Sprintf("%s[%d]", p.member(key), e.Index), e.Message)
		}
	}
}

// egressPolicies checks each entry of the egressAllow of a template on a pool d describes
// against that pool's policy.egressAllow. An entry that breaks the prefix rule is reported
// already, and a template on a pool d does not describe is the planner's to check.
func (c *checker) egressPolicies(d *Document) {
	var policies map[string][]string
	for i := range d.SandboxTemplates {
		t := &d.SandboxTemplates[i]
		if len(t.EgressAllow) == 0 {
			continue
		}
		if policies == nil {
			policies = make(map[string][]string, len(d.Pools))
			for _, pl := range d.Pools {
				var list []string
				if pl.Policy != nil {
					list = pl.Policy.EgressAllow
				}
				if _, seen := policies[pl.Name]; !seen { // a repeated name is reported already
					policies[pl.Name] = list
				}
			}
		}
		policy, ok := policies[t.Pool]
		if !ok {
			continue
		}
		p := &path{key: "sandboxTemplates", i: i}
		for _, j := range fieldrules.EgressOutside(t.EgressAllow, policy) {
			if _, msg := fieldrules.CheckEgressPrefix(t.EgressAllow[j]); msg == "" {
				c.add(fmt.Sprintf("%s[%d]", p.member("egressAllow"), j), fieldrules.EgressOutsidePolicy(t.EgressAllow[j], t.Pool, policy))
			}
		}
	}
}

// checker collects problems. deps[i], when set, is another field problem i depends on: Decode
// drops the problem when it could not map that field (warm.min > warm.max means nothing when max
// was missing). The rules take the path of the item they check and write it out only for a
// problem.
type checker struct {
	errs    []cubefleet.FieldError
	deps    map[int]string
	keys    []string // scratch for the sorted keys of one map at a time
	tenants unique   // the tenants of one pool's offers at a time
}

func (c *checker) add(path, msg string) {
	c.errs = append(c.errs, cubefleet.FieldError{Path: path, Message: msg})
}

// listLen checks the length n of the list at p.
func (c *checker) listLen(p *path, n int) {
	if n > fieldrules.MaxItems {
		s := p.String()
		c.add(s, fieldrules.TooMany(s, n, fieldrules.MaxItems, "items"))
	}
}

// mapLen checks the number n of keys of the map under key in the object at p.
func (c *checker) mapLen(p *path, key string, n int) {
	if n > fieldrules.MaxKeys {
		c.add(p.member(key), fieldrules.TooMany(key, n, fieldrules.MaxKeys, "keys"))
	}
}

// need checks a required string field: empty is missing, otherwise ok must hold.
func (c *checker) need(p *path, key, v string, ok func(string) bool, rule string) {
	switch {
	case v == "":
		c.add(p.member(key), key+" is required: "+rule)
	case !ok(v):
		c.add(p.member(key), key+" must be "+rule)
	}
}

// match checks a required string field against a pattern of the rule table. (Like enum, it
// passes need no method value: a closure over its argument would cost an allocation per call.)
func (c *checker) match(p *path, key, v string, rule *fieldrules.Pattern) {
	if !rule.Match(v) {
		c.missingOr(p, key, v, rule.Rule())
	}
}

// enum checks a required string field against an enumeration of the rule table.
func (c *checker) enum(p *path, key, v string, allowed fieldrules.Enum) {
	if !allowed.Has(v) {
		c.missingOr(p, key, v, allowed.Rule())
	}
}

// missingOr reports the required field key, whose value v breaks rule: missing when empty.
func (c *checker) missingOr(p *path, key, v, rule string) {
	if v == "" {
		c.add(p.member(key), key+" is required: "+rule)
	} else {
		c.add(p.member(key), key+" must be "+rule)
	}
}

// intRange checks the whole number v of key against r; note, when set, follows r's unit.
func (c *checker) intRange(p *path, key string, v int64, r fieldrules.Range, note string) {
	if !r.Contains(v) {
		c.add(p.member(key), fmt.Sprintf("%s must be a whole number from %d to %d (%s%s)", key, r.Min, r.Max, r.Unit, note))
	}
}

// unique finds repeated names in one list, reporting each repeat at its name's path.
type unique struct {
	rule  string
	first map[string]int
}

func newUnique(rule string, n int) *unique {
	return &unique{rule: rule, first: make(map[string]int, n)}
}

// reset makes u check another list, keeping its storage.
func (u *unique) reset(rule string) {
	u.rule = rule
	if u.first == nil {
		u.first = make(map[string]int)
	}
	clear(u.first)
}

// check records key, the what ("name", "tenant", ...) of the item at p, element i of its list,
// and reports a repeat at its field. An empty key is missing, not repeated.
func (u *unique) check(c *checker, key string, i int, p *path, field, what string) {
	if key == "" {
		return
	}
	if j, ok := u.first[key]; ok {
		first := path{up: p.up, key: p.key, i: j}
		c.add(p.member(field), fmt.Sprintf("repeats the %s of %s; %s", what, first.String(), u.rule))
		return
	}
	u.first[key] = i
}

func (c *checker) site(s *Site, p *path, u *unique, i int) {
	c.need(p, "name", s.Name, isSiteRef, siteRefNoun)
	u.check(c, s.Name, i, p, "name", "name")
	c.enum(p, "kind", s.Kind, fieldrules.SiteKinds)
	c.match(p, "region", s.Region, fieldrules.Region)
}

func (c *checker) providerAccount(a *ProviderAccount, p *path, u *unique, i int) {
	c.need(p, "name", a.Name, isName, nameNoun)
	u.check(c, a.Name, i, p, "name", "name")
	c.enum(p, "provider", a.Provider, fieldrules.Providers)
	c.mapLen(p, "config", len(a.Config))
	c.keys = sortedKeys(c.keys, a.Config)
	for _, k := range c.keys {
		if !fieldrules.ConfigKey.Match(k) {
			c.add(join(p.member("config"), k), "config keys must be "+fieldrules.ConfigKey.Rule())
		}
		c.secretValue(p, "config", k, a.Config[k])
	}
}

// secretValue checks the value v of key in the map field of the object at p (config or env). It
// never puts the value in a message.
func (c *checker) secretValue(p *path, field, key, v string) {
	if msg := fieldrules.CheckValueLen(v); msg != "" {
		c.add(join(p.member(field), key), msg)
	}
	if msg := fieldrules.CheckCredential(key, v); msg != "" {
		c.add(join(p.member(field), key), msg)
	}
}

func (c *checker) pool(pl *Pool, p *path, u *unique, i int) {
	c.need(p, "name", pl.Name, isPoolRef, poolRefNoun)
	u.check(c, pl.Name, i, p, "name", "name")
	c.need(p, "site", pl.Site, isSiteRef, siteRefNoun)
	c.enum(p, "class", pl.Class, fieldrules.PoolClasses)
	if pl.GPUModel != "" && !fieldrules.GPUModel.Match(pl.GPUModel) {
		c.add(p.member("gpuModel"), "gpuModel must be "+fieldrules.GPUModel.Rule())
	}
	if pl.Policy != nil && pl.Policy.DisruptionBudget != nil {
		if !fieldrules.ValidDisruptionBudget(*pl.Policy.DisruptionBudget) { // NaN fails too
			c.add(join(p.member("policy"), "disruptionBudget"), disruptionBudgetRule)
		}
	}
	if pl.Policy != nil {
		c.egress(&path{up: p, key: "policy", i: -1}, "egressAllow", fieldrules.CheckEgressPolicy(pl.Policy.EgressAllow))
	}
	switch {
	case pl.Class == fieldrules.PoolClassProvider && pl.ProviderAccount == "":
		c.add(p.member("providerAccount"), "providerAccount is required when class is provider; name the provider account the pool buys servers from")
	case pl.Class == fieldrules.PoolClassVPSHost && pl.ProviderAccount != "":
		c.add(p.member("providerAccount"), "providerAccount is only for class provider; remove it, or set class to provider")
	case pl.ProviderAccount != "" && !isName(pl.ProviderAccount):
		c.add(p.member("providerAccount"), "providerAccount must be "+nameNoun)
	}
	c.quota(p, "ownerQuota", pl.OwnerQuota)
	c.listLen(&path{up: p, key: "offers", i: -1}, len(pl.Offers))
	c.tenants.reset("a pool is offered to each tenant at most once")
	for j := range pl.Offers {
		c.offer(&pl.Offers[j], &path{up: p, key: "offers", i: j}, &c.tenants, j)
	}
}

func (c *checker) quota(p *path, key string, q map[string]int64) {
	c.mapLen(p, key, len(q))
	c.keys = sortedKeys(c.keys, q)
	for _, k := range c.keys {
		if !fieldrules.Resource.Match(k) {
			c.add(join(p.member(key), k), key+" keys must be resource names: "+fieldrules.Resource.Rule())
		}
		if !fieldrules.Quota.Contains(q[k]) {
			c.add(join(p.member(key), k), key+" values must be "+quotaNoun)
		}
	}
}

func (c *checker) offer(o *Offer, p *path, u *unique, i int) {
	c.need(p, "tenant", o.Tenant, isName, tenantNoun)
	u.check(c, o.Tenant, i, p, "tenant", "tenant")
	c.quota(p, "quota", o.Quota)
	c.intRange(p, "priority", int64(o.Priority), fieldrules.Priority, ", 0 when left out")
}

func (c *checker) flavor(f *Flavor, p *path, u *unique, i int) {
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

func (c *checker) template(t *SandboxTemplate, p *path, u *unique, i int) {
	c.need(p, "name", t.Name, isName, nameNoun)
	u.check(c, t.Name, i, p, "name", "name")
	c.need(p, "pool", t.Pool, isPoolRef, poolRefNoun)
	c.need(p, "flavor", t.Flavor, isName, flavorNoun)
	c.match(p, "imageId", t.ImageID, fieldrules.ImageID)
	c.mapLen(p, "env", len(t.Env))
	c.keys = sortedKeys(c.keys, t.Env)
	for _, k := range c.keys {
		if !fieldrules.EnvName.Match(k) {
			c.add(join(p.member("env"), k), "env names must be "+fieldrules.EnvName.Rule())
		}
		c.secretValue(p, "env", k, t.Env[k])
	}
	c.enum(p, "network", t.Network, fieldrules.Networks)
	if t.TerminationGraceSeconds != 0 {
		c.intRange(p, "terminationGraceSeconds", t.TerminationGraceSeconds, fieldrules.TerminationGrace, ", or left out for 10")
	}
	if t.DisconnectGraceSeconds != 0 {
		c.intRange(p, "disconnectGraceSeconds", t.DisconnectGraceSeconds, fieldrules.DisconnectGrace, ", or left out for the server's --disconnect-grace")
	}
	if t.Runtime != "" && !fieldrules.Runtimes.Has(t.Runtime) {
		c.add(p.member("runtime"), "runtime must be "+fieldrules.Runtimes.Rule()+", or left out for the node's default runtime")
	}
	c.egress(p, "egressAllow", fieldrules.CheckEgressAllow(t.Network, t.EgressAllow))
	if t.Warm != nil {
		wp := &path{up: p, key: "warm", i: -1}
		c.intRange(wp, "min", int64(t.Warm.Min), fieldrules.Warm, "")
		c.intRange(wp, "max", int64(t.Warm.Max), fieldrules.Warm, "")
		if t.Warm.Min > t.Warm.Max && fieldrules.Warm.Contains(int64(t.Warm.Min)) && fieldrules.Warm.Contains(int64(t.Warm.Max)) {
			c.add(wp.member("min"), "min must not exceed max; raise max or lower min")
			if c.deps == nil {
				c.deps = make(map[int]string)
			}
			c.deps[len(c.errs)-1] = wp.member("max")
		}
	}
}

// sortedKeys returns the keys of m in order, reusing buf's storage (c.keys: one map at a time).
func sortedKeys[V any](buf []string, m map[string]V) []string {
	buf = buf[:0]
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}
