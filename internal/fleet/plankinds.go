package fleet

import (
	"slices"
	"sort"
	"strings"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
)

// ownByName finds the tenant's live provider account or template called name.
func (b *builder) ownByName(kind, name string) (*compute.Object, bool) {
	o, ok := b.st.named[kind][name]
	return o, ok
}

// flavorOn finds the live flavor called name on pool poolID (the tenant's own, or offered).
func (b *builder) flavorOn(poolID, name string) (*compute.Object, bool) {
	for _, o := range b.st.children[compute.KindFlavor][poolID] {
		if o.Name == name {
			return o, true
		}
	}
	return nil, false
}

// ownByFleetName finds the tenant's live site or pool called name: by fleet name, or by id when
// name is one.
func (b *builder) ownByFleetName(kind, name string) (*compute.Object, bool) {
	id, ok := b.st.names[kind][name]
	if !ok && cubefleet.IsID(name, kind) {
		id = name
	}
	o, found := b.st.byID[id]
	if !found || o.Kind != kind || o.TenantID != b.tenant || o.Archived() {
		return nil, false
	}
	return o, true
}

// removedByHand notes that a site or pool the document names is created again because the
// object that had its fleet name was removed outside fleet as code (a pool archived, a site
// deleted through the compute API): the apply gives the name to the new object.
func (b *builder) removedByHand(kind, name string, n *notes) {
	id, ok := b.st.names[kind][name]
	if !ok {
		return
	}
	how := "deleted"
	if o, found := b.st.byID[id]; found && o.Archived() {
		how = "archived"
	}
	n.note("recreates %s %s: %s %s was %s by hand; the new %s takes the name", kind, name, kind, id, how, kind)
}

func (b *builder) accounts(doc *document.Document) error {
	for _, d := range doc.ProviderAccounts {
		var n notes
		b.served(compute.KindProviderAccount, &n)
		if err := b.checkSecrets(d.Config, &n); err != nil {
			return err
		}
		desired := compute.ProviderAccountSpec{Provider: d.Provider, Config: d.Config}
		if o, ok := b.ownByName(compute.KindProviderAccount, d.Name); ok {
			b.matched[o.ID] = true
			b.accountRef[d.Name] = o.ID
			var cur compute.ProviderAccountSpec
			if err := o.DecodeSpec(&cur); err != nil {
				return err
			}
			var fixed []string
			if cur.Provider != d.Provider {
				fixed = append(fixed, "provider")
				n.block("provider cannot change (%s to %s): create a provider account with a new name", cur.Provider, d.Provider)
			}
			b.update(o, d.Name, grpAccountWrite, []string{"config"}, desired, cur, fixed, n)
			continue
		}
		b.accountRef[d.Name] = b.newRef(compute.KindProviderAccount, d.Name)
		b.change(n.apply(Change{Kind: compute.KindProviderAccount, Name: d.Name, Action: ActionCreate}), grpAccountWrite, b.createOp(compute.KindProviderAccount, d.Name, d.Name, desired))
	}
	return nil
}

func (b *builder) sites(doc *document.Document) error {
	for _, d := range doc.Sites {
		var n notes
		if o, ok := b.ownByFleetName(compute.KindSite, d.Name); ok {
			b.matched[o.ID] = true
			b.siteRef[d.Name] = o.ID
			var cur compute.SiteSpec
			if err := o.DecodeSpec(&cur); err != nil {
				return err
			}
			c := Change{Kind: compute.KindSite, Name: d.Name, Action: ActionUnchanged}
			want := compute.SiteSpec{Kind: d.Kind, Region: d.Region}
			if changed := diff([]string{"kind", "region"}, want, cur); len(changed) > 0 {
				c.Action, c.Fields, c.Diffs = ActionUpdate, changed, diffs(changed, want, cur)
				n.block("a site's kind and region cannot change: add a site with a new name")
			}
			b.change(n.apply(c), grpSiteCreate, nil)
			continue
		}
		if cubefleet.IsID(d.Name, "site") {
			n.block("no site %s in tenant %s", d.Name, b.tenant)
		}
		b.removedByHand(compute.KindSite, d.Name, &n)
		b.siteRef[d.Name] = b.newRef(compute.KindSite, d.Name)
		b.change(n.apply(Change{Kind: compute.KindSite, Name: d.Name, Action: ActionCreate}), grpSiteCreate, b.createOp(compute.KindSite, d.Name, "", compute.SiteSpec{Kind: d.Kind, Region: d.Region}))
	}
	return nil
}

