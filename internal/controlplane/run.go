package controlplane

import (
	"context"
	"sync"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// A Stage is one step of Run's shutdown, in the order Run takes them.
type Stage string

// Run's shutdown steps, in order.
const (
	// StageFront: the transport has stopped: no request arrives any more and those in flight
	// have been answered.
	StageFront Stage = "front"
	// StageLoops: the background loops have stopped (drift reconciler, webhook dispatcher,
	// audit sweeper, the scheduler and the sandboxes), the database still open: the scheduler
	// wrote what it queued and handed its lease over, so another replica takes over at once.
	StageLoops Stage = "loops"
	// StageNodeRoutes: the node routes' loops have stopped, so the refusal summaries they
	// write last reach the registry's last flush.
	StageNodeRoutes Stage = "node routes"
	// StageNodes: the node registry has stopped; its last flush wrote everything it held.
	StageNodes Stage = "node registry"
	// StageDatabase: the database is closed (when New opened it).
	StageDatabase Stage = "database"
)

// Modules are the migration modules every control plane runs, in order.
func Modules() []store.Module {
	return []store.Module{store.LeaseModule, iam.Module, audit.Module, compute.Module, secrets.Module, fleet.Module, events.Module, nodestore.Module, lane.Module, sandboxes.Module}
}

// EventTypes maps every event type a webhook may subscribe to to whether only the root
// tenant's log holds it: the fleet's and the sandboxes' (each tenant's own) and the node
// registry's (root only).
func EventTypes() map[string]bool {
	out := map[string]bool{}
	for _, t := range fleet.EventTypes {
		out[t] = false
	}
	for _, t := range nodes.EventTypes {
		out[t] = true
	}
	for _, t := range sandboxes.EventTypes {
		out[t] = false
	}
	return out
}

// newLoops builds the loops that run once across replicas (each under its lease): the drift
// reconciler, the webhook dispatcher (dialling through the SSRF guard) and the audit sweeper.
func (sys *System) newLoops() {
	c := sys.cfg
	sys.driftM = fleet.NewDriftMetrics(sys.DB)
	sys.webhookM = events.NewWebhookMetrics(sys.DB, c.Now)
	sys.reconciler = &fleet.Reconciler{
		DB:      sys.DB,
		Planner: &fleet.Planner{Compute: sys.Compute, VaultConfigured: c.VaultConfigured, DriftIgnore: c.DriftIgnore},
		Every:   c.DriftEvery,
		Holder:  c.Holder,
		Now:     c.Now,
		Log:     c.Log,
		Metrics: sys.driftM,
	}
	sys.dispatcher = &events.Dispatcher{DB: sys.DB, Box: sys.Box, Guard: sys.Guard, Holder: c.Holder, Now: c.Now, Log: c.Log, Metrics: sys.webhookM}
	sys.sweeper = &audit.Sweeper{DB: sys.DB, Retention: c.AuditRetention, Holder: c.Holder, Now: c.Now, Log: c.Log}
}

// CheckDrift runs one drift pass now (what the reconciler does every DriftEvery) and returns
// how many tenants have drifted, and the failures of tenants it could not check.
func (sys *System) CheckDrift(ctx context.Context) (int, error) { return sys.reconciler.CheckAll(ctx) }

// Run runs the control plane until ctx ends or front returns, then stops it in the one order
// that loses nothing, each step done before the next begins (Stage):
//
//  1. front, the transport, which Run starts with the services: it serves until the context
//     Run gives it ends, then answers the requests in flight and returns; as that context
//     ends, the sandboxes' long polls answer at once (sandboxes.Service.EndWaits);
//  2. the loops: the drift reconciler, the webhook dispatcher, the audit sweeper, the
//     scheduler's and the sandboxes', while the database is open;
//  3. the node routes' loops;
//  4. the node registry (its last flush);
//  5. the database, when New opened it.
//
// It returns front's error (nil after a shutdown caused by ctx), else the registry's, else the
// database's. Run is called once.
func (sys *System) Run(ctx context.Context, front func(ctx context.Context) error) error {
	stopped := func(s Stage) {
		if sys.cfg.Stopped != nil {
			sys.cfg.Stopped(s)
		}
	}
	base := context.WithoutCancel(ctx)
	nodesCtx, stopNodes := context.WithCancel(base)
	defer stopNodes()
	nodesDone := make(chan error, 1)
	go func() { nodesDone <- sys.Nodes.Run(nodesCtx) }()
	routesCtx, stopRoutes := context.WithCancel(base)
	defer stopRoutes()
	routesDone := make(chan struct{})
	go func() { sys.NodeRoutes.Run(routesCtx); close(routesDone) }()
	loops, stopLoops := context.WithCancel(base)
	defer stopLoops()
	var wg sync.WaitGroup
	if sys.cfg.DriftEvery >= 0 {
		wg.Go(func() { sys.reconciler.Run(loops) })
	}
	wg.Go(func() { sys.dispatcher.Run(loops) })
	wg.Go(func() { sys.sweeper.Run(loops) })
	wg.Go(func() { sys.runScheduler(loops) })
	if sys.Sandboxes != nil {
		wg.Go(func() { sys.Sandboxes.Run(loops) })
	}

	if sys.Sandboxes != nil {
		// As the shutdown begins the long polls answer, so the front's graceful stop does not
		// wait them out (their clients and agents call again).
		endWaits := context.AfterFunc(ctx, sys.Sandboxes.EndWaits)
		defer endWaits()
	}
	err := front(ctx)
	stopped(StageFront)
	stopLoops()
	wg.Wait()
	stopped(StageLoops)
	stopRoutes()
	<-routesDone
	stopped(StageNodeRoutes)
	stopNodes()
	if nerr := <-nodesDone; err == nil {
		err = nerr
	}
	stopped(StageNodes)
	if cerr := sys.Close(); err == nil {
		err = cerr
	}
	stopped(StageDatabase)
	return err
}

// runScheduler feeds the scheduler from the node registry, runs the placement lane (the
// scheduler lease, the reservations' group commits, the requests forwarded by other replicas)
// and drops expired reservations, until ctx ends.
func (sys *System) runScheduler(ctx context.Context) {
	go sys.Lane.Scheduler().Follow(ctx, sys.Nodes)
	go nodes.Every(ctx, expireEvery, func() {
		if sys.Lane.Holding() {
			if n := sys.Lane.Scheduler().Expire(); n > 0 {
				sys.cfg.Log.Warn("scheduler reservations expired: their sandboxes were never listed by their nodes nor released", "count", n)
			}
		}
	})
	sys.Lane.Run(ctx)
}
