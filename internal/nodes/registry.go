package nodes

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Registry. Store is required; every other field has a usable zero value.
type Config struct {
	// Store is the registry's persistence (nodestore.Store).
	Store Store
	// JoinTokens spends join tokens (nodestore.Store); nil means every join token is refused
	// as unknown.
	JoinTokens JoinTokenStore
	// HeartbeatTimeout is --node-heartbeat-timeout. Zero means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// LostAfter is --node-lost-after; it must exceed twice HeartbeatTimeout. Zero means
	// DefaultLostAfter.
	LostAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives the registry's log lines (never a secret); nil discards them.
	Log *slog.Logger
	// Pools lists the pools nodes can belong to (id, fleet name, archived); nil means none.
	Pools func(ctx context.Context) ([]Pool, error)
	// Unacknowledged counts the sandboxes placed on node nodeID that its agent has not
	// acknowledged yet (neither listed in a report nor reported running or ended): a draining
	// node is drained only when its own report shows no sandboxes and this counts none. It is
	// called for a drain request and for each report of a draining node, never under a lock.
	// nil means none is ever unacknowledged (a registry without sandboxes).
	Unacknowledged func(ctx context.Context, nodeID string) (int, error)
	// HealthEvery is how often health is re-evaluated into events and metrics. Zero means one
	// second.
	HealthEvery time.Duration
	// PoolsEvery is how often Pools is re-read. Zero means ten seconds.
	PoolsEvery time.Duration
	// RegisterWait bounds how long a registration waits for its row to be durable before it is
	// journaled and answered. Zero means DefaultRegisterWait.
	RegisterWait time.Duration
}

