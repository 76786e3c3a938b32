package document

import (
	"fmt"
	"strconv"

	"github.com/cubefleet/cubefleet"
)

// ExternalMessage begins the message of every reference External reports.
const ExternalMessage = "not in this document: must exist on the server"

// External returns every reference in d to an object d does not define, in document order,
// each with the path of the referring field and a message "not in this document: must exist
// on the server (pool \"gpu\")": a pool's site and provider account, a flavor's pool, a
// template's pool and its flavor (a flavor of that pool). A document with such references is
// valid, since they may name objects the server already holds; fleet plan resolves them there,
// and `fleet validate --strict` treats them as errors. References to what a document never
// defines are not reported: an offer's tenant (tenants are made with `tenants create`) and
// secrets. nil when every reference resolves in d.
func (d *Document) External() []cubefleet.FieldError {
	if d == nil {
		return nil
	}
	sites := names(d.Sites, func(s Site) string { return s.Name })
	accounts := names(d.ProviderAccounts, func(a ProviderAccount) string { return a.Name })
	pools := names(d.Pools, func(p Pool) string { return p.Name })
	flavors := map[[2]string]bool{}
	for _, f := range d.Flavors {
		flavors[[2]string{f.Pool, f.Name}] = true
	}
	var out []cubefleet.FieldError
	ref := func(path, what, name string) {
		out = append(out, cubefleet.FieldError{Path: path, Message: fmt.Sprintf("%s (%s %s)", ExternalMessage, what, strconv.Quote(name))})
	}
	for i, p := range d.Pools {
		at := index("pools", i)
		if p.Site != "" && !sites[p.Site] {
			ref(join(at, "site"), "site", p.Site)
		}
		if p.ProviderAccount != "" && !accounts[p.ProviderAccount] {
			ref(join(at, "providerAccount"), "provider account", p.ProviderAccount)
		}
	}
	for i, f := range d.Flavors {
		if f.Pool != "" && !pools[f.Pool] {
			ref(join(index("flavors", i), "pool"), "pool", f.Pool)
		}
	}
	for i, t := range d.SandboxTemplates {
		at := index("sandboxTemplates", i)
		if t.Pool != "" && !pools[t.Pool] {
			ref(join(at, "pool"), "pool", t.Pool)
		}
		if t.Flavor != "" && !flavors[[2]string{t.Pool, t.Flavor}] {
			ref(join(at, "flavor"), "flavor", t.Pool+"/"+t.Flavor)
		}
	}
	return out
}

// names returns the set of the names of items.
func names[T any](items []T, name func(T) string) map[string]bool {
	set := make(map[string]bool, len(items))
	for _, it := range items {
		set[name(it)] = true
	}
	return set
}
