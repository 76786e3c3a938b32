package fleet

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Applier applies plans (fleet spec, "Apply"). It runs each call of a plan against compute
// directly, deciding the call's permission as the caller (iam.Decide) and writing the call's
// audit row in the apply's transaction, as the API's method table does for a single call.
type Applier struct {
	DB      *store.DB
	Planner *Planner // its Compute runs the calls
	Now     func() time.Time
	// Log receives a refusal's audit row that could not be written (the caller still gets its
	// FORBIDDEN); nil discards it.
	Log *slog.Logger
	// AfterCheck, when set, runs after the permission checks and before the transaction opens.
	// Tests use it to inject a hand edit at the worst moment.
	AfterCheck func()
	// BeforeCall, when set, runs before call i inside the transaction; an error it returns fails
	// the apply there. Tests use it to inject faults at every call index.
	BeforeCall func(i int) error
}

// ApplyInput is fleet.apply's input: the plan's input plus an optional PlanHash (refuse with
// CONFIG_DRIFT unless the plan made now has this hash) and DenyDelete (refuse a plan that
// deletes or archives anything).
type ApplyInput struct {
	TenantID   string
	Document   *document.Document
	Prune      bool
	PlanHash   string
	DenyDelete bool
	RequestID  string
	// Audit is the apply's own audit row as the API decided it (method fleet.apply, its
	// permission and scope, principal, tenant, request id). Apply sets At, Target (the tenant)
	// and Message and writes it in the apply's transaction; a zero Method writes none.
	Audit audit.Entry
}

var planHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ApplyResult is fleet.apply's result: the plan that ran and the number of calls applied.
type ApplyResult struct {
	Plan    *Plan `json:"plan"`
	Applied int   `json:"applied"`
}