func (c *Config) setDefaults() error {
	if c.Store == nil {
		return errors.New("nodes: Config.Store is required")
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.LostAfter == 0 {
		c.LostAfter = DefaultLostAfter
	}
	if c.HeartbeatTimeout < 0 || c.LostAfter <= 2*c.HeartbeatTimeout {
		return fmt.Errorf("node lost-after (%s) must exceed twice the heartbeat timeout (%s), which must be positive", c.LostAfter, c.HeartbeatTimeout)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.HealthEvery <= 0 {
		c.HealthEvery = time.Second
	}
	if c.PoolsEvery <= 0 {
		c.PoolsEvery = 10 * time.Second
	}
	if c.RegisterWait <= 0 {
		c.RegisterWait = DefaultRegisterWait
	}
	return nil
}

// Registry is the node registry. Create it with New and run its loops with Run; its HTTP routes
// are nodehttp's. It is safe for concurrent use.
//
// Locks, outermost first: regMu serializes registrations, deletions and taking in another
// replica's nodes (the node set changes only under it); a node's mu guards its fields (the set's
// own locks, the pool index and the store's queue are taken inside it, never the other way).
// The node set shards its map (nodeSet). Nothing holds a node's mu while it waits on I/O.
type Registry struct {
	cfg    Config
	store  Store
	tokens JoinTokenStore
	log    *slog.Logger
	seed   maphash.Seed

	health HealthPolicy // Health's thresholds, and the start (New): nodes with no report since are Unknown
	set    nodeSet
	regMu  sync.Mutex

	pools atomic.Pointer[poolIndex]

	// The scheduler's subscriptions (Subscribe): copied on write under subMu.
	subMu       sync.Mutex
	subscribers atomic.Pointer[[]*subscriber]
	m           *metrics
	listGen     atomic.Uint64 // +1 whenever the node list changes beyond the per-report fields
}

// New returns a registry holding every node cfg.Store holds. A restored node is Unknown until
// it reports or one heartbeat window has passed since New (Health): it is not Ready, and it
// makes no events until then.
func New(ctx context.Context, cfg Config) (*Registry, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	started := time.UnixMilli(cfg.Now().UnixMilli()) // in ms, as the report times it is compared with
	r := &Registry{cfg: cfg, store: cfg.Store, tokens: cfg.JoinTokens, log: cfg.Log, seed: maphash.MakeSeed(), m: newMetrics(),
		health: HealthPolicy{Timeout: cfg.HeartbeatTimeout, LostAfter: cfg.LostAfter, Started: started}}
	r.set.init(r.seed, &r.listGen)
	r.pools.Store(&poolIndex{})
	r.RefreshPools(ctx) // before Open: the journal's node.joined events name the node's pool
	recs, err := r.store.Open(ctx, r)
	if err != nil {
		return nil, err
	}
	now := r.now()
	for i := range recs {
		n, err := restore(&recs[i], now, r.health)
		if err != nil {
			return nil, err
		}
		r.set.add(n)
	}
	r.countStates()
	return r, nil
}

// HeartbeatTimeout is the configured heartbeat timeout: the shortest heartbeat window.
func (r *Registry) HeartbeatTimeout() time.Duration { return r.cfg.HeartbeatTimeout }

// HealthPolicy is what Health judges this registry's nodes by: the configured timeouts and
// when the registry started.
func (r *Registry) HealthPolicy() HealthPolicy { return r.health }

// LostAfter is the configured lost-after duration.
func (r *Registry) LostAfter() time.Duration { return r.cfg.LostAfter }

func (r *Registry) now() int64 { return r.cfg.Now().UnixMilli() }

// Len returns how many nodes are registered.
func (r *Registry) Len() int { return len(r.set.sorted()) }

// restore builds the node of a stored record at now, judged by health: Unknown unless it
// reported since the start (a node another replica registered or heard from since). It
// remembers the state the record had (Registration.State), so the events it had are not made
// again.
func restore(rec *Record, now int64, health HealthPolicy) (*node, error) {
	n := &node{id: rec.NodeID}
	n.setRegistration(&rec.Registration)
	n.reportedAt, n.heartbeatAt = n.updatedAt, n.updatedAt
	if s := rec.Status; s != nil {
		n.setLive(s)
		if s.Inventory != nil {
			if err := n.setInventory(s.Inventory); err != nil {
				return nil, fmt.Errorf("load node %s: %w", n.id, err)
			}
		}
	}
	n.state, n.stateAt, n.known = health.state(n, now), now, rec.State
	switch rec.State {
	case StateReady, StateSuspect, StateDown, StateLost:
		n.wasReady = true
	}
	return n, nil
}

// find returns node id from memory or, on a miss, from the store (a node another replica
// registered); nil when it does not exist.
func (r *Registry) find(ctx context.Context, id string) (*node, error) {
	if n := r.set.get(id); n != nil {
		return n, nil
	}
	if r.set.knownMissing(id) {
		return nil, nil
	}
	rec, err := r.store.LoadNode(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		r.set.markMissing(id)
		return nil, nil
	}
	n, err := restore(rec, r.now(), r.health)
	if err != nil {
		return nil, err
	}
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if cur := r.set.get(id); cur != nil {
		return cur, nil
	}
	r.set.add(n)
	return n, nil
}

// Run runs the registry's loops until ctx ends: the store's (Store.Run: the flusher, replica
// sync, the health lease), the health check (events and metrics every HealthEvery) and the pool
// refresh. When they have stopped it closes the store (Store.Close: the final flush) and
// returns.
func (r *Registry) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	var storeErr error
	wg.Go(func() { storeErr = r.store.Run(ctx) })
	wg.Go(func() { Every(ctx, r.cfg.HealthEvery, func() { r.CheckHealth(ctx) }) })
	wg.Go(func() { Every(ctx, r.cfg.PoolsEvery, func() { r.RefreshPools(ctx) }) })
	wg.Wait()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := r.store.Close(fctx); err != nil {
		r.log.Error("final flush of node state failed", "err", err)
		return fmt.Errorf("nodes: final flush: %w", err)
	}
	return storeErr
}

// closeTimeout bounds the final flush at shutdown.
const closeTimeout = 15 * time.Second

// Every calls fn every d until ctx ends: the loops of the registry, its store and its routes.
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
