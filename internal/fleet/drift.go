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

// DefaultCheckTimeout bounds one tenant's drift check, so a stuck one cannot hold up the rest
// of a pass.
const DefaultCheckTimeout = time.Minute

// DriftLease is the database lease whose holder runs the drift passes.
const DriftLease = "fleet.drift"

// Reconciler is the fleet.drift reconciler: every Every it re-plans each tenant's applied
// document, each tenant in its own transaction so one tenant's failure never blocks another,
// records the drift found and publishes fleet.drifted / fleet.converged with it. With several
// server replicas only the holder of the database lease DriftLease runs a pass, and a tenant
// checked less than half a period ago (by another replica before a lease handover, or by
// fleet.status --check) is skipped, so each tenant is checked once per period.
type Reconciler struct {
	DB      *store.DB
	Planner *Planner
	// Every is the interval between passes; zero means DefaultDriftEvery.
	Every time.Duration
	// CheckTimeout bounds one tenant's check; zero means DefaultCheckTimeout.
	CheckTimeout time.Duration
	// Holder names this replica for the lease.
	Holder string
	Now    func() time.Time
	Log    *slog.Logger
	// Metrics, when set, counts checks, failures, their duration and the events published.
	Metrics *DriftMetrics
	// OnCheck, when set, is called after each tenant's check (skipped ones included) with the
	// status after it.
	OnCheck func(ctx context.Context, st *Status, skipped bool)

	lease store.LazyLease
}

// Run runs a pass at once and then one every Every until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	t := time.NewTicker(r.every())
	defer t.Stop()
	for {
		if _, _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.log().ErrorContext(ctx, "drift pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass takes (or renews) the DriftLease and, when this replica holds it, checks every tenant
// not checked in the last half period. It reports whether it held the lease and how many
// tenants are in drift; failures of single tenants are returned joined.
func (r *Reconciler) Pass(ctx context.Context) (held bool, drifted int, err error) {
	every := r.every()
	now := r.now()
	// The lease lasts one and a half periods, so the holder keeps it from one pass to the next.
	if held, err = r.lease.Try(ctx, r.DB, store.LeaseConfig{Name: DriftLease, Holder: r.Holder, TTL: every + every/2, Now: r.now, Log: r.log(),
		Does: "runs the drift passes"}); err != nil || !held {
		return false, 0, err
	}
	drifted, err = r.checkTenants(ctx, now.Add(-every/2))
	return true, drifted, err
}

// CheckAll checks every tenant with an applied document now, whenever it was last checked,
// and returns how many tenants are in drift. A tenant whose check fails does not stop the
// others; the failures are returned joined.
func (r *Reconciler) CheckAll(ctx context.Context) (int, error) {
	return r.checkTenants(ctx, time.Time{})
}

// checkTenants checks each tenant not checked after notBefore (zero: every tenant).
func (r *Reconciler) checkTenants(ctx context.Context, notBefore time.Time) (int, error) {
	tenants, err := AppliedTenants(ctx, r.DB)
	if err != nil {
		return 0, fmt.Errorf("drift: list tenants: %w", err)
	}
	drifted := 0
	var errs []error
	for _, tenant := range tenants {
		if ctx.Err() != nil {
			return drifted, errors.Join(append(errs, ctx.Err())...)
		}
		c, err := r.checkOne(ctx, tenant, notBefore)
		if err != nil {
			r.log().ErrorContext(ctx, "drift check failed", "tenant", tenant, "err", err)
			errs = append(errs, fmt.Errorf("drift check of %s: %w", tenant, err))
			continue
		}
		if c.Status.Drift != nil {
			drifted++
		}
		switch d := c.Status.Drift; c.Event {
		case EventDrifted:
			r.log().WarnContext(ctx, EventDrifted, "tenant", tenant, "planHash", d.PlanHash,
				"create", d.Summary.Create, "update", d.Summary.Update, "delete", d.Summary.Delete, "blocked", d.Blocked)
		case EventConverged:
			r.log().InfoContext(ctx, EventConverged, "tenant", tenant)
		}
		if r.OnCheck != nil {
			r.OnCheck(ctx, c.Status, c.Skipped)
		}
	}
	return drifted, errors.Join(errs...)
}

func (r *Reconciler) checkOne(ctx context.Context, tenant string, notBefore time.Time) (*driftCheck, error) {
	timeout := r.CheckTimeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	c, err := r.Planner.check(ctx, r.DB, tenant, r.now(), notBefore)
	if r.Metrics != nil && (err != nil || !c.Skipped) {
		r.Metrics.observe(time.Since(start), err, c)
	}
	return c, err
}

func (r *Reconciler) every() time.Duration {
	if r.Every <= 0 {
		return DefaultDriftEvery
	}
	return r.Every
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
