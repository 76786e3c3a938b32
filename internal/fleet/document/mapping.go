package document

import "strconv"

// This file maps each object type of the document from the tree (see decode.go for the helpers).

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
