package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
)

// fleetInput is the input of fleet.plan and fleet.apply (fleet spec, "Plan" and "Apply").
type fleetInput struct {
	TenantID   string          `json:"tenantId"`
	Config     json.RawMessage `json:"config"`
	Prune      bool            `json:"prune,omitempty"`
	PlanHash   string          `json:"planHash,omitempty"`   // apply only
	DenyDelete bool            `json:"denyDelete,omitempty"` // apply only
}

func (in fleetInput) document() (*document.Document, error) {
	if len(in.Config) == 0 {
		return nil, cubefleet.Invalid("config", "config is required: the fleet document")
	}
	return document.Decode(in.Config)
}

// statusInput is fleet.status's input: Check runs a drift check now (as the reconciler does
// every --drift-every) and records it before answering.
type statusInput struct {
	TenantID string `json:"tenantId"`
	Check    bool   `json:"check,omitempty"`
}

// registerFleetMethods adds fleet.export, fleet.plan, fleet.apply and fleet.status. Each decides
// compute:fleet:admin on compute-fleet/global; fleet.apply then decides every call of its plan.
func registerFleetMethods(r *api.Registry, d *deps) {
	planner := &fleet.Planner{Compute: d.compute, VaultConfigured: d.vaultAddr != ""}
	decide := api.OnFleet(iam.PermFleetAdmin)
	applier := &fleet.Applier{DB: d.db, Planner: planner, Calls: r, Now: d.now,
		AfterCheck: func() {
			if d.afterCheck != nil {
				d.afterCheck()
			}
		},
		BeforeCall: func(i int) error {
			if d.beforeCall != nil {
				return d.beforeCall(i)
			}
			return nil
		},
	}
	r.Register(api.Method{
		Name: "fleet.export", Summary: "Export a tenant's fleet as a document", Decide: decide,
		Input: api.TenantInput{}, Output: fleet.Export{},
		Handle: api.Typed(func(ctx context.Context, c *api.Call, in api.TenantInput) (any, error) {
			return planner.Export(ctx, c.Q, in.TenantID)
		}),
	})
	r.Register(api.Method{
		Name: "fleet.plan", Summary: "Diff a document against a tenant's fleet (changes nothing)", Decide: decide,
		Input: fleetInput{}, Output: fleet.Plan{},
		Handle: api.Typed(func(ctx context.Context, c *api.Call, in fleetInput) (any, error) {
			doc, err := in.document()
			if err != nil {
				return nil, err
			}
			return planner.Plan(ctx, c.Q, in.TenantID, doc, in.Prune)
		}),
	})
	r.Register(api.Method{
		Name: "fleet.apply", Summary: "Apply a document in one transaction (refuses a stale planHash)", Decide: decide,
		Write: true, Composite: true, Input: fleetInput{}, Output: fleet.ApplyResult{},
		Handle: api.Typed(func(ctx context.Context, c *api.Call, in fleetInput) (any, error) {
			doc, err := in.document()
			if err != nil {
				return nil, err
			}
			a := *applier
			a.OnApplied = func(ctx context.Context, tx store.Querier, res *fleet.ApplyResult) error {
				dec := api.Decision{Permission: iam.PermFleetAdmin, Scope: iam.ScopeFleet, TenantID: in.TenantID}
				return r.Audit(ctx, tx, c, "fleet.apply", dec, in.TenantID, fmt.Sprintf("applied %d calls, plan %s", res.Applied, res.Plan.PlanHash))
			}
			return a.Apply(ctx, c.Principal, fleet.ApplyInput{
				TenantID: in.TenantID, Document: doc, Prune: in.Prune, PlanHash: in.PlanHash, DenyDelete: in.DenyDelete, RequestID: c.RequestID,
			})
		}),
	})
	r.Register(api.Method{
		Name: "fleet.status", Summary: "The last applied document and the drift found since", Decide: decide,
		Input: statusInput{}, Output: fleet.Status{},
		Handle: api.Typed(func(ctx context.Context, c *api.Call, in statusInput) (any, error) {
			if in.Check {
				return planner.CheckDrift(ctx, d.db, in.TenantID, d.now())
			}
			return fleet.LoadStatus(ctx, c.Q, in.TenantID)
		}),
	})
}
