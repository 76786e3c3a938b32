package nodes

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Config configures a Registry. DB is required; every other field has a usable zero value.
type Config struct {
	// DB is the database, migrated with Module (and events.Module, audit.Module).
	DB *store.DB
	// HeartbeatTimeout is --node-heartbeat-timeout. Zero means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// LostAfter is --node-lost-after; it must exceed twice HeartbeatTimeout. Zero means
	// DefaultLostAfter.
	LostAfter time.Duration
	// AllowUnauthenticated lists the networks (--node-agent-allow-unauthenticated) from which
	// calls without credentials (stock Cubelets, CubeMaster-style readers, cubeopscli) are
	// accepted. Empty: none.
	AllowUnauthenticated []netip.Prefix
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives the registry's log lines (never a secret); nil discards them.
	Log *slog.Logger
	// Pools lists the pools nodes can belong to (id, fleet name, archived); nil means none.
	Pools func(ctx context.Context) ([]Pool, error)
	// Authenticate resolves an API key (cfk_...) on the internal nodes routes; nil means API
	// keys are not accepted there.
	Authenticate func(ctx context.Context, token string) (*iam.Principal, error)
	// RequestID returns the request id of a request's context, for audit rows; nil means none.
	RequestID func(ctx context.Context) string
	// FlushEvery is how often coalesced state is written. Zero means DefaultFlushEvery.
	FlushEvery time.Duration
	// HealthEvery is how often health is re-evaluated into events and metrics. Zero means one
	// second.
	HealthEvery time.Duration
	// PoolsEvery is how often Pools is re-read. Zero means ten seconds.
	PoolsEvery time.Duration
	// RegisterWait bounds how long a registration waits for durability before answering from
	// memory. Zero means DefaultRegisterWait.
	RegisterWait time.Duration
	// JournalPath is the registration journal (the server uses <data-dir>/JournalFile): a
	// registration the database has not taken within RegisterWait is synced here before it
	// is answered, and New replays what a crash left. "" means no journal: such a
	// registration waits for the database, however long that takes.
	JournalPath string
	// MaxBodyBytes bounds node-agent request bodies (413 beyond). Zero means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Holder names this server replica in the rows it writes and in the health lease. ""
	// means host/pid/random, unique per process.
	Holder string
}

func (c *Config) setDefaults() error {
	if c.DB == nil {
		return errors.New("nodes: Config.DB is required")
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
	if c.RequestID == nil {
		c.RequestID = func(context.Context) string { return "" }
	}
	if c.FlushEvery <= 0 {
		c.FlushEvery = DefaultFlushEvery
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
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Holder == "" {
		host, _ := os.Hostname()
		c.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), cubefleet.NewID("rep"))
	}
	return nil
}

