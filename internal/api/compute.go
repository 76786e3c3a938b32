package api

import (
	"context"
	"encoding/json"
	"fmt"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/compute"
)

// registerComputeMethods registers compute.<api>.<verb> for every kind in compute.Kinds and
// every verb of its kind (compute.KindInfo.Verbs: create, get, list, update for kinds with
// updatable fields, and delete or archive), each deciding the kind's permission of the verb
// (compute.KindInfo.Permission: compute:<api>:<verb>) on tenant/<tenantId>; the contract
// declares each (contract.Methods). Kinds of a disabled module stay registered and answer
// UNSUPPORTED.
func registerComputeMethods(r *Registry, d *deps) {
	for _, info := range compute.Kinds {
		kind := info.Kind
		for _, verb := range info.Verbs() {
			m := Method{Name: info.Method(verb)}
			switch verb {
			case compute.VerbCreate:
				m.Handle = func(ctx context.Context, c *Call, in json.RawMessage) (any, error) {
					return objectAnswer(d.compute.Create(ctx, c.Q, kind, c.Principal.ID, in))
				}
			case compute.VerbGet:
				m.Handle = Typed(func(ctx context.Context, c *Call, in contract.ObjectRef) (any, error) {
					return objectAnswer(d.compute.Get(ctx, c.Q, kind, refOf(in)))
				})
			case compute.VerbList:
				m.Handle = Typed(func(ctx context.Context, c *Call, in contract.ListInput) (any, error) {
					page, err := d.compute.List(ctx, c.Q, kind, compute.ListInput{TenantID: in.TenantID, Limit: in.Limit, Cursor: in.Cursor,
						PoolID: in.PoolID, IncludeArchived: in.IncludeArchived})
					if err != nil {
						return nil, err
					}
					return objectList(page)
				})
			case compute.VerbUpdate:
				m.Handle = func(ctx context.Context, c *Call, in json.RawMessage) (any, error) {
					return objectAnswer(d.compute.Update(ctx, c.Q, kind, c.Principal.ID, in))
				}
			case info.RemoveVerb:
				m.Handle = Typed(func(ctx context.Context, c *Call, in contract.ObjectRef) (any, error) {
					return objectAnswer(d.compute.Remove(ctx, c.Q, kind, refOf(in)))
				})
			}
			r.Register(m)
		}
	}
}

func refOf(in contract.ObjectRef) compute.Ref {
	return compute.Ref{TenantID: in.TenantID, ID: in.ID, Revision: in.Revision}
}

// objectAnswer is a create's, get's, update's or remove's answer: the object as the contract
// shows it, naming it in the audit row.
func objectAnswer(o compute.Object, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	v, err := objectOf(o)
	if err != nil {
		return nil, err
	}
	return audited{out: v, target: o.ID}, nil
}

// objectList is a list's page with each object as the contract shows it (items null when
// the page's are).
func objectList(page compute.ListOutput) (any, error) {
	var items []any
	if page.Items != nil {
		items = make([]any, len(page.Items))
	}
	for i, o := range page.Items {
		v, err := objectOf(o)
		if err != nil {
			return nil, err
		}
		items[i] = v
	}
	return contract.ObjectList[any]{Items: items, NextCursor: page.NextCursor}, nil
}

// objectOf returns o as the contract shows its kind (contract.Site, contract.Pool, ...): its
// metadata, and its stored spec decoded into the kind's contract spec type.
func objectOf(o compute.Object) (any, error) {
	meta := contract.ObjectMeta{ID: o.ID, TenantID: o.TenantID, Name: o.Name, Revision: o.Revision, IdempotencyKey: o.IdempotencyKey,
		CreatedBy: o.CreatedBy, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, ArchivedAt: o.ArchivedAt}
	var v any
	var spec any
	switch o.Kind {
	case compute.KindSite:
		x := &contract.Site{ObjectMeta: meta}
		v, spec = x, &x.SiteSpec
	case compute.KindProviderAccount:
		x := &contract.ProviderAccount{ObjectMeta: meta}
		v, spec = x, &x.ProviderAccountSpec
	case compute.KindPool:
		x := &contract.Pool{ObjectMeta: meta}
		v, spec = x, &x.PoolSpec
	case compute.KindOwnerQuota:
		x := &contract.OwnerQuota{ObjectMeta: meta}
		v, spec = x, &x.OwnerQuotaSpec
	case compute.KindOffer:
		x := &contract.Offer{ObjectMeta: meta}
		v, spec = x, &x.OfferSpec
	case compute.KindFlavor:
		x := &contract.Flavor{ObjectMeta: meta}
		v, spec = x, &x.FlavorSpec
	case compute.KindSandboxTemplate:
		x := &contract.SandboxTemplate{ObjectMeta: meta}
		v, spec = x, &x.SandboxTemplateSpec
	default:
		return nil, fmt.Errorf("object %s has the unknown kind %q", o.ID, o.Kind)
	}
	if err := o.DecodeSpec(spec); err != nil {
		return nil, err
	}
	return v, nil
}
