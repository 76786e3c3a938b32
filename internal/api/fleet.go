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
	planner := &fleet.Planner{Compute: d.compute, VaultConfigured: d.vaultConfigured, DriftIgnore: d.driftIgnore}
	applier := &fleet.Applier{DB: d.db, Planner: planner, Now: d.now, Log: d.log, AfterCheck: d.afterCheck, BeforeCall: d.beforeCall}
	r.Register(Method{
		Name: "fleet.export",
		Handle: Typed(func(ctx context.Context, c *Call, in TenantInput) (any, error) {
			e, err := planner.Export(ctx, c.Q, in.TenantID)
			if err != nil {
				return nil, err
			}
			return fleetExportFrom(*e), nil
		}),
	})
	r.Register(Method{
		Name: "fleet.plan",
		Handle: Typed(func(ctx context.Context, c *Call, in contract.FleetInput) (any, error) {
			doc, err := fleetDocument(in)
			if err != nil {
				return nil, err
			}
			p, err := planner.Plan(ctx, c.Q, in.TenantID, doc, in.Prune)
			if err != nil {
				return nil, err
			}
			return fleetPlanFrom(*p), nil
		}),
	})
	r.Register(Method{
		Name: "fleet.apply", Composite: true,
		Handle: Typed(func(ctx context.Context, c *Call, in contract.FleetInput) (any, error) {
			doc, err := fleetDocument(in)
			if err != nil {
				return nil, err
			}
			res, err := applier.Apply(ctx, c.Principal, fleet.ApplyInput{
				TenantID: in.TenantID, Document: doc, Prune: in.Prune, PlanHash: in.PlanHash, DenyDelete: in.DenyDelete, RequestID: c.RequestID,
				Audit: c.AuditEntry(),
			})
			if err != nil {
				return nil, err
			}
			return fleetApplyResultFrom(*res), nil
		}),
	})
	r.Register(Method{
		Name: "fleet.status",
		Handle: Typed(func(ctx context.Context, c *Call, in contract.FleetStatusInput) (any, error) {
			now := d.now()
			var st *fleet.Status
			var err error
			if in.Check {
				st, err = planner.CheckDrift(ctx, d.db, in.TenantID, now)
			} else {
				st, err = planner.Status(ctx, c.Q, in.TenantID)
			}
			if err != nil {
				return nil, err
			}
			st.Now = now.UnixMilli()
			return fleetStatusFrom(*st), nil
		}),
	})
}
