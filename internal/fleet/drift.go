package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cubefleet/cubefleet/internal/store"
)

// DefaultDriftEvery is how often the drift reconciler re-plans applied documents (fleet spec,
// "Drift": driftEvery defaults to 15m).
const DefaultDriftEvery = 15 * time.Minute

// Reconciler is the fleet.drift reconciler: every Every it re-plans each tenant's applied
// document, each tenant in its own transaction so one tenant's failure never blocks another,
// and records the drift found. With several server replicas only the holder of the database
// lease "fleet.drift" runs a pass.
type Reconciler struct {
	DB      *store.DB
	Planner *Planner
	// Every is the interval between passes; zero means DefaultDriftEvery.
	Every time.Duration
	// Holder names this replica for the lease.
	Holder string
	Now    func() time.Time
	Log    *slog.Logger
	// OnCheck, when set, is called after each tenant's check with the status before and after.
	OnCheck func(ctx context.Context, before, after *Status)
}

// Run runs passes until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	every := r.Every
	if every <= 0 {
		every = DefaultDriftEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ok, err := r.DB.TryLease(ctx, "fleet.drift", r.Holder, every+every/2, r.now())
			if err != nil {
				r.log().WarnContext(ctx, "drift lease", "err", err)
				continue
			}
			if ok {
				if _, err := r.CheckAll(ctx); err != nil {
					r.log().ErrorContext(ctx, "drift check", "err", err)
				}
			}
		}
	}
}

// CheckAll runs one pass over every tenant with an applied document and returns how many
// tenants drifted. A tenant whose check fails does not stop the others; the failures are
// returned joined.
func (r *Reconciler) CheckAll(ctx context.Context) (int, error) {
	tenants, err := AppliedTenants(ctx, r.DB)
	if err != nil {
		return 0, fmt.Errorf("drift: list tenants: %w", err)
	}
	drifted := 0
	var errs []error
	for _, tenant := range tenants {
		before, err := LoadStatus(ctx, r.DB, tenant)
		if err != nil {
			errs = append(errs, fmt.Errorf("drift check of %s: %w", tenant, err))
			continue
		}
		after, err := r.Planner.CheckDrift(ctx, r.DB, tenant, r.now())
		if err != nil {
			errs = append(errs, fmt.Errorf("drift check of %s: %w", tenant, err))
			continue
		}
		if after.Drift != nil {
			drifted++
		}
		switch {
		case after.Drift != nil && (before.Drift == nil || before.Drift.PlanHash != after.Drift.PlanHash):
			r.log().WarnContext(ctx, "fleet.drifted", "tenant", tenant, "planHash", after.Drift.PlanHash,
				"create", after.Drift.Summary.Create, "update", after.Drift.Summary.Update, "delete", after.Drift.Summary.Delete, "blocked", after.Drift.Blocked)
		case after.Drift == nil && before.Drift != nil:
			r.log().InfoContext(ctx, "fleet.converged", "tenant", tenant)
		}
		if r.OnCheck != nil {
			r.OnCheck(ctx, before, after)
		}
	}
	return drifted, errors.Join(errs...)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}
