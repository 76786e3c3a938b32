package api

import (
	"context"
	"encoding/json"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
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
// compute:fleet:admin on compute-fleet/global; fleet.apply then decides, as the caller, every
// call of its plan (fleet.Applier runs the calls against compute itself).
func registerFleetMethods(r *Registry, d *deps) {
	planner := &fleet.Planner{Compute: d.compute, VaultConfigured: d.vaultConfigured, DriftIgnore: d.driftIgnore}
	applier := &fleet.Applier{DB: d.db, Planner: planner, Now: d.now, Log: d.log, AfterCheck: d.afterCheck, BeforeCall: d.beforeCall}
	r.Register(Method{
		Name: "fleet.export", Summary: "Export a tenant's fleet as a document", Permission: iam.PermFleetAdmin, Scope: OnFleet,
		Input: TenantInput{}, Output: fleet.Export{},
		Handle: Typed(func(ctx context.Context, c *Call, in TenantInput) (any, error) {
			return planner.Export(ctx, c.Q, in.TenantID)
		}),
	})
	r.Register(Method{
		Name: "fleet.plan", Summary: "Diff a document against a tenant's fleet (changes nothing)", Permission: iam.PermFleetAdmin, Scope: OnFleet,
		Input: fleetInput{}, Output: fleet.Plan{}, MaxBody: MaxDocumentBody,
		Handle: Typed(func(ctx context.Context, c *Call, in fleetInput) (any, error) {
			doc, err := in.document()
			if err != nil {
				return nil, err
			}
			return planner.Plan(ctx, c.Q, in.TenantID, doc, in.Prune)
		}),
	})
	r.Register(Method{
		Name: "fleet.apply", Summary: "Apply a document in one transaction (refuses a stale planHash)", Permission: iam.PermFleetAdmin, Scope: OnFleet,
		Write: true, Composite: true, Input: fleetInput{}, Output: fleet.ApplyResult{}, MaxBody: MaxDocumentBody,
		Handle: Typed(func(ctx context.Context, c *Call, in fleetInput) (any, error) {
			doc, err := in.document()
			if err != nil {
				return nil, err
			}
			return applier.Apply(ctx, c.Principal, fleet.ApplyInput{
				TenantID: in.TenantID, Document: doc, Prune: in.Prune, PlanHash: in.PlanHash, DenyDelete: in.DenyDelete, RequestID: c.RequestID,
				Audit: c.AuditEntry(),
			})
		}),
	})
	r.Register(Method{
		Name: "fleet.status", Summary: "The last applied document and the drift found since", Permission: iam.PermFleetAdmin, Scope: OnFleet,
		Input: statusInput{}, Output: fleet.Status{},
		Handle: Typed(func(ctx context.Context, c *Call, in statusInput) (any, error) {
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
			return st, nil
		}),
	})
}