// usedBy records that the document's item who references the existing object id, so a prune
// never removes it.
func (b *builder) usedBy(id, who string) {
	b.desiredRefs[id] = append(b.desiredRefs[id], who)
}

// resolveSite returns the id or key reference of the site a document names.
func (b *builder) resolveSite(name, who string) (string, bool) {
	if ref, ok := b.siteRef[name]; ok {
		return ref, true
	}
	if o, ok := b.ownByFleetName(compute.KindSite, name); ok {
		b.usedBy(o.ID, who)
		return o.ID, true
	}
	return "", false
}

func (b *builder) resolveAccount(name, who string) (string, bool) {
	if ref, ok := b.accountRef[name]; ok {
		return ref, true
	}
	if o, ok := b.ownByName(compute.KindProviderAccount, name); ok {
		b.usedBy(o.ID, who)
		return o.ID, true
	}
	return "", false
}

// resolveOwnPool returns the id or key reference of a pool of the tenant's a document names.
func (b *builder) resolveOwnPool(name, who string) (string, bool) {
	if ref, ok := b.poolRef[name]; ok {
		return ref, true
	}
	if o, ok := b.ownByFleetName(compute.KindPool, name); ok {
		b.usedBy(o.ID, who)
		return o.ID, true
	}
	return "", false
}

func (b *builder) pools(doc *document.Document) error {
	for _, d := range doc.Pools {
		var n notes
		siteID, ok := b.resolveSite(d.Site, "pool "+d.Name)
		if !ok {
			n.block("unknown site %s: add it to sites", d.Site)
		}
		accountID := ""
		if d.ProviderAccount != "" {
			if accountID, ok = b.resolveAccount(d.ProviderAccount, "pool "+d.Name); !ok {
				n.block("unknown provider account %s: add it to providerAccounts", d.ProviderAccount)
			}
		}
		var policy *compute.Policy
		if d.Policy != nil {
			policy = &compute.Policy{DisruptionBudget: d.Policy.DisruptionBudget, EgressAllow: d.Policy.EgressAllow}
		}
		desired := compute.PoolSpec{SiteID: siteID, Class: d.Class, GPUModel: d.GPUModel, Policy: policy, ProviderAccountID: accountID}
		poolID := ""
		if o, found := b.ownByFleetName(compute.KindPool, d.Name); found {
			b.matched[o.ID] = true
			poolID = o.ID
			b.poolRef[d.Name] = o.ID
			var cur compute.PoolSpec
			if err := o.DecodeSpec(&cur); err != nil {
				return err
			}
			var fixed []string
			if siteID != "" && cur.SiteID != siteID {
				fixed = append(fixed, "site")
			}
			if cur.Class != d.Class {
				fixed = append(fixed, "class")
			}
			if d.ProviderAccount == "" && cur.ProviderAccountID != "" || accountID != "" && cur.ProviderAccountID != accountID {
				fixed = append(fixed, "providerAccount")
			}
			if len(fixed) > 0 {
				n.block("a pool's %s cannot change: create a pool with a new name", strings.Join(fixed, ", "))
			}
			b.update(o, d.Name, grpPoolUpdateQuota, []string{"gpuModel", "policy"}, desired, cur, fixed, n)
		} else {
			if cubefleet.IsID(d.Name, "pool") {
				n.block("no pool %s in tenant %s", d.Name, b.tenant)
			}
			b.removedByHand(compute.KindPool, d.Name, &n)
			b.poolRef[d.Name] = b.newRef(compute.KindPool, d.Name)
			b.change(n.apply(Change{Kind: compute.KindPool, Name: d.Name, Action: ActionCreate}), grpPoolCreate, b.createOp(compute.KindPool, d.Name, "", desired))
		}
		if err := b.quotas(d, poolID); err != nil {
			return err
		}
		if err := b.offers(d, poolID); err != nil {
			return err
		}
	}
	return nil
}

// children returns the tenant's live objects of kind under poolID, by unique name.
func (b *builder) children(kind, poolID string, name func(*compute.Object) string) map[string]*compute.Object {
	out := map[string]*compute.Object{}
	if poolID == "" {
		return out
	}
	for _, o := range b.st.children[kind][poolID] {
		out[name(o)] = o
	}
	return out
}

