package fleet

import (
	"context"
	"sort"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Missing is an object an export left out because this deployment does not serve its kind.
type Missing struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Export is fleet.export's result: the tenant's fleet as a document, and what it left out.
type Export struct {
	Config  *document.Document `json:"config"`
	Missing []Missing          `json:"missing"`
}

// Export renders tenantID's live objects as a document (fleet spec, "Names instead of ids"):
// sites and pools by fleet name or, when fleet did not create them, by id; a template on a pool
// offered to the tenant names that pool by id. Planning the export against the same fleet
// changes nothing.
func (p *Planner) Export(ctx context.Context, q store.Querier, tenantID string) (*Export, error) {
	st, err := loadState(ctx, q, tenantID)
	if err != nil {
		return nil, err
	}
	doc := &document.Document{Version: 1}
	out := &Export{Config: doc, Missing: []Missing{}}
	skip := func(o *compute.Object) bool {
		if p.Compute == nil || p.Compute.Serves(o.Kind) {
			return false
		}
		out.Missing = append(out.Missing, Missing{Kind: o.Kind, Name: st.nameOf(o), Reason: noSandboxes})
		return true
	}
	for _, o := range st.own[compute.KindSite] {
		var s compute.SiteSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		doc.Sites = append(doc.Sites, document.Site{Name: st.nameOf(o), Kind: s.Kind, Region: s.Region})
	}
	for _, o := range st.own[compute.KindProviderAccount] {
		if skip(o) {
			continue
		}
		var s compute.ProviderAccountSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		doc.ProviderAccounts = append(doc.ProviderAccounts, document.ProviderAccount{Name: o.Name, Provider: s.Provider, Config: s.Config})
	}
	quotas := map[string]map[string]int64{}
	for _, o := range st.own[compute.KindOwnerQuota] {
		var s compute.OwnerQuotaSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		if quotas[s.PoolID] == nil {
			quotas[s.PoolID] = map[string]int64{}
		}
		quotas[s.PoolID][s.Resource] = s.Max
	}
	offers := map[string][]document.Offer{}
	for _, o := range st.own[compute.KindOffer] {
		var s compute.OfferSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		offers[s.PoolID] = append(offers[s.PoolID], document.Offer{Tenant: s.ToTenantID, Quota: s.Quota, Priority: s.Priority})
	}
	for _, o := range st.own[compute.KindPool] {
		var s compute.PoolSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		pool := document.Pool{Name: st.nameOf(o), Site: st.fleetName(s.SiteID), Class: s.Class, GPUModel: s.GPUModel,
			OwnerQuota: quotas[o.ID], Offers: offers[o.ID]}
		if s.Policy != nil {
			pool.Policy = &document.Policy{DisruptionBudget: s.Policy.DisruptionBudget, EgressAllow: s.Policy.EgressAllow}
		}
		if s.ProviderAccountID != "" {
			pool.ProviderAccount = st.ownName(s.ProviderAccountID)
		}
		sort.Slice(pool.Offers, func(i, j int) bool { return pool.Offers[i].Tenant < pool.Offers[j].Tenant })
		doc.Pools = append(doc.Pools, pool)
	}
	for _, o := range st.own[compute.KindFlavor] {
		if skip(o) {
			continue
		}
		var s compute.FlavorSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		doc.Flavors = append(doc.Flavors, document.Flavor{Pool: st.fleetName(s.PoolID), Name: o.Name, VCPU: s.VCPU, MemoryGiB: s.MemoryGiB, DiskGiB: s.DiskGiB, GPU: s.GPU})
	}
	for _, o := range st.own[compute.KindSandboxTemplate] {
		if skip(o) {
			continue
		}
		var s compute.SandboxTemplateSpec
		if err := o.DecodeSpec(&s); err != nil {
			return nil, err
		}
		t := document.SandboxTemplate{Name: o.Name, Pool: st.fleetName(s.PoolID), Flavor: st.ownName(s.FlavorID), ImageID: s.ImageID, Env: s.Env, Network: s.Network, TerminationGraceSeconds: s.TerminationGraceSeconds,
			DisconnectGraceSeconds: s.DisconnectGraceSeconds, Runtime: s.Runtime, EgressAllow: s.EgressAllow}
		if pool, ok := st.byID[s.PoolID]; ok && pool.TenantID != tenantID {
			t.Pool = pool.ID
		}
		if s.Warm != nil {
			t.Warm = &document.Warm{Min: s.Warm.Min, Max: s.Warm.Max}
		}
		doc.SandboxTemplates = append(doc.SandboxTemplates, t)
	}
	sortDocument(doc)
	return out, nil
}

func sortDocument(d *document.Document) {
	sort.Slice(d.Sites, func(i, j int) bool { return d.Sites[i].Name < d.Sites[j].Name })
	sort.Slice(d.ProviderAccounts, func(i, j int) bool { return d.ProviderAccounts[i].Name < d.ProviderAccounts[j].Name })
	sort.Slice(d.Pools, func(i, j int) bool { return d.Pools[i].Name < d.Pools[j].Name })
	sort.Slice(d.Flavors, func(i, j int) bool {
		return d.Flavors[i].Pool+"/"+d.Flavors[i].Name < d.Flavors[j].Pool+"/"+d.Flavors[j].Name
	})
	sort.Slice(d.SandboxTemplates, func(i, j int) bool { return d.SandboxTemplates[i].Name < d.SandboxTemplates[j].Name })
}