// Apply plans in.Document, decides every call's permission as p with no transaction open (a
// refusal is FORBIDDEN, audited in its own transaction), then runs all calls in one transaction
// under the tenant's lock, planning again inside it: if the plan moved since the check (or
// differs from in.PlanHash) it fails CONFIG_DRIFT; a blocked plan fails PLAN_BLOCKED; a plan
// that deletes with DenyDelete fails PLAN_BLOCKED. Every call writes its audit row in the same
// transaction. On success it records the applied document and in.Audit. Any failure leaves the
// database as it was.
func (a *Applier) Apply(ctx context.Context, p *iam.Principal, in ApplyInput) (*ApplyResult, error) {
	in.PlanHash = strings.ToLower(in.PlanHash)
	if in.PlanHash != "" && !planHashPattern.MatchString(in.PlanHash) {
		return nil, cubefleet.Invalid("planHash", "planHash is the 64 hex digits `fleet plan` prints, not %q", in.PlanHash)
	}
	checked, err := a.Planner.Plan(ctx, a.DB, in.TenantID, in.Document, in.Prune)
	if err != nil {
		return nil, err
	}
	if in.PlanHash != "" && checked.PlanHash != in.PlanHash {
		return nil, driftError(in.PlanHash, checked.PlanHash)
	}
	if err := refuse(checked, in.DenyDelete); err != nil {
		return nil, err
	}
	for _, c := range checked.Calls {
		if err := a.decide(ctx, p, in, c); err != nil {
			return nil, err
		}
	}
	if a.AfterCheck != nil {
		a.AfterCheck()
	}
	canonical, err := document.Canonical(in.Document)
	if err != nil {
		return nil, err
	}
	var result *ApplyResult
	err = a.DB.InTx(ctx, func(tx *sql.Tx) error {
		if err := a.DB.LockKey(ctx, tx, "fleet:"+in.TenantID); err != nil {
			return err
		}
		pl, err := a.Planner.Plan(ctx, tx, in.TenantID, in.Document, in.Prune)
		if err != nil {
			return err
		}
		if pl.PlanHash != checked.PlanHash {
			return driftError(checked.PlanHash, pl.PlanHash)
		}
		if err := refuse(pl, in.DenyDelete); err != nil {
			return err
		}
		var batch audit.Batch
		for i, c := range pl.Calls {
			if a.BeforeCall != nil {
				if err := a.BeforeCall(i); err != nil {
					return fmt.Errorf("call %d (%s %s): %w", i, c.Method, c.Name, err)
				}
			}
			if err := a.run(ctx, tx, &batch, p, in, c); err != nil {
				if errors.Is(err, compute.ErrRevision) {
					return driftError(checked.PlanHash, "")
				}
				return fmt.Errorf("call %d (%s %s): %w", i, c.Method, c.Name, err)
			}
		}
		if err := compute.CheckCounts(ctx, tx, in.TenantID); err != nil {
			return err // the creates ran with DeferCounts: the tenant's counts are checked once
		}
		if err := a.Planner.Compute.CheckEgress(ctx, tx, in.TenantID); err != nil {
			return err // the calls ran with DeferEgress: templates against pool policies, as they end
		}
		if err := batch.Flush(ctx, tx); err != nil {
			return err
		}
		if err := recordApplied(ctx, tx, in.TenantID, canonical, pl.PlanHash, p.ID, in.Prune, a.now()); err != nil {
			return err
		}
		result = &ApplyResult{Plan: pl, Applied: len(pl.Calls)}
		if in.Audit.Method == "" {
			return nil
		}
		row := in.Audit
		row.At, row.Target = a.now().UnixMilli(), in.TenantID
		calls := "calls"
		if result.Applied == 1 {
			calls = "call"
		}
		row.Message = fmt.Sprintf("applied %d %s, plan %s", result.Applied, calls, pl.PlanHash)
		return audit.Record(ctx, tx, row)
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// decide decides call c's permission (compute:<kind>:<verb> on the tenant) as p. A refusal is
// FORBIDDEN and is audited in its own transaction, as the API's method table audits one.
func (a *Applier) decide(ctx context.Context, p *iam.Principal, in ApplyInput, c Call) error {
	info, verb, err := callOf(c)
	if err != nil {
		return err
	}
	row := a.entry(p, in, c.Method, info.Permission(verb))
	if err := iam.Decide(p, row.Permission, row.Scope); err != nil {
		row.Outcome = audit.OutcomeForbidden
		if aerr := audit.Record(ctx, a.DB, row); aerr != nil && a.Log != nil {
			a.Log.ErrorContext(ctx, "audit refusal", "method", c.Method, "err", aerr)
		}
		return err
	}
	return nil
}

// run runs one call against compute inside tx (its compute.Op: no JSON between the two), queues its audit row in batch, and keeps
// fleet_names in step with it.
func (a *Applier) run(ctx context.Context, tx store.Querier, batch *audit.Batch, p *iam.Principal, in ApplyInput, c Call) error {
	info, verb, err := callOf(c)
	if err != nil {
		return err
	}
	svc := *a.Planner.Compute
	svc.DeferCounts = true // Apply checks the tenant's counts once, after the last call
	svc.DeferEgress = true // and its templates' egressAllow against their pools' policies
	o, err := svc.Run(ctx, tx, p.ID, *c.op)
	if err != nil {
		return err
	}
	row := a.entry(p, in, c.Method, info.Permission(verb))
	row.Outcome, row.Target = audit.OutcomeOK, o.ID
	batch.Add(row)
	if info.Kind != compute.KindSite && info.Kind != compute.KindPool {
		return nil
	}
	switch verb {
	case compute.VerbCreate:
		return setName(ctx, tx, in.TenantID, c.Kind, c.Name, o.ID)
	case compute.VerbArchive:
		return dropName(ctx, tx, o.ID)
	}
	return nil
}

// callOf returns the compute kind and verb of call c (a plan's calls are compute methods).
func callOf(c Call) (compute.KindInfo, string, error) {
	info, verb, ok := compute.ParseMethod(c.Method)
	if !ok || info.Kind != c.Kind {
		return compute.KindInfo{}, "", fmt.Errorf("fleet apply cannot run %s on %s", c.Method, cubefleet.Article(c.Kind))
	}
	return info, verb, nil
}

// entry is the audit row of a call as p: the call's permission on the tenant's scope.
func (a *Applier) entry(p *iam.Principal, in ApplyInput, method, permission string) audit.Entry {
	return audit.Entry{
		At: a.now().UnixMilli(), TenantID: in.TenantID, PrincipalID: p.ID, Method: method,
		Permission: permission, Scope: iam.TenantScope(in.TenantID), RequestID: in.RequestID,
	}
}

func refuse(pl *Plan, denyDelete bool) error {
	if pl.Summary.Blocked {
		return blockedError(pl)
	}
	if denyDelete {
		return cubefleet.DenyDeleteRefusal(pl.Summary.Delete)
	}
	return nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12] + "..."
	}
	if hash == "" {
		return "different"
	}
	return hash
}

func driftError(want, got string) error {
	return &cubefleet.Error{
		Code:    cubefleet.CodeConfigDrift,
		Message: fmt.Sprintf("the plan is now %s, not the reviewed %s: the fleet changed since that plan was made (or it was already applied); plan again and review the new plan", short(got), short(want)),
		Details: map[string]any{"planHash": want, "currentPlanHash": got},
	}
}