// node is one registered node. Every field after mu is guarded by mu, except statusDirty.
// Slices and maps held here are never modified in place: an update replaces them (through the
// set* methods, which also refresh their canonical JSON), so a copy of the struct taken under
// mu stays valid after mu is released.
type node struct {
	id string

	// statusDirty is set by every report and cleared by the flusher that writes the row.
	statusDirty atomic.Bool

	mu sync.Mutex

	// Registration (durable: nodes_registrations).
	hostIP           string
	grpcPort         int64
	labels           map[string]string // includes ReservedLabel while cordoned
	labelsJSON       []byte
	capacity         Resources
	allocatable      Resources
	instanceType     string
	clusterLabel     string
	quotaCPU         int64
	quotaMemMB       int64
	createConcurrent int64
	maxMvm           int64
	pausedRatio      *float64
	versions         []Version
	versionsJSON     []byte
	hostFacts        HostFacts
	hostFactsJSON    []byte
	agent            string // AgentCubefleet or AgentCubelet
	poolID           string // from the join token; "" for a stock Cubelet
	credHash         string // hex SHA-256 of the node credential; "" for a stock Cubelet
	cordonDetail     string
	cordonBy         string // who set the cordon (an Actor; "" when not cordoned or not recorded)
	registeredAt     int64  // Unix ms
	updatedAt        int64  // Unix ms

	// Drain (durable: nodes_registrations, columns drain_* and drained_at).
	drainReason string // why the drain was asked ("" when not draining, or none given)
	drainBy     string // who asked it (an Actor)
	drainAt     int64  // Unix ms when the drain was asked; 0: not draining
	drainedAt   int64  // Unix ms when the draining node first reported no sandboxes; 0: not yet

	// Live status (nodes_status, flushed every FlushEvery).
	reportedAt        int64 // Unix ms on the control plane's clock; the last register or report
	healthBase        int64 // what Health measures from: reportedAt, or the restart grace
	heartbeatAt       int64 // Unix ms, the node's heartbeat_time clamped to reportedAt
	ready             bool
	conditions        []Condition
	imagesJSON        []byte // canonical JSON of the reported images
	imageCount        int
	templatesJSON     []byte   // canonical JSON of the reported local templates
	templateIDs       []string // their template ids
	templatesReported bool
	allocated         Allocated
	hasAllocated      bool
	diskUsage         DiskUsage
	hasDiskUsage      bool
	metricAt          int64 // Unix ms, the node's metric_time (clamped)
	metricLocalAt     int64 // Unix ms, when the control plane received the last metrics
	inventoryDirty    bool  // images or templates changed since the last flush

	// Hashes of the raw inventory last applied, so an unchanged one is not decoded again.
	imagesHash, templatesHash, versionsHash, hostFactsHash uint64

	state    State // as of the last health check; "" until the first one after joining
	stateAt  int64 // Unix ms of the last state change
	wasReady bool  // the node has been Ready at least once
	deleted  bool
	schedule []byte // the encoded static SchedulerNode fields (staticScheduler); nil when stale
}

// cordoned reports whether n carries the isolation label. Requires n.mu.
func (n *node) cordoned() bool { _, ok := n.labels[ReservedLabel]; return ok }

const numShards = 64

type shard struct {
	mu sync.RWMutex
	m  map[string]*node
}

// Registry is the node registry. Create it with New, run its loops with Run, serve its HTTP
// routes with Handler. It is safe for concurrent use.
type Registry struct {
	cfg     Config
	db      *store.DB
	log     *slog.Logger
	started int64 // Unix ms of New: the restart grace's base
	seed    maphash.Seed
	holder  string       // this replica (Config.Holder)
	others  atomic.Bool  // other replicas announced themselves recently
	leader  atomic.Bool  // this replica holds the health lease: it emits health events
	synced  atomic.Int64 // Unix ms of the last Sync

	shards   [numShards]shard
	orderMu  sync.Mutex
	order    atomic.Pointer[orderCache] // every node sorted by id, as of generation gen
	orderGen atomic.Uint64              // +1 on every add and remove

	regMu sync.Mutex // serializes registrations, deletions and node creation

	credMu sync.RWMutex
	creds  map[string]string // credential hash -> node id

	missMu sync.Mutex
	misses map[string]int64 // node id -> Unix ms until which it is known to be absent

	pools atomic.Pointer[poolIndex]

	joinMu sync.Mutex
	ledger map[string]*tokenLedger // join token hash -> its state in this process

	w        writer
	flushMu  sync.Mutex // one flush at a time
	m        *metrics
	dec      decoders
	statuses sync.Pool // *StatusRequest
	bufs     sync.Pool // *[]byte: status answers
	lists    sync.Pool // *[]byte: selected node lists (?ids=, ?score_only=)
	listing  listCache
	listGen  atomic.Uint64 // +1 whenever the full list changes beyond the per-report fields
	refused  refusalLog
	readyz   readyCache
	jnl      *journal // nil without Config.JournalPath
}

