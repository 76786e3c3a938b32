package api

import (
	"context"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
)

// fleetDocument decodes the document of a fleet.plan or fleet.apply input.
func fleetDocument(in contract.FleetInput) (*document.Document, error) {
	if len(in.Config) == 0 {
		return nil, cubefleet.Invalid("config", "config is required: the fleet document")
	}
	return document.Decode(in.Config)
}

// registerFleetMethods adds fleet.export, fleet.plan, fleet.apply and fleet.status. Each decides
// compute:fleet:admin on compute-fleet/global; fleet.apply then decides, as the caller, every
// call of its plan (fleet.Applier runs the calls against compute itself).
func registerFleetMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "fleet.export", Handle: Typed(d.fleetExport)})
	r.Register(Method{Name: "fleet.plan", Handle: Typed(d.fleetPlan)})
	r.Register(Method{Name: "fleet.apply", Composite: true, Handle: Typed(d.fleetApply)})
	r.Register(Method{Name: "fleet.status", Handle: Typed(d.fleetStatus)})
}

// fleetExport is the handler of fleet.export.
func (d *deps) fleetExport(ctx context.Context, c *Call, in TenantInput) (any, error) {
	e, err := d.planner.Export(ctx, c.Q, in.TenantID)
	if err != nil {
		return nil, err
	}
	return fleetExportFrom(*e), nil
}

// fleetPlan is the handler of fleet.plan.
func (d *deps) fleetPlan(ctx context.Context, c *Call, in contract.FleetInput) (any, error) {
	doc, err := fleetDocument(in)
	if err != nil {
		return nil, err
	}
	p, err := d.planner.Plan(ctx, c.Q, in.TenantID, doc, in.Prune)
	if err != nil {
		return nil, err
	}
	return fleetPlanFrom(*p), nil
}

// fleetApply is the handler of fleet.apply.
func (d *deps) fleetApply(ctx context.Context, c *Call, in contract.FleetInput) (any, error) {
	doc, err := fleetDocument(in)
	if err != nil {
		return nil, err
	}
	res, err := d.applier.Apply(ctx, c.Principal, fleet.ApplyInput{
		TenantID: in.TenantID, Document: doc, Prune: in.Prune, PlanHash: in.PlanHash, DenyDelete: in.DenyDelete, RequestID: c.RequestID,
		Audit: c.AuditEntry(),
	})
	if err != nil {
		return nil, err
	}
	return fleetApplyResultFrom(*res), nil
}

// fleetStatus is the handler of fleet.status.
func (d *deps) fleetStatus(ctx context.Context, c *Call, in contract.FleetStatusInput) (any, error) {
	now := d.now()
	var st *fleet.Status
	var err error
	if in.Check {
		st, err = d.planner.CheckDrift(ctx, d.db, in.TenantID, now)
	} else {
		st, err = d.planner.Status(ctx, c.Q, in.TenantID)
	}
	if err != nil {
		return nil, err
	}
	st.Now = now.UnixMilli()
	return fleetStatusFrom(*st), nil
}
