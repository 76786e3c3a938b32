package document

import (
	"strconv"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
)

// This file maps each object type of the document from the tree (see decode.go for the helpers).

// The object types of the document, as Decode knows them.
var (
	documentSpec = spec("the document",
		fieldSpec{"version", "set it to 1"}, fieldSpec{name: "sites"}, fieldSpec{name: "providerAccounts"},
		fieldSpec{name: "pools"}, fieldSpec{name: "flavors"}, fieldSpec{name: "sandboxTemplates"}, fieldSpec{name: schemaKey})
	siteSpec = spec("a site",
		fieldSpec{"name", "name the site, e.g. fra"},
		fieldSpec{"kind", "set it to " + fieldrules.SiteKinds.Rule()},
		fieldSpec{"region", "set the site's region, e.g. eu-central"})
	providerAccountSpec = spec("a provider account",
		fieldSpec{"name", "name the account, e.g. cloud"},
		fieldSpec{"provider", "set it to " + fieldrules.Providers.Rule()},
		fieldSpec{name: "config"})
	poolSpec = spec("a pool",
		fieldSpec{"name", "name the pool, e.g. vps-fra"},
		fieldSpec{"site", "name the pool's site, by name or site id"},
		fieldSpec{"class", "set it to " + fieldrules.PoolClasses.Rule()},
		fieldSpec{name: "gpuModel"}, fieldSpec{name: "policy"}, fieldSpec{name: "providerAccount"},
		fieldSpec{name: "ownerQuota"}, fieldSpec{name: "offers"})
	policySpec = spec("a policy", fieldSpec{name: "disruptionBudget"}, fieldSpec{name: "egressAllow"})
	offerSpec  = spec("an offer",
		fieldSpec{"tenant", "name the tenant the pool is offered to, e.g. acme"},
		fieldSpec{name: "quota"}, fieldSpec{name: "priority"})
	flavorSpec = spec("a flavor",
		fieldSpec{"pool", "name the flavor's pool, by name or pool id"},
		fieldSpec{"name", "name the flavor, e.g. g1.small"},
		fieldSpec{"vcpu", "give the number of virtual CPUs, " + fieldrules.VCPU.Span()},
		fieldSpec{"memoryGiB", "give the memory in GiB, " + fieldrules.MemoryGiB.Span()},
		fieldSpec{"diskGiB", "give the disk size in GiB, " + fieldrules.DiskGiB.Span()},
		fieldSpec{name: "gpu"})
	templateSpec = spec("a sandbox template",
		fieldSpec{"name", "name the template, e.g. py-small"},
		fieldSpec{"pool", "name the template's pool, by name or pool id"},
		fieldSpec{"flavor", "name a flavor of the pool, e.g. g1.small"},
		fieldSpec{"imageId", "give the image the sandbox boots, e.g. ubuntu-24.04"},
		fieldSpec{name: "env"},
		fieldSpec{"network", "set it to " + fieldrules.Networks.Rule()},
		fieldSpec{name: "warm"},
		fieldSpec{name: "terminationGraceSeconds"},
		fieldSpec{name: "disconnectGraceSeconds"},
		fieldSpec{name: "runtime"},
		fieldSpec{name: "egressAllow"})
	warmSpec = spec("warm",
		fieldSpec{"min", "give the least number of warm sandboxes, " + fieldrules.Warm.Span()},
		fieldSpec{"max", "give the most number of warm sandboxes, " + fieldrules.Warm.Span()})
)

func (m *mapper) document(n value) *Document {
	d := &Document{}
	m.object(n, nil, "the document", documentSpec, func(key string, v value) {
		list := &path{key: key, i: -1}
		switch key {
		case "version":
			d.Version = toInt(m.integer(v, nil, key))
		case "sites":
			d.Sites = mapList(m, v, list, m.site)
		case "providerAccounts":
			d.ProviderAccounts = mapList(m, v, list, m.providerAccount)
		case "pools":
			d.Pools = mapList(m, v, list, m.pool)
		case "flavors":
			d.Flavors = mapList(m, v, list, m.flavor)
		case "sandboxTemplates":
			d.SandboxTemplates = mapList(m, v, list, m.template)
		case schemaKey:
			m.str(v, nil, key) // a string, and otherwise ignored
		}
	})
	return d
}

// The items of lists come by value (see mapList).

func (m *mapper) site(n value, item path) (s Site) {
	at := &item
	m.object(n, at, "each site", siteSpec, func(key string, v value) {
		switch key {
		case "name":
			s.Name = m.str(v, at, key)
		case "kind":
			s.Kind = m.str(v, at, key)
		case "region":
			s.Region = m.str(v, at, key)
		}
	})
	return s
}

