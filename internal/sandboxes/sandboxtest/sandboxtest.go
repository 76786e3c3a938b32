// Package sandboxtest assembles the sandboxes for tests: real databases with the compute objects
// a sandbox needs (a site, a pool of tenant root offered to tenant acme, a flavor, a template of
// each tenant), the node registry served with the work API over HTTP on 127.0.0.1, the
// scheduler's placement lane following it, the sandboxes service, and Agent, a client that speaks the agent's side of the work API and
// reports like cubefleet agent. Only tests import it.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// Modules are the migrations the sandboxes need.
var Modules = []store.Module{store.LeaseModule, iam.Module, audit.Module, compute.Module, secrets.Module, events.Module, nodestore.Module, lane.Module, sandboxes.Module}

// Env is the sandboxes of one control plane on a real database.
type Env struct {
	*nodetest.Env
	T       *testing.T
	Svc     *sandboxes.Service
	Box     *secrets.Box
	Compute *compute.Service
	Placer  sandboxes.Placer
	Lane    *lane.Lane
	// Pool is the pool id (tenant root's, fleet name "fra"), Flavor its flavor (2 vCPU, 1 GiB
	// memory, 1 GiB disk), Templates the template id of each tenant ("root", "acme"), named
	// "py" (env GREETING=hello).
	Pool, Flavor string
	Templates    map[string]string
}

// Options adjust an Env.
type Options struct {
	// Config adjusts the sandboxes' configuration before New.
	Config func(*sandboxes.Config)
	// Offer is the quota of the pool's offer to acme (nil: none) and OwnerQuota the root's
	// owner quotas on it.
	Offer      map[string]int64
	OwnerQuota map[string]int64
	// Warm is the warm pool of acme's template (nil: none).
	Warm *compute.Warm
}

// regRef is the registry, set once it exists (the work routes and the service need each other).
type regRef struct{ reg *nodes.Registry }

func (r *regRef) WorkNodes() []nodes.WorkNode { return r.reg.WorkNodes() }
func (r *regRef) WorkNode(ctx context.Context, id string) (nodes.WorkNode, bool, error) {
	return r.reg.WorkNode(ctx, id)
}