func unenforced(n *notes, quota map[string]int64) {
	var keys []string
	for k := range quota {
		if !compute.EnforcedResources[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		n.note("nothing enforces quota key %s (only vcpu, memoryGiB, diskGiB, gpu, sandboxes are enforced)", k)
	}
}

func (b *builder) quotas(d document.Pool, poolID string) error {
	existing := b.children(compute.KindOwnerQuota, poolID, func(o *compute.Object) string {
		var s compute.OwnerQuotaSpec
		o.DecodeSpec(&s)
		return s.Resource
	})
	resources := make([]string, 0, len(d.OwnerQuota))
	for r := range d.OwnerQuota {
		resources = append(resources, r)
	}
	sort.Strings(resources)
	for _, r := range resources {
		name := d.Name + ":" + r
		var n notes
		unenforced(&n, map[string]int64{r: 0})
		if o, ok := existing[r]; ok {
			b.matched[o.ID] = true
			var cur compute.OwnerQuotaSpec
			if err := o.DecodeSpec(&cur); err != nil {
				return err
			}
			b.update(o, name, grpPoolUpdateQuota, []string{"max"}, compute.OwnerQuotaSpec{Max: d.OwnerQuota[r]}, compute.OwnerQuotaSpec{Max: cur.Max}, nil, n)
			continue
		}
		spec := compute.OwnerQuotaSpec{PoolID: b.poolRef[d.Name], Resource: r, Max: d.OwnerQuota[r]}
		b.change(n.apply(Change{Kind: compute.KindOwnerQuota, Name: name, Action: ActionCreate}), grpPoolUpdateQuota, b.createOp(compute.KindOwnerQuota, name, "", spec))
	}
	return nil
}

func (b *builder) offers(d document.Pool, poolID string) error {
	existing := b.children(compute.KindOffer, poolID, func(o *compute.Object) string {
		var s compute.OfferSpec
		o.DecodeSpec(&s)
		return s.ToTenantID
	})
	for _, off := range d.Offers {
		name := d.Name + " -> " + off.Tenant
		var n notes
		if off.Tenant == b.tenant {
			n.block("a pool cannot be offered to its own owner (%s)", b.tenant)
		} else if !b.st.tenants[off.Tenant] {
			n.block("tenant %s does not exist: create it with `cubefleet tenants create %s`", off.Tenant, off.Tenant)
		}
		unenforced(&n, off.Quota)
		desired := compute.OfferSpec{Quota: off.Quota, Priority: off.Priority}
		if o, ok := existing[off.Tenant]; ok {
			b.matched[o.ID] = true
			var cur compute.OfferSpec
			if err := o.DecodeSpec(&cur); err != nil {
				return err
			}
			b.update(o, name, grpOfferWrite, []string{"quota", "priority"}, desired, cur, nil, n)
			continue
		}
		spec := compute.OfferSpec{PoolID: b.poolRef[d.Name], ToTenantID: off.Tenant, Quota: off.Quota, Priority: off.Priority}
		b.change(n.apply(Change{Kind: compute.KindOffer, Name: name, Action: ActionCreate}), grpOfferWrite, b.createOp(compute.KindOffer, name, "", spec))
	}
	return nil
}

func (b *builder) flavors(doc *document.Document) error {
	for _, d := range doc.Flavors {
		name := d.Pool + "/" + d.Name
		var n notes
		b.served(compute.KindFlavor, &n)
		poolRef, ok := b.resolveOwnPool(d.Pool, "flavor "+name)
		if !ok {
			n.block("unknown pool %s: flavors are sold on the tenant's own pools", d.Pool)
		}
		desired := compute.FlavorSpec{PoolID: poolRef, VCPU: d.VCPU, MemoryGiB: d.MemoryGiB, DiskGiB: d.DiskGiB, GPU: d.GPU}
		var existing *compute.Object
		found := false
		if ok && cubefleet.IsID(poolRef, "pool") {
			existing, found = b.flavorOn(poolRef, d.Name)
			found = found && existing.TenantID == b.tenant
		}
		if found {
			b.matched[existing.ID] = true
			b.flavorRef[poolRef+"/"+d.Name] = existing.ID
			var cur compute.FlavorSpec
			if err := existing.DecodeSpec(&cur); err != nil {
				return err
			}
			var fixed []string
			if cur.GPU != d.GPU {
				fixed = append(fixed, "gpu")
				n.block("a flavor's gpu count cannot change: create a flavor with a new name")
			}
			b.update(existing, name, grpFlavorWrite, []string{"vcpu", "memoryGiB", "diskGiB"}, desired, cur, fixed, n)
			continue
		}
		b.flavorRef[poolRef+"/"+d.Name] = b.newRef(compute.KindFlavor, name)
		b.change(n.apply(Change{Kind: compute.KindFlavor, Name: name, Action: ActionCreate}), grpFlavorWrite, b.createOp(compute.KindFlavor, name, d.Name, desired))
	}
	return nil
}

// resolveTemplatePool returns the reference of a template's pool: one of the tenant's own, or
// (by id) a pool offered to the tenant.
func (b *builder) resolveTemplatePool(name, who string) (string, bool) {
	if ref, ok := b.resolveOwnPool(name, who); ok {
		return ref, true
	}
	for _, o := range b.st.related.OfferedPools {
		if o.ID == name && !o.Archived() {
			b.usedBy(o.ID, who)
			return o.ID, true
		}
	}
	return "", false
}

// offeredEgress blocks template d when poolRef is a pool offered to the tenant and an entry of
// d's egressAllow lies outside that pool's policy.egressAllow: the pool's owner decides it, so
// no document of this tenant can fix it. Of the tenant's own pools the document is checked by
// Validate and the stored state by apply (compute.Service.CheckEgress).
func (b *builder) offeredEgress(poolRef string, d document.SandboxTemplate, n *notes) error {
	if len(d.EgressAllow) == 0 {
		return nil
	}
	for _, o := range b.st.related.OfferedPools {
		if o.ID != poolRef {
			continue
		}
		var ps compute.PoolSpec
		if err := o.DecodeSpec(&ps); err != nil {
			return err
		}
		var policy []string
		if ps.Policy != nil {
			policy = ps.Policy.EgressAllow
		}
		for _, i := range fieldrules.EgressOutside(d.EgressAllow, policy) {
			n.block("egressAllow[%d]: %s", i, fieldrules.EgressOutsidePolicy(d.EgressAllow[i], poolRef, policy))
		}
	}
	return nil
}

func (b *builder) resolveFlavor(poolRef, name, who string) (string, bool) {
	if ref, ok := b.flavorRef[poolRef+"/"+name]; ok {
		return ref, true
	}
	if o, ok := b.flavorOn(poolRef, name); ok {
		b.usedBy(o.ID, who)
		return o.ID, true
	}
	return "", false
}

func (b *builder) templates(doc *document.Document) error {
	for _, d := range doc.SandboxTemplates {
		var n notes
		b.served(compute.KindSandboxTemplate, &n)
		if err := b.checkSecrets(d.Env, &n); err != nil {
			return err
		}
		who := "sandboxTemplate " + d.Name
		poolRef, ok := b.resolveTemplatePool(d.Pool, who)
		flavorRef := ""
		if !ok {
			n.block("unknown pool %s: name one of the tenant's pools, or the id of a pool offered to it", d.Pool)
		} else if flavorRef, ok = b.resolveFlavor(poolRef, d.Flavor, who); !ok {
			n.block("unknown flavor %s on pool %s: add it to flavors", d.Flavor, d.Pool)
		}
		if err := b.offeredEgress(poolRef, d, &n); err != nil {
			return err
		}
		var warm *compute.Warm
		if d.Warm != nil {
			warm = &compute.Warm{Min: d.Warm.Min, Max: d.Warm.Max}
		}
		desired := compute.SandboxTemplateSpec{PoolID: poolRef, FlavorID: flavorRef, ImageID: d.ImageID, Env: d.Env, Network: d.Network, Warm: warm, TerminationGraceSeconds: d.TerminationGraceSeconds,
			DisconnectGraceSeconds: d.DisconnectGraceSeconds, Runtime: d.Runtime, EgressAllow: d.EgressAllow}
		if o, found := b.ownByName(compute.KindSandboxTemplate, d.Name); found {
			b.matched[o.ID] = true
			var cur compute.SandboxTemplateSpec
			if err := o.DecodeSpec(&cur); err != nil {
				return err
			}
			if flavorRef == "" {
				desired.FlavorID = cur.FlavorID // unresolved: the block says which flavor and why, not a null
			}
			var fixed []string
			if poolRef != "" && cur.PoolID != poolRef {
				fixed = append(fixed, "pool")
				n.block("a template's pool cannot change: create a template with a new name")
			}
			b.update(o, d.Name, grpTemplateWrite, []string{"flavorId", "imageId", "env", "network", "warm", "terminationGraceSeconds", "disconnectGraceSeconds", "runtime", "egressAllow"}, desired, cur, fixed, n)
			continue
		}
		b.change(n.apply(Change{Kind: compute.KindSandboxTemplate, Name: d.Name, Action: ActionCreate}), grpTemplateWrite, b.createOp(compute.KindSandboxTemplate, d.Name, d.Name, desired))
	}
	return nil
}

// unnamed returns the tenant's objects the document leaves out that prune removes: every kind
// this deployment serves except sites (fleet never deletes a site), by fleet name.
func (b *builder) unnamed() []*compute.Object {
	var gone []*compute.Object
	for _, k := range compute.Kinds {
		for _, o := range b.st.own[k.Kind] {
			if b.matched[o.ID] || k.Kind == compute.KindSite || (b.p.Compute != nil && !b.p.Compute.Serves(k.Kind)) {
				continue
			}
			gone = append(gone, o)
		}
	}
	sort.SliceStable(gone, func(i, j int) bool { return b.st.nameOf(gone[i]) < b.st.nameOf(gone[j]) })
	return gone
}

// pruneUnnamed plans the removal of the tenant's objects the document leaves out: sites are
// never removed (a note says so); every other kind is deleted (pools archived) unless a kept
// object still references it.
func (b *builder) pruneUnnamed() {
	b.deleted = map[string]bool{}
	gone := b.unnamed()
	for _, o := range gone {
		b.deleted[o.ID] = true
	}
	kept := map[string][]string{} // referenced id -> names of kept referrers
	for _, list := range b.st.own {
		for _, o := range list {
			if b.deleted[o.ID] {
				continue
			}
			for _, r := range o.Refs {
				if r != "" {
					kept[r] = append(kept[r], o.Kind+" "+b.st.nameOf(o))
				}
			}
		}
	}
	for _, o := range b.st.related.ForeignTemplates {
		for _, r := range o.Refs {
			kept[r] = append(kept[r], "tenant "+o.TenantID+"'s sandboxTemplate "+o.Name)
		}
	}
	for id, users := range b.desiredRefs {
		kept[id] = append(kept[id], users...)
	}
	for _, o := range b.st.own[compute.KindSite] {
		if !b.matched[o.ID] {
			b.changes = append(b.changes, Change{Kind: compute.KindSite, Name: b.st.nameOf(o), Action: ActionUnchanged,
				Note: "not in the document; fleet never deletes a site"})
		}
	}
	for _, o := range gone {
		name := b.st.nameOf(o)
		var n notes
		if users := kept[o.ID]; len(users) > 0 {
			slices.Sort(users)
			n.block("still used by %s", users[0])
		}
		if o.Kind == compute.KindOffer {
			b.blockUnofferInUse(o, &n)
		}
		info, _ := compute.Info(o.Kind)
		b.change(n.apply(Change{Kind: o.Kind, Name: name, Action: ActionDelete}), deleteGroup(o.Kind), b.refOp(info.RemoveVerb, o))
	}
}

// blockUnofferInUse blocks withdrawing an offer while the offered tenant has templates on the
// pool.
func (b *builder) blockUnofferInUse(offer *compute.Object, n *notes) {
	var s compute.OfferSpec
	offer.DecodeSpec(&s)
	for _, t := range b.st.related.ForeignTemplates {
		if t.TenantID == s.ToTenantID && t.Refs[0] == offer.ParentID {
			n.block("tenant %s still has sandboxTemplate %s on this pool", t.TenantID, t.Name)
			return
		}
	}
}

func deleteGroup(kind string) int {
	switch kind {
	case compute.KindSandboxTemplate:
		return grpTemplateDelete
	case compute.KindFlavor:
		return grpFlavorDelete
	case compute.KindOffer:
		return grpOfferDelete
	case compute.KindPool:
		return grpPoolArchive
	case compute.KindProviderAccount:
		return grpAccountDelete
	}
	return grpPoolUpdateQuota // owner quotas go with pool updates and quotas
}
