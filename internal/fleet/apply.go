package fleet

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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

// Invoker runs API calls: the API's method table implements it.
type Invoker interface {
	// Check decides the permission of one call for p, without running it; it audits a refusal.
	Check(ctx context.Context, p *iam.Principal, requestID, method string, in json.RawMessage) error
	// Invoke runs one call inside tx as p and queues its audit row in batch.
	Invoke(ctx context.Context, tx store.Querier, batch *audit.Batch, p *iam.Principal, requestID, method string, in json.RawMessage) (any, error)
}

// Applier applies plans (fleet spec, "Apply").
type Applier struct {
	DB      *store.DB
	Planner *Planner
	Calls   Invoker
	Now     func() time.Time
	// AfterCheck, when set, runs after the permission checks and before the transaction opens.
	// Tests use it to inject a hand edit at the worst moment.
	AfterCheck func()
	// BeforeCall, when set, runs before call i inside the transaction; an error it returns fails
	// the apply there. Tests use it to inject faults at every call index.
	BeforeCall func(i int) error
	// OnApplied, when set, runs inside the transaction after every call succeeded; the API
	// layer writes the apply's own audit row there. An error it returns rolls the apply back.
	OnApplied func(ctx context.Context, tx store.Querier, res *ApplyResult) error
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
}

var planHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ApplyResult is fleet.apply's result: the plan that ran and the number of calls applied.
type ApplyResult struct {
	Plan    *Plan `json:"plan"`
	Applied int   `json:"applied"`
}

// Apply plans in.Document, decides every call's permission as p with no transaction open, then
// runs all calls in one transaction under the tenant's lock, planning again inside it: if the
// plan moved since the check (or differs from in.PlanHash) it fails CONFIG_DRIFT; a blocked
// plan fails PLAN_BLOCKED; a plan that deletes with DenyDelete fails PLAN_BLOCKED. On success
// it records the applied document. Any failure leaves the database as it was.
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
		raw, err := json.Marshal(c.Input)
		if err != nil {
			return nil, err
		}
		if err := a.Calls.Check(ctx, p, in.RequestID, c.Method, raw); err != nil {
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
		if err := batch.Flush(ctx, tx); err != nil {
			return err
		}
		if err := recordApplied(ctx, tx, in.TenantID, canonical, pl.PlanHash, p.ID, in.Prune, a.now()); err != nil {
			return err
		}
		result = &ApplyResult{Plan: pl, Applied: len(pl.Calls)}
		if a.OnApplied != nil {
			return a.OnApplied(ctx, tx, result)
		}
		return nil
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

// run invokes one call and keeps fleet_names in step with it.
func (a *Applier) run(ctx context.Context, tx store.Querier, batch *audit.Batch, p *iam.Principal, in ApplyInput, c Call) error {
	raw, err := json.Marshal(c.Input)
	if err != nil {
		return err
	}
	out, err := a.Calls.Invoke(ctx, tx, batch, p, in.RequestID, c.Method, raw)
	if err != nil {
		return err
	}
	if c.Kind != compute.KindSite && c.Kind != compute.KindPool {
		return nil
	}
	// The API's outputs name the object they acted on (api.Targeted).
	target, ok := out.(interface{ AuditTarget() string })
	if !ok {
		return fmt.Errorf("%s returned no object id", c.Method)
	}
	switch c.Method {
	case method(c.Kind, "create"):
		return setName(ctx, tx, in.TenantID, c.Kind, c.Name, target.AuditTarget())
	case method(c.Kind, "archive"):
		return dropName(ctx, tx, target.AuditTarget())
	}
	return nil
}

func refuse(pl *Plan, denyDelete bool) error {
	if pl.Summary.Blocked {
		return blockedError(pl)
	}
	if denyDelete && pl.Summary.Delete > 0 {
		return cubefleet.Errorf(cubefleet.CodePlanBlocked, "the plan deletes or archives %d objects and --deny-delete forbids that", pl.Summary.Delete)
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