func (m *mapper) providerAccount(n value, item path) (a ProviderAccount) {
	at := &item
	m.object(n, at, "each provider account", providerAccountSpec, func(key string, v value) {
		switch key {
		case "name":
			a.Name = m.str(v, at, key)
		case "provider":
			a.Provider = m.str(v, at, key)
		case "config":
			a.Config = m.strMap(v, at, key)
		}
	})
	return a
}

func (m *mapper) pool(n value, item path) (p Pool) {
	at := &item
	m.object(n, at, "each pool", poolSpec, func(key string, v value) {
		switch key {
		case "name":
			p.Name = m.str(v, at, key)
		case "site":
			p.Site = m.str(v, at, key)
		case "class":
			p.Class = m.str(v, at, key)
		case "gpuModel":
			p.GPUModel = m.optStr(v, at, key, "the GPU model, e.g. L40S")
		case "policy":
			p.Policy = m.policy(v, &path{up: at, key: key, i: -1})
		case "providerAccount":
			p.ProviderAccount = m.optStr(v, at, key, "the name of a provider account")
		case "ownerQuota":
			p.OwnerQuota = m.quotaMap(v, at, key)
		case "offers":
			p.Offers = mapList(m, v, &path{up: at, key: key, i: -1}, m.offer)
		}
	})
	return p
}

func (m *mapper) policy(n value, at *path) *Policy {
	pol := &Policy{}
	ok := m.object(n, at, "policy", policySpec, func(key string, v value) {
		if key == "egressAllow" {
			pol.EgressAllow = m.strList(v, at, key)
			return
		}
		if v.kind != kindNumber {
			m.failBad(v.off, at.member(key), key+" must be a number, not "+v.kind.article())
			return
		}
		if !inUnitInterval(v.text) {
			m.failBad(v.off, at.member(key), disruptionBudgetRule)
		}
		f, _ := strconv.ParseFloat(v.text, 64) // in range it is finite
		pol.DisruptionBudget = &f
	})
	if !ok {
		return nil
	}
	return pol
}

func (m *mapper) offer(n value, item path) (o Offer) {
	at := &item
	m.object(n, at, "each offer", offerSpec, func(key string, v value) {
		switch key {
		case "tenant":
			o.Tenant = m.str(v, at, key)
		case "quota":
			o.Quota = m.quotaMap(v, at, key)
		case "priority":
			o.Priority = toInt(m.integer(v, at, key))
		}
	})
	return o
}

func (m *mapper) flavor(n value, item path) (f Flavor) {
	at := &item
	m.object(n, at, "each flavor", flavorSpec, func(key string, v value) {
		switch key {
		case "pool":
			f.Pool = m.str(v, at, key)
		case "name":
			f.Name = m.str(v, at, key)
		case "vcpu":
			f.VCPU = toInt(m.integer(v, at, key))
		case "memoryGiB":
			f.MemoryGiB = toInt(m.integer(v, at, key))
		case "diskGiB":
			f.DiskGiB = toInt(m.integer(v, at, key))
		case "gpu":
			f.GPU = toInt(m.integer(v, at, key))
		}
	})
	return f
}

func (m *mapper) template(n value, item path) (t SandboxTemplate) {
	at := &item
	m.object(n, at, "each sandbox template", templateSpec, func(key string, v value) {
		switch key {
		case "name":
			t.Name = m.str(v, at, key)
		case "pool":
			t.Pool = m.str(v, at, key)
		case "flavor":
			t.Flavor = m.str(v, at, key)
		case "imageId":
			t.ImageID = m.str(v, at, key)
		case "env":
			t.Env = m.strMap(v, at, key)
		case "network":
			t.Network = m.str(v, at, key)
		case "warm":
			t.Warm = m.warm(v, &path{up: at, key: key, i: -1})
		case "terminationGraceSeconds":
			t.TerminationGraceSeconds = m.integer(v, at, key)
		case "disconnectGraceSeconds":
			t.DisconnectGraceSeconds = m.integer(v, at, key)
		case "runtime":
			t.Runtime = m.optStr(v, at, key, fieldrules.Runtimes.Rule())
		case "egressAllow":
			t.EgressAllow = m.strList(v, at, key)
		}
	})
	return t
}

func (m *mapper) warm(n value, at *path) *Warm {
	w := &Warm{}
	ok := m.object(n, at, "warm", warmSpec, func(key string, v value) {
		switch key {
		case "min":
			w.Min = toInt(m.integer(v, at, key))
		case "max":
			w.Max = toInt(m.integer(v, at, key))
		}
	})
	if !ok {
		return nil
	}
	return w
}