// New returns an Env on db (migrated with Modules).
func New(t *testing.T, db *store.DB, o Options) *Env {
	t.Helper()
	ctx := context.Background()
	clock := nodetest.NewClock()
	for _, tenant := range []string{"root", "acme", "globex"} {
		if _, err := iam.CreateTenant(ctx, db, tenant, clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 32)
	rand.Read(key)
	box, err := secrets.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Box: box, Compute: &compute.Service{Now: clock.Now}, Templates: map[string]string{}}
	mk := func(kind, tenant string, in map[string]any) string {
		t.Helper()
		in["tenantId"] = tenant
		raw, _ := json.Marshal(in)
		obj, err := e.Compute.Create(ctx, db, kind, "svc_test", raw)
		if err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
		return obj.ID
	}
	site := mk(compute.KindSite, "root", map[string]any{"kind": "shared", "region": "eu-central"})
	e.Pool = mk(compute.KindPool, "root", map[string]any{"siteId": site, "class": "vps-host",
		"policy": map[string]any{"egressAllow": []string{"10.20.0.0/16"}}})
	for res, max := range o.OwnerQuota {
		mk(compute.KindOwnerQuota, "root", map[string]any{"poolId": e.Pool, "resource": res, "max": max})
	}
	if o.Offer != nil {
		mk(compute.KindOffer, "root", map[string]any{"poolId": e.Pool, "toTenantId": "acme", "quota": o.Offer, "priority": 5})
	}
	e.Flavor = mk(compute.KindFlavor, "root", map[string]any{"poolId": e.Pool, "name": "small", "vcpu": 2, "memoryGiB": 1, "diskGiB": 1})
	e.Templates["root"] = mk(compute.KindSandboxTemplate, "root", map[string]any{"poolId": e.Pool, "flavorId": e.Flavor, "name": "py",
		"imageId": "python-3.12", "network": "private", "env": map[string]string{"GREETING": "hello"}})
	if o.Offer != nil {
		tpl := map[string]any{"poolId": e.Pool, "flavorId": e.Flavor, "name": "py", "imageId": "python-3.12", "network": "private",
			"env": map[string]string{"GREETING": "hello"}}
		if o.Warm != nil {
			tpl["warm"] = o.Warm
		}
		e.Templates["acme"] = mk(compute.KindSandboxTemplate, "acme", tpl)
	}
	ref := &regRef{}
	ln, err := lane.New(lane.Config{DB: db, Holder: "test", Scheduler: scheduler.Options{Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	e.Lane, e.Placer = ln, lanePlacer{ln}
	cfg := sandboxes.Config{DB: db, Secrets: box, Placer: e.Placer, Nodes: ref, Now: clock.Now, Holder: "test"}
	if o.Config != nil {
		o.Config(&cfg)
	}
	svc, err := sandboxes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Svc = svc
	pool := e.Pool
	e.Env = nodetest.Start(t, db, clock, nodetest.Config{
		Registry: nodes.Config{Now: clock.Now, Pools: func(context.Context) ([]nodes.Pool, error) {
			return []nodes.Pool{{ID: pool, TenantID: "root", Name: "fra"}}, nil
		}, Unacknowledged: svc.Unacknowledged},
		Store: nodestore.Config{DB: db, Now: clock.Now, JournalPath: t.TempDir() + "/" + nodestore.JournalFile},
		HTTP:  nodehttpConfig(db, clock, svc),
	})
	e.Env.T = t
	ref.reg = e.Reg
	svc.Lead(ctx)
	// The scheduler follows the registry and its lane takes the lease before any decision;
	// nodes are candidates only once they reported after the registry started.
	lctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { ln.Scheduler().Follow(lctx, e.Reg) })
	wg.Go(func() { ln.Run(lctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	for !ln.Holding() {
		time.Sleep(time.Millisecond)
	}
	clock.Add(time.Second)
	return e
}

// Each runs fn against an Env on SQLite and one on PostgreSQL.
func Each(t *testing.T, o Options, fn func(t *testing.T, e *Env)) {
	storetest.Each(t, Modules, func(t *testing.T, db *store.DB) {
		fn(t, New(t, db, o))
	})
}

// Create creates a sandbox of tenant's template running command, and fails the test on an
// error.
func (e *Env) Create(tenant string, command ...string) sandboxes.Sandbox {
	e.T.Helper()
	s, err := e.Svc.Create(context.Background(), sandboxes.CreateInput{TenantID: tenant, Template: "py", Command: command, CreatedBy: "svc_test"})
	if err != nil {
		e.T.Fatalf("create: %v", err)
	}
	return s
}

// Get returns tenant's sandbox id, and fails the test on an error.
func (e *Env) Get(tenant, id string) sandboxes.Sandbox {
	e.T.Helper()
	s, err := e.Svc.Get(context.Background(), tenant, id)
	if err != nil {
		e.T.Fatalf("get %s: %v", id, err)
	}
	return s
}

// Eventually calls check every 20 ms until it returns "" or d passed, then fails with its last
// answer.
func (e *Env) Eventually(d time.Duration, check func() string) {
	e.T.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("after %s: %s", d, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lanePlacer places through the scheduler's placement lane, as the server does.
type lanePlacer struct{ l *lane.Lane }

func (p lanePlacer) Place(ctx context.Context, pl sandboxes.Placement) (string, error) {
	d, err := p.l.Place(ctx, scheduler.Request{SandboxID: pl.SandboxID, Pool: pl.PoolID, Template: pl.TemplateID,
		CPU: pl.CPUMillicores, MemoryMiB: pl.MemoryMiB, DiskMiB: pl.DiskMiB, NodeSelector: pl.NodeSelector, Exclude: pl.Exclude})
	return d.NodeID, err
}

func (p lanePlacer) Release(ctx context.Context, id string) error {
	_, err := p.l.Release(ctx, id)
	return err
}

// Reserved returns the sandboxes holding a reservation in the scheduler.
func (e *Env) Reserved() []string {
	var out []string
	for _, r := range e.Lane.Scheduler().Reservations() {
		out = append(out, r.SandboxID)
	}
	return out
}

// nodehttpConfig is the routes' configuration: stock Cubelets from loopback, nodetest's API
// keys, and the work API served by svc.
func nodehttpConfig(db *store.DB, clock *nodetest.Clock, svc *sandboxes.Service) nodehttp.Config {
	return nodehttp.Config{DB: db, Now: clock.Now, AllowUnauthenticated: []netip.Prefix{nodetest.Loopback}, Authenticate: nodetest.FakeKeys,
		Work: svc, MaxEventBytes: nodehttp.MaxEventBytesFor(svc.ResultMaxBytes())}
}
