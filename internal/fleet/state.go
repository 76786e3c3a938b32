package fleet

import (
	"context"
	"fmt"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// state is everything a plan or export of one tenant reads, loaded in a handful of queries.
type state struct {
	tenantID string
	own      map[string][]*compute.Object // kind -> the tenant's live objects, by id
	// Indexes of own, so matching a document at the limits stays linear: kind -> name -> object
	// for provider accounts and templates; kind -> pool id -> objects for owner quotas, offers
	// and flavors (offered pools' flavors included). They point into the loaded objects, so a
	// plan of thousands of objects copies none.
	named    map[string]map[string]*compute.Object
	children map[string]map[string][]*compute.Object
	byID     map[string]*compute.Object // every loaded object, by id
	names    map[string]map[string]string
	idName   map[string]string // site/pool id -> fleet name
	tenants  map[string]bool
	secrets  map[string]bool // the tenant's secret names and ids, loaded on first use
	related  compute.Related
}

func loadState(ctx context.Context, q store.Querier, tenantID string) (*state, error) {
	objs, err := compute.LoadTenant(ctx, q, tenantID)
	if err != nil {
		return nil, err
	}
	st := &state{tenantID: tenantID, own: map[string][]*compute.Object{}, byID: make(map[string]*compute.Object, len(objs)), idName: map[string]string{}}
	st.named = map[string]map[string]*compute.Object{compute.KindProviderAccount: {}, compute.KindSandboxTemplate: {}}
	st.children = map[string]map[string][]*compute.Object{compute.KindOwnerQuota: {}, compute.KindOffer: {}, compute.KindFlavor: {}}
	for i := range objs {
		o := &objs[i]
		st.byID[o.ID] = o
		if o.Archived() {
			continue
		}
		st.own[o.Kind] = append(st.own[o.Kind], o)
		if byName, ok := st.named[o.Kind]; ok {
			byName[o.Name] = o
		}
		if byPool, ok := st.children[o.Kind]; ok {
			byPool[o.ParentID] = append(byPool[o.ParentID], o)
		}
	}
	if st.names, err = tenantNames(ctx, q, tenantID); err != nil {
		return nil, err
	}
	for _, byName := range st.names {
		for name, id := range byName {
			st.idName[id] = name
		}
	}
	if st.related, err = compute.LoadRelated(ctx, q, tenantID); err != nil {
		return nil, err
	}
	for _, list := range [][]compute.Object{st.related.Offers, st.related.OfferedPools, st.related.OfferedFlavors, st.related.ForeignTemplates} {
		for i := range list {
			st.byID[list[i].ID] = &list[i]
		}
	}
	for i := range st.related.OfferedFlavors {
		o := &st.related.OfferedFlavors[i]
		st.children[compute.KindFlavor][o.ParentID] = append(st.children[compute.KindFlavor][o.ParentID], o)
	}
	tenants, err := iam.ListTenants(ctx, q)
	if err != nil {
		return nil, err
	}
	st.tenants = make(map[string]bool, len(tenants))
	for _, t := range tenants {
		st.tenants[t.ID] = true
	}
	return st, nil
}

// hasSecret reports whether the tenant's secret store holds nameOrID, loading the tenant's
// secrets on first use.
func (st *state) hasSecret(ctx context.Context, q store.Querier, nameOrID string) (bool, error) {
	if st.secrets == nil {
		list, err := secrets.List(ctx, q, st.tenantID)
		if err != nil {
			return false, fmt.Errorf("load secrets: %w", err)
		}
		st.secrets = map[string]bool{}
		for _, s := range list {
			st.secrets[s.Name] = true
			st.secrets[s.ID] = true
		}
	}
	return st.secrets[nameOrID], nil
}

// ownName is the own name of loaded object id (a provider account, flavor or template), or ""
// when none was loaded.
func (st *state) ownName(id string) string {
	if o, ok := st.byID[id]; ok {
		return o.Name
	}
	return ""
}

// fleetName is the name a site or pool goes by in documents: its fleet name, else its id.
func (st *state) fleetName(id string) string {
	if n, ok := st.idName[id]; ok {
		return n
	}
	return id
}

// nameOf is the composite fleet name of any object: `<pool>/<flavor>`, `<pool> -> <tenant>`,
// `<pool>:<resource>`, or the object's own or fleet name.
func (st *state) nameOf(o *compute.Object) string {
	switch o.Kind {
	case compute.KindSite, compute.KindPool:
		return st.fleetName(o.ID)
	case compute.KindFlavor:
		return st.fleetName(o.ParentID) + "/" + o.Name
	case compute.KindOffer:
		var s compute.OfferSpec
		o.DecodeSpec(&s)
		return st.fleetName(o.ParentID) + " -> " + s.ToTenantID
	case compute.KindOwnerQuota:
		var s compute.OwnerQuotaSpec
		o.DecodeSpec(&s)
		return st.fleetName(o.ParentID) + ":" + s.Resource
	}
	return o.Name
}
