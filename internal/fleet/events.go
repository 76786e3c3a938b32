package fleet

import (
	"encoding/json"
	"time"

	"github.com/cubefleet/cubefleet/internal/events"
)

// The fleet's event types (fleet spec, "Drift"). Both have the subject fleet/<tenant> and belong
// to that tenant.
const (
	// EventDrifted is published once per distinct drift: when a check finds drift whose
	// PlanHash differs from the drift recorded before (none, or another).
	EventDrifted = "fleet.drifted"
	// EventConverged is published when a check finds no drift where drift was recorded: the
	// fleet came back to the applied document on its own. Applying the document again clears
	// the drift with EventApplied instead.
	EventConverged = "fleet.converged"
	// EventApplied is published when an apply replaces a document whose last check found drift:
	// the drift was cleared by the apply (a pager wired to fleet.drifted can resolve on it).
	EventApplied = "fleet.applied"
)

// EventTypes lists the fleet's event types.
var EventTypes = []string{EventDrifted, EventConverged, EventApplied}

// DriftedEvent is the data of a fleet.drifted event: the tenant, the planHash of the applied
// document's plan (AppliedPlanHash), and the drift found (changes, at most MaxDriftChanges;
// summary; blocked; and the drift plan's hash, PlanHash).
type DriftedEvent struct {
	TenantID        string `json:"tenantId"`
	AppliedPlanHash string `json:"appliedPlanHash"`
	Drift
}

// ConvergedEvent is the data of a fleet.converged event: the tenant, the applied planHash and
// the hash of the drift that cleared (PreviousPlanHash).
type ConvergedEvent struct {
	TenantID         string `json:"tenantId"`
	AppliedPlanHash  string `json:"appliedPlanHash"`
	PreviousPlanHash string `json:"previousPlanHash"`
}

// AppliedEvent is the data of a fleet.applied event: the tenant, the planHash of the plan the
// apply ran (AppliedPlanHash), who applied it (a principal id), and the hash of the drift the
// apply cleared (PreviousPlanHash).
type AppliedEvent struct {
	TenantID         string `json:"tenantId"`
	AppliedPlanHash  string `json:"appliedPlanHash"`
	AppliedBy        string `json:"appliedBy"`
	PreviousPlanHash string `json:"previousPlanHash"`
}

// appliedEvent returns tenantID's fleet.applied event.
func appliedEvent(tenantID, planHash, by, driftHash string, now time.Time) (*events.Event, error) {
	raw, err := json.Marshal(AppliedEvent{TenantID: tenantID, AppliedPlanHash: planHash, AppliedBy: by, PreviousPlanHash: driftHash})
	if err != nil {
		return nil, err
	}
	return &events.Event{At: now.UnixMilli(), TenantID: tenantID, Type: EventApplied, Subject: Subject(tenantID), Data: raw}, nil
}

// Subject returns the subject of tenantID's fleet events: fleet/<tenant>.
func Subject(tenantID string) string { return "fleet/" + tenantID }

// driftEvent returns the event a check publishes when the drift recorded in a changes to
// drift, or nil when it publishes none (the same drift again, or still none).
func driftEvent(tenantID string, a *appliedDoc, drift *Drift, now time.Time) (*events.Event, error) {
	var typ string
	var data any
	switch {
	case drift != nil && (a.Drift == nil || a.Drift.PlanHash != drift.PlanHash):
		typ, data = EventDrifted, DriftedEvent{TenantID: tenantID, AppliedPlanHash: a.PlanHash, Drift: *drift}
	case drift == nil && a.Drift != nil:
		typ, data = EventConverged, ConvergedEvent{TenantID: tenantID, AppliedPlanHash: a.PlanHash, PreviousPlanHash: a.Drift.PlanHash}
	default:
		return nil, nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return &events.Event{At: now.UnixMilli(), TenantID: tenantID, Type: typ, Subject: Subject(tenantID), Data: raw}, nil
}