// New returns a registry over cfg.DB holding every registered node; it logs AllowWarning
// (level WARN, naming the networks) when cfg.AllowUnauthenticated holds a network wider than
// a /8. Nodes restored from the database get a grace: none is marked Suspect, Down or Lost before one full heartbeat timeout
// has passed since New (a node already Lost when the server stopped stays Lost).
func New(ctx context.Context, cfg Config) (*Registry, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &Registry{
		cfg: cfg, db: cfg.DB, log: cfg.Log, started: cfg.Now().UnixMilli(), seed: maphash.MakeSeed(), holder: cfg.Holder,
		creds: map[string]string{}, misses: map[string]int64{}, ledger: map[string]*tokenLedger{},
		m: newMetrics(),
	}
	for i := range r.shards {
		r.shards[i].m = map[string]*node{}
	}
	r.w.init()
	if broad := BroadPrefixes(cfg.AllowUnauthenticated); len(broad) > 0 {
		r.log.Warn(AllowWarning, "networks", FormatCIDRs(broad), "allowlist", FormatCIDRs(cfg.AllowUnauthenticated))
	}
	r.pools.Store(&poolIndex{})
	r.RefreshPools(ctx) // before the replay: its node.joined events name the node's pool
	if cfg.JournalPath != "" {
		r.jnl = &journal{path: cfg.JournalPath}
		if err := r.replayJournal(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.load(ctx); err != nil {
		return nil, err
	}
	r.synced.Store(r.started)
	r.announce(ctx)
	r.lead(ctx)
	r.countStates()
	return r, nil
}

// HeartbeatTimeout is the configured heartbeat timeout.
func (r *Registry) HeartbeatTimeout() time.Duration { return r.cfg.HeartbeatTimeout }

// LostAfter is the configured lost-after duration.
func (r *Registry) LostAfter() time.Duration { return r.cfg.LostAfter }

func (r *Registry) now() int64 { return r.cfg.Now().UnixMilli() }

func (r *Registry) shard(id string) *shard {
	return &r.shards[maphash.String(r.seed, id)%numShards]
}

// node returns the in-memory node id, or nil.
func (r *Registry) node(id string) *node {
	s := r.shard(id)
	s.mu.RLock()
	n := s.m[id]
	s.mu.RUnlock()
	return n
}

// add puts n in memory. Requires r.regMu.
func (r *Registry) add(n *node) {
	s := r.shard(n.id)
	s.mu.Lock()
	s.m[n.id] = n
	s.mu.Unlock()
	r.orderGen.Add(1)
	r.listGen.Add(1)
	if n.credHash != "" {
		r.credMu.Lock()
		r.creds[n.credHash] = n.id
		r.credMu.Unlock()
	}
	r.missMu.Lock()
	delete(r.misses, n.id)
	r.missMu.Unlock()
}

// remove drops n from memory and forgets its credential. Requires r.regMu.
func (r *Registry) remove(n *node, credHash string) {
	s := r.shard(n.id)
	s.mu.Lock()
	if s.m[n.id] == n {
		delete(s.m, n.id)
	}
	s.mu.Unlock()
	r.orderGen.Add(1)
	r.listGen.Add(1)
	if credHash != "" {
		r.credMu.Lock()
		delete(r.creds, credHash)
		r.credMu.Unlock()
	}
	r.markMissing(n.id)
}

// missTTL is how long a node id found in neither memory nor the database is answered from
// memory, so a storm of reports from a deleted node costs no database reads.
const missTTL = 5 * time.Second

// maxMisses bounds the negative cache.
const maxMisses = 100000

func (r *Registry) markMissing(id string) {
	r.missMu.Lock()
	if len(r.misses) >= maxMisses {
		clear(r.misses)
	}
	r.misses[id] = time.Now().Add(missTTL).UnixMilli()
	r.missMu.Unlock()
}

// find returns node id from memory or, on a miss, from the database (a node another replica
// registered); nil when it does not exist.
func (r *Registry) find(ctx context.Context, id string) (*node, error) {
	if n := r.node(id); n != nil {
		return n, nil
	}
	r.missMu.Lock()
	until, known := r.misses[id]
	r.missMu.Unlock()
	if known && time.Now().UnixMilli() < until {
		return nil, nil
	}
	n, err := r.loadOne(ctx, id)
	if err != nil {
		return nil, err
	}
	if n == nil {
		r.markMissing(id)
		return nil, nil
	}
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if cur := r.node(id); cur != nil {
		return cur, nil
	}
	r.add(n)
	return n, nil
}

// orderCache is the sorted node list of one generation of the node set.
type orderCache struct {
	gen   uint64
	nodes []*node
}

// nodes returns every node sorted by id. The slice is shared: do not modify it. It is cached
// until a node is added or removed; a list built while one was is returned but not cached, so
// the cache never misses a node.
func (r *Registry) nodes() []*node {
	gen := r.orderGen.Load()
	if c := r.order.Load(); c != nil && c.gen == gen {
		return c.nodes
	}
	r.orderMu.Lock()
	defer r.orderMu.Unlock()
	gen = r.orderGen.Load()
	if c := r.order.Load(); c != nil && c.gen == gen {
		return c.nodes
	}
	var all []*node
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for _, n := range s.m {
			all = append(all, n)
		}
		s.mu.RUnlock()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	if r.orderGen.Load() == gen {
		r.order.Store(&orderCache{gen: gen, nodes: all})
	}
	return all
}

// Len returns how many nodes are registered.
func (r *Registry) Len() int { return len(r.nodes()) }

// health returns n's state at now (Unix ms). Requires n.mu.
func (r *Registry) health(n *node, now int64) State {
	return Health(time.UnixMilli(now), time.UnixMilli(n.healthBase), n.ready, r.cfg.HeartbeatTimeout, r.cfg.LostAfter)
}

// Run runs the registry's loops until ctx ends: the flusher (coalesced state to the database
// every FlushEvery, and at once for registrations), the health check (events and metrics every
// HealthEvery), the pool refresh, the listing cache, and the replica work (announce, health
// lease, Sync). When ctx ends it flushes once more and returns.
func (r *Registry) Run(ctx context.Context) error {
	r.refreshList()
	var wg sync.WaitGroup
	wg.Add(7)
	go func() {
		defer wg.Done()
		r.every(ctx, replicaEvery, func() { r.announce(ctx) })
	}()
	go func() {
		defer wg.Done()
		r.every(ctx, healthLeaseTTL/3, func() { r.lead(ctx) })
	}()
	go func() {
		defer wg.Done()
		r.every(ctx, r.cfg.FlushEvery, func() {
			if err := r.Sync(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("reading the other replicas' node state failed", "err", err)
			}
		})
	}()
	go func() {
		defer wg.Done()
		r.every(ctx, time.Minute, func() { r.pruneTombstones(ctx) })
	}()
	go func() {
		defer wg.Done()
		r.every(ctx, r.cfg.HealthEvery, func() { r.CheckHealth(ctx) })
	}()
	go func() {
		defer wg.Done()
		r.every(ctx, listRefresh, r.refreshList)
	}()
	go func() {
		defer wg.Done()
		r.every(ctx, r.cfg.PoolsEvery, func() { r.RefreshPools(ctx) })
	}()
	r.flushLoop(ctx)
	wg.Wait()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	r.retire(fctx)
	defer r.jnl.close()
	if err := r.Flush(fctx); err != nil {
		r.log.Error("final flush of node state failed", "err", err)
		return fmt.Errorf("nodes: final flush: %w", err)
	}
	return nil
}

func (r *Registry) every(ctx context.Context, d time.Duration, fn func()) {
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

// CheckHealth evaluates every node's health now: each change of state becomes an event
// (node.suspect, node.down, node.lost, node.notReady, node.recovered) on the replica that holds
// the health lease, and the state gauges are updated. Run calls it every HealthEvery; tests
// call it after moving their clock.
func (r *Registry) CheckHealth(ctx context.Context) {
	now := r.now()
	leader := r.leader.Load()
	for _, n := range r.nodes() {
		r.observe(n, now, leader)
	}
	r.countStates()
}

// observe records n's health as of now (Unix ms) and, on a change, emits its event (on the
// leader).
func (r *Registry) observe(n *node, now int64, leader bool) {
	n.mu.Lock()
	if n.deleted {
		n.mu.Unlock()
		return
	}
	s := r.health(n, now)
	prev := n.state
	if s == prev {
		n.mu.Unlock()
		return
	}
	n.state, n.stateAt = s, now
	typ := transitionEvent(prev, s, n.wasReady)
	if s == StateReady {
		n.wasReady = true
	}
	data := r.eventOf(n)
	data.From, data.To, data.LastReportAt = prev, s, n.reportedAt
	n.mu.Unlock()
	r.listGen.Add(1)
	if !leader {
		return // another replica writes the state and emits the event
	}
	r.w.markReg(n) // the state survives restarts (Lost stays Lost)
	if typ != "" {
		r.emit(now, typ, data)
	}
}

// catchUp observes, before a report is applied, a node that has been Ready once: a change
// readers already saw (Down to Lost, say) but the health loop has not yet recorded gets its
// event before the report turns the node Ready again.
func (r *Registry) catchUp(n *node, now int64) {
	n.mu.Lock()
	wasReady := n.wasReady
	n.mu.Unlock()
	if wasReady {
		r.observe(n, now, r.leader.Load())
	}
}

// transitionEvent names the event of a change from prev to s ("" for none). A node that
// joined is not "recovered" or "notReady" until it has been Ready once (wasReady); silence is
// always an event.
func transitionEvent(prev, s State, wasReady bool) string {
	switch s {
	case StateReady:
		if prev == "" || !wasReady {
			return ""
		}
		return EventRecovered
	case StateNotReady:
		if prev == "" || !wasReady {
			return ""
		}
		return EventNotReady
	case StateSuspect:
		return EventSuspect
	case StateDown:
		return EventDown
	case StateLost:
		return EventLost
	}
	return ""
}

func (r *Registry) countStates() {
	counts := map[State]int{}
	for _, n := range r.nodes() {
		n.mu.Lock()
		if !n.deleted {
			counts[n.state]++
		}
		n.mu.Unlock()
	}
	for _, s := range States {
		r.m.nodes.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

// poolIndex is the pools as of the last refresh.
type poolIndex struct {
	byID   map[string]Pool
	byName map[string][]Pool
}

// RefreshPools re-reads the pools (Config.Pools). A failure keeps the previous list and is
// logged.
func (r *Registry) RefreshPools(ctx context.Context) {
	if r.cfg.Pools == nil {
		return
	}
	ps, err := r.cfg.Pools(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reading pools for the node registry failed; keeping the previous list", "err", err)
		}
		return
	}
	idx := &poolIndex{byID: map[string]Pool{}, byName: map[string][]Pool{}}
	for _, p := range ps {
		idx.byID[p.ID] = p
		if p.Name != "" && !p.Archived {
			idx.byName[p.Name] = append(idx.byName[p.Name], p)
		}
	}
	r.pools.Store(idx)
}

// ResolvePool returns the pool named ref: a pool id, or a fleet name held by exactly one
// non-archived pool. Errors: INVALID_INPUT for an unknown, archived or ambiguous pool.
func (r *Registry) ResolvePool(ctx context.Context, ref string) (Pool, error) {
	r.RefreshPools(ctx)
	idx := r.pools.Load()
	if p, ok := idx.byID[ref]; ok {
		if p.Archived {
			return Pool{}, cubefleet.Invalid("pool", "pool %s is archived", ref)
		}
		return p, nil
	}
	switch ps := idx.byName[ref]; len(ps) {
	case 1:
		return ps[0], nil
	case 0:
		return Pool{}, cubefleet.Invalid("pool", "no pool has the id or fleet name %q", ref)
	default:
		return Pool{}, cubefleet.Invalid("pool", "the fleet name %q names pools of several tenants; give the pool id", ref)
	}
}

// poolOf returns n's pool and, when it has none it can use, why. Requires n.mu.
func (r *Registry) poolOf(n *node) (Pool, string) {
	idx := r.pools.Load()
	if n.poolID != "" {
		p, ok := idx.byID[n.poolID]
		switch {
		case !ok:
			return Pool{ID: n.poolID}, fmt.Sprintf("pool %s (from its join token) no longer exists", n.poolID)
		case p.Archived:
			return p, fmt.Sprintf("pool %s is archived", p.ID)
		}
		return p, ""
	}
	if n.clusterLabel == "" {
		return Pool{}, "unknown pool: the node reports no cluster_label and did not join with a token"
	}
	switch ps := idx.byName[n.clusterLabel]; len(ps) {
	case 1:
		return ps[0], ""
	case 0:
		return Pool{}, fmt.Sprintf("unknown pool: no pool has the fleet name %q (its cluster_label)", n.clusterLabel)
	default:
		return Pool{}, fmt.Sprintf("unknown pool: the cluster_label %q matches pools of several tenants", n.clusterLabel)
	}
}

// RegistryOnlyReason is why a stock Cubelet never receives work from cubefleet.
const RegistryOnlyReason = "registry-only: a stock Cubelet does not serve cubefleet's agent work API (listed, health-tracked, cordoned and deleted only)"

// View is a node as the public API (nodes.list, nodes.get) shows it. Times are Unix
// milliseconds on the control plane's clock; CPU in thousandths of a core, memory in MiB.
type View struct {
	ID                   string            `json:"id"`
	IP                   string            `json:"ip"`
	Agent                string            `json:"agent"` // "cubefleet" or "cubelet" (stock)
	RegistryOnly         bool              `json:"registryOnly"`
	PoolID               string            `json:"poolId,omitempty"`
	Pool                 string            `json:"pool,omitempty"` // the pool's fleet name
	ClusterLabel         string            `json:"clusterLabel,omitempty"`
	State                State             `json:"state"`
	StateSince           int64             `json:"stateSince,omitempty"`
	Healthy              bool              `json:"healthy"`
	UnhealthyReason      string            `json:"unhealthyReason,omitempty"`
	Cordoned             bool              `json:"cordoned"`
	CordonDetail         string            `json:"cordonDetail,omitempty"`
	CordonedBy           string            `json:"cordonedBy,omitempty"` // who set the cordon: a principal id, or node:<id> (the node itself)
	Drain                *DrainView        `json:"drain,omitempty"`      // absent unless the node is draining
	Schedulable          bool              `json:"schedulable"`
	UnschedulableReasons []string          `json:"unschedulableReasons,omitempty"`
	Labels               map[string]string `json:"labels"`
	InstanceType         string            `json:"instanceType,omitempty"`
	RegisteredAt         int64             `json:"registeredAt"`
	LastReportAt         int64             `json:"lastReportAt"`
	HeartbeatAt          int64             `json:"heartbeatAt,omitempty"` // the node's clock, clamped
	Capacity             ResourcesView     `json:"capacity"`
	Quota                QuotaView         `json:"quota"`
	Allocated            *AllocatedView    `json:"allocated,omitempty"`
	DiskUsage            *DiskUsageView    `json:"diskUsage,omitempty"`
	Images               int               `json:"images"`
	LocalTemplates       []string          `json:"localTemplates,omitempty"`
	Versions             []Version         `json:"versions,omitempty"`  // keys as the node reports them
	HostFacts            *HostFacts        `json:"hostFacts,omitempty"` // keys as the node reports them
}

// ResourcesView is a capacity: MilliCPU in thousandths of a core, MemoryMiB in MiB.
type ResourcesView struct {
	MilliCPU  int64 `json:"milliCpu"`
	MemoryMiB int64 `json:"memoryMiB"`
}

// QuotaView is what the scheduler may place on a node: MilliCPU (thousandths of a core,
// already overcommitted), MemoryMiB, MaxMvm microVMs, CreateConcurrent creates at once
// (0: no per-node limit).
type QuotaView struct {
	MilliCPU           int64    `json:"milliCpu"`
	MemoryMiB          int64    `json:"memoryMiB"`
	MaxMvm             int64    `json:"maxMvm"`
	CreateConcurrent   int64    `json:"createConcurrent"`
	PausedReleaseRatio *float64 `json:"pausedReleaseRatio,omitempty"`
}

// AllocatedView is what a node last reported as committed to sandboxes: MilliCPU, MemoryMiB,
// Mvm microVMs (counted as its running sandboxes), MvmRunning, NICQueues, disks in MiB. At is
// the node's metric time.
type AllocatedView struct {
	MilliCPU      int64 `json:"milliCpu"`
	MemoryMiB     int64 `json:"memoryMiB"`
	Mvm           int64 `json:"mvm"`
	MvmRunning    int64 `json:"mvmRunning"`
	NICQueues     int64 `json:"nicQueues"`
	DataDiskMiB   int64 `json:"dataDiskMiB"`
	StorageDiskMB int64 `json:"storageDiskMiB"`
	At            int64 `json:"at,omitempty"`
}

// DiskUsageView is how full a node's disks are, in percent.
type DiskUsageView struct {
	Data    float64 `json:"dataPercent"`
	Storage float64 `json:"storagePercent"`
	Sys     float64 `json:"sysPercent"`
}

// view renders n at now. Requires n.mu.
func (r *Registry) view(n *node, now int64) View {
	s := r.health(n, now)
	v := View{
		ID: n.id, IP: n.hostIP, Agent: n.agent, RegistryOnly: n.agent == AgentCubelet, PoolID: n.poolID,
		ClusterLabel: n.clusterLabel, State: s, StateSince: n.stateAt, Healthy: s == StateReady, UnhealthyReason: unhealthyReason(s),
		Cordoned: n.cordoned(), CordonDetail: n.cordonDetail, CordonedBy: n.cordonBy, Labels: map[string]string{}, InstanceType: n.instanceType,
		RegisteredAt: n.registeredAt, LastReportAt: n.reportedAt, HeartbeatAt: n.heartbeatAt,
		Capacity: ResourcesView{MilliCPU: n.capacity.MilliCPU, MemoryMiB: n.capacity.MemoryMB},
		Quota: QuotaView{MilliCPU: quotaCPU(n), MemoryMiB: quotaMem(n), MaxMvm: n.maxMvm, CreateConcurrent: n.createConcurrent,
			PausedReleaseRatio: n.pausedRatio},
		Images: n.imageCount, Versions: n.versions,
	}
	if s != n.state {
		v.StateSince = 0 // the health check has not seen the change yet
	}
	v.Drain = n.drainView()
	for k, val := range n.labels {
		v.Labels[k] = val
	}
	v.Versions = append([]Version(nil), n.versions...)
	p, reason := r.poolOf(n)
	if p.ID != "" {
		v.PoolID, v.Pool = p.ID, p.Name
	}
	var reasons []string
	if n.agent == AgentCubelet {
		reasons = append(reasons, RegistryOnlyReason)
	}
	if s != StateReady {
		reasons = append(reasons, fmt.Sprintf("not ready: %s", s))
	}
	if v.Cordoned {
		reasons = append(reasons, "cordoned")
	}
	if reason != "" {
		reasons = append(reasons, reason)
	}
	v.Schedulable, v.UnschedulableReasons = len(reasons) == 0, reasons
	if n.hasAllocated {
		a := n.allocated
		v.Allocated = &AllocatedView{MilliCPU: a.MilliCPU, MemoryMiB: a.MemoryMB, Mvm: a.MvmNum, MvmRunning: a.MvmRunningNum,
			NICQueues: a.NICQueues, DataDiskMiB: a.DataDiskMB, StorageDiskMB: a.StorageDiskMB, At: n.metricAt}
	}
	if n.hasDiskUsage {
		d := n.diskUsage
		v.DiskUsage = &DiskUsageView{Data: d.DataDiskUsagePer, Storage: d.StorageDiskUsagePer, Sys: d.SysDiskUsagePer}
	}
	if n.templatesReported {
		v.LocalTemplates = append([]string{}, n.templateIDs...)
	}
	if n.hostFacts != (HostFacts{}) {
		hf := n.hostFacts
		v.HostFacts = &hf
	}
	return v
}

func quotaCPU(n *node) int64 {
	if n.quotaCPU != 0 {
		return n.quotaCPU
	}
	return n.allocatable.MilliCPU
}

func quotaMem(n *node) int64 {
	if n.quotaMemMB != 0 {
		return n.quotaMemMB
	}
	return n.allocatable.MemoryMB
}

// ListFilter selects nodes: Pool is a pool id or fleet name, State a health state; empty
// fields match every node.
type ListFilter struct {
	Pool  string
	State State
}

// List returns the nodes matching f, sorted by id.
func (r *Registry) List(ctx context.Context, f ListFilter) ([]View, error) {
	if f.State != "" && !slices.Contains(States, f.State) {
		return nil, cubefleet.Invalid("state", "state %q: want one of Ready, NotReady, Suspect, Down, Lost", f.State)
	}
	now := r.now()
	out := []View{}
	for _, n := range r.nodes() {
		n.mu.Lock()
		if n.deleted {
			n.mu.Unlock()
			continue
		}
		v := r.view(n, now)
		n.mu.Unlock()
		if f.State != "" && v.State != f.State {
			continue
		}
		if f.Pool != "" && v.PoolID != f.Pool && v.Pool != f.Pool && v.ClusterLabel != f.Pool {
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// Get returns node id. Errors: NOT_FOUND.
func (r *Registry) Get(ctx context.Context, id string) (View, error) {
	n, err := r.live(ctx, id)
	if err != nil {
		return View{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return r.view(n, r.now()), nil
}

// live returns node id or NOT_FOUND.
func (r *Registry) live(ctx context.Context, id string) (*node, error) {
	n, err := r.find(ctx, id)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "node %s not found", id)
	}
	return n, nil
}

// eventOf is the data every event of n carries: its id, IP, pool (the pool of its join token,
// or for a stock Cubelet the pool its cluster_label names; absent when it has none) and agent.
// Requires n.mu.
func (r *Registry) eventOf(n *node) eventData {
	p, _ := r.poolOf(n)
	return eventData{NodeID: n.id, IP: n.hostIP, Pool: p.ID, Agent: n.agent}
}

// eventData is the data of a node event.
type eventData struct {
	NodeID       string `json:"nodeId"`
	IP           string `json:"ip,omitempty"`
	Pool         string `json:"poolId,omitempty"`
	Agent        string `json:"agent,omitempty"`
	From         State  `json:"from,omitempty"`
	To           State  `json:"to,omitempty"`
	LastReportAt int64  `json:"lastReportAt,omitempty"`
	By           string `json:"by,omitempty"`
	Detail       string `json:"detail,omitempty"`
	Force        bool   `json:"force,omitempty"`
	Sandboxes    int64  `json:"sandboxes,omitempty"` // node.draining: the sandboxes it still runs
}

// Actor names who asked for an operation, for events and audit rows: an API principal's id,
// "node:<id>" for a node credential, "anonymous@<ip>" for an allowed unauthenticated caller.
type Actor string

// nodeActorPrefix starts the Actor of a node credential.
const nodeActorPrefix = "node:"

// IsNode reports whether a is a node acting with its own credential ("node:<id>"); every other
// actor (an API key, the public API, the CLI, an allowed unauthenticated caller) is an
// operator.
func (a Actor) IsNode() bool { return strings.HasPrefix(string(a), nodeActorPrefix) }
