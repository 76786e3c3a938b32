package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Defaults of Config.
const (
	// DefaultResultMaxBytes is --result-max-bytes: each output stream a sandbox's result keeps
	// (1 MiB, the process driver's default); the rest is cut with a marker.
	DefaultResultMaxBytes = 1 << 20
	// MaxResultMaxBytes is the largest --result-max-bytes (64 MiB, the driver's limit).
	MaxResultMaxBytes = 64 << 20
	// DefaultTenantResultMaxBytes is --tenant-result-max-bytes: the output bytes (both streams)
	// the ended sandboxes of one tenant keep together (1 GiB); past it the oldest results'
	// output is dropped first.
	DefaultTenantResultMaxBytes = 1 << 30
	// DefaultResultRetention is --result-retention: how long an ended sandbox's record and
	// result are kept (7 days).
	DefaultResultRetention = 7 * 24 * time.Hour
	// DefaultPendingTimeout is --pending-timeout: how long a create waits for room in its
	// pool before it fails (5 minutes).
	DefaultPendingTimeout = 5 * time.Minute
	// DefaultTenantMaxSandboxes is --tenant-max-sandboxes: the sandboxes a tenant may have
	// pending, starting or running at once, over every pool (1,000).
	DefaultTenantMaxSandboxes = 1000
	// DefaultCreateWait bounds how long a create without async waits for its sandbox to run
	// (30 s); MaxWait bounds it and every sandboxes.wait (5 minutes).
	DefaultCreateWait = 30 * time.Second
	MaxWait           = 5 * time.Minute
	// DefaultStartTimeout is how long a placed sandbox may stay starting, unlisted by its
	// node, before it is lost (2 minutes).
	DefaultStartTimeout = 2 * time.Minute
	// DefaultUnlistedGrace is how long a running sandbox may be missing from its node's
	// reports before it is lost (5 s: its final event travels meanwhile). It must be shorter
	// than the heartbeat timeout.
	DefaultUnlistedGrace = 5 * time.Second
	// DefaultDisconnectGrace is --disconnect-grace: how long after its node's last report a
	// running sandbox of a node that stopped reporting stays unknown, and may run on when the
	// node comes back, before it is lost: the default heartbeat window plus 60 s (75 s).
	DefaultDisconnectGrace = 75 * time.Second
	// DefaultPlacementAttempts is how many times a sandbox is placed at most: one whose node
	// goes down before it started the sandbox is placed again elsewhere, keeping its id, until
	// then (3), and is lost after.
	DefaultPlacementAttempts = 3
	// DefaultEvery is how often the lease holder's loops run (1 s); waiting creates are also
	// tried at once when room may have freed.
	DefaultEvery = time.Second
	// DefaultLeaseTTL is the lifetime of the "sandboxes" lease without renewal (1 s). It is
	// renewed every fifth of it, so a holder killed without a word is replaced within about
	// 1.2 s and waiting creates are placed again at once by the new holder.
	DefaultLeaseTTL = time.Second
	// LeaseName is the database lease of the loops that run once across replicas.
	LeaseName = "sandboxes"
)

// Placer places sandboxes on nodes: the scheduler's placement lane in the server. Place decides
// where p goes and reserves its room there (released by sandbox id: when the node's report
// lists the sandbox, or by Release); it returns RESOURCE_EXHAUSTED when no node of the pool has
// room now (its message says why), which makes the create wait for room.
type Placer interface {
	Place(ctx context.Context, p Placement) (nodeID string, err error)
	Release(ctx context.Context, sandboxID string) error
}

// Placement is one sandbox to place: its pool and template, its size (CPU in millicores,
// memory and disk in MiB), the labels a node must carry (NodeSelector) and nodes not to use.
type Placement struct {
	SandboxID     string
	PoolID        string
	TemplateID    string
	CPUMillicores int64
	MemoryMiB     int64
	DiskMiB       int64
	NodeSelector  map[string]string
	Exclude       []string
}

// Nodes is what the sandboxes read of the node registry (nodes.Registry).
type Nodes interface {
	// WorkNodes returns every registered node, sorted by id.
	WorkNodes() []nodes.WorkNode
	// WorkNode returns one node; ok is false when it is not registered.
	WorkNode(ctx context.Context, id string) (nodes.WorkNode, bool, error)
}

// Config configures a Service. DB, Secrets, Placer and Nodes are required; every other field
// has a usable zero value.
type Config struct {
	// DB is the database, migrated with store.LeaseModule and Module (and compute's, secrets'
	// and audit's).
	DB *store.DB
	// Secrets resolves the secret:// values of a sandbox's environment when it is handed to
	// its node (secrets.Box.Value): they travel only over the work API.
	Secrets *secrets.Box
	// Placer places sandboxes (the scheduler).
	Placer Placer
	// Nodes is the node registry.
	Nodes Nodes
	// Names gives pools their fleet names, which messages name them by; nil: pool ids.
	Names compute.FleetNamer
	// Holder names this replica for the "sandboxes" lease (unique per process).
	Holder string
	// ResultMaxBytes is --result-max-bytes; 0 means DefaultResultMaxBytes.
	ResultMaxBytes int64
	// TenantResultMaxBytes is --tenant-result-max-bytes; 0 means DefaultTenantResultMaxBytes.
	// It must hold one whole result (2 × ResultMaxBytes).
	TenantResultMaxBytes int64
	// ResultRetention is --result-retention; 0 means DefaultResultRetention.
	ResultRetention time.Duration
	// PendingTimeout is --pending-timeout; 0 means DefaultPendingTimeout.
	PendingTimeout time.Duration
	// TenantMaxSandboxes is --tenant-max-sandboxes; 0 means DefaultTenantMaxSandboxes.
	TenantMaxSandboxes int
	// DisconnectGrace is --disconnect-grace (a template's disconnectGraceSeconds overrides it
	// for its sandboxes); 0 means DefaultDisconnectGrace.
	DisconnectGrace time.Duration
	// PlacementAttempts bounds a sandbox's placements (DefaultPlacementAttempts when 0).
	PlacementAttempts int
	// StartTimeout, UnlistedGrace, Every and LeaseTTL tune the loops; 0 means their defaults.
	// The lease is renewed every LeaseTTL/5.
	StartTimeout, UnlistedGrace, Every, LeaseTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives the loops' lines (never a secret value); nil discards them.
	Log *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.DB == nil || c.Secrets == nil || c.Placer == nil || c.Nodes == nil {
		return errors.New("sandboxes: Config.DB, Secrets, Placer and Nodes are required")
	}
	if c.ResultMaxBytes <= 0 {
		c.ResultMaxBytes = DefaultResultMaxBytes
	}
	if c.ResultMaxBytes > MaxResultMaxBytes {
		return errors.New("sandboxes: the result limit is at most 64 MiB per stream")
	}
	if c.TenantResultMaxBytes <= 0 {
		c.TenantResultMaxBytes = DefaultTenantResultMaxBytes
	}
	if c.TenantResultMaxBytes < 2*c.ResultMaxBytes {
		return fmt.Errorf("sandboxes: the tenant result limit (%d bytes) must hold one whole result: give at least 2 × the result limit (%d bytes)", c.TenantResultMaxBytes, 2*c.ResultMaxBytes)
	}
	if c.ResultRetention <= 0 {
		c.ResultRetention = DefaultResultRetention
	}
	if c.PendingTimeout <= 0 {
		c.PendingTimeout = DefaultPendingTimeout
	}
	if c.TenantMaxSandboxes <= 0 {
		c.TenantMaxSandboxes = DefaultTenantMaxSandboxes
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.UnlistedGrace <= 0 {
		c.UnlistedGrace = DefaultUnlistedGrace
	}
	if c.DisconnectGrace <= 0 {
		c.DisconnectGrace = DefaultDisconnectGrace
	}
	if c.Every <= 0 {
		c.Every = DefaultEvery
	}
	if c.PlacementAttempts <= 0 {
		c.PlacementAttempts = DefaultPlacementAttempts
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Holder == "" {
		c.Holder = "sandboxes"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Service runs the sandboxes: the API's operations, the work API's side of the control plane
// and (Run) the loops. It is safe for concurrent use.
type Service struct {
	cfg Config
	db  *store.DB
	log *slog.Logger
	hub hub
	// live is the output of running sandboxes, as their agents send it.
	live liveOutput
	m    *metrics

	lease *store.Lease // the "sandboxes" lease: its holder runs the loops

	// The lease holder's memory of what nodes listed (loops only).
	loopMu     sync.Mutex
	lastListed map[string]int64 // sandbox id -> the last report (Unix ms) that listed it
	prepared   map[string]int64 // node id "@" registration time "/" template id -> when a prepare was last queued
	warned     map[string]int64 // template id -> when a refused warm top-up was last logged

	orphanMu sync.Mutex
	orphanAt map[string]int64 // node id -> when its work request's running list was last checked
}

// New returns a Service for cfg. Its loops run with Run.
func New(cfg Config) (*Service, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, db: cfg.DB, log: cfg.Log, m: newMetrics(),
		lastListed: map[string]int64{}, prepared: map[string]int64{}, warned: map[string]int64{}, orphanAt: map[string]int64{}}
	s.hub.init()
	var led atomic.Bool
	lease, err := cfg.DB.NewLease(store.LeaseConfig{Name: LeaseName, Holder: cfg.Holder, TTL: cfg.LeaseTTL, Renew: cfg.LeaseTTL / 5,
		Now: cfg.Now, Log: cfg.Log, Does: "runs the sandboxes' loops",
		OnTry: func(_ context.Context, held bool) {
			if held && !led.Swap(true) {
				s.hub.kickLoops() // the new holder places the creates that wait at once, not at its first tick
			}
			led.Store(held)
		}})
	if err != nil {
		return nil, err
	}
	s.lease = lease
	return s, nil
}

// ResultMaxBytes is the most bytes of each output stream a result keeps.
func (s *Service) ResultMaxBytes() int64 { return s.cfg.ResultMaxBytes }

func (s *Service) now() int64 { return s.cfg.Now().UnixMilli() }

// hub wakes who waits: the waiters of a sandbox (sandboxes.wait, a create waiting for its
// sandbox to run) when it changes, the work requests of a node when it has new work, and the
// loops when room may have freed. Each channel has room for one wake-up, which is never lost.
// ending is closed by EndWaits: every long poll answers as on its timeout.
type hub struct {
	mu        sync.Mutex
	sandboxes map[string]map[chan struct{}]struct{}
	nodes     map[string]map[chan struct{}]struct{}
	kick      chan struct{}
	ending    chan struct{}
	endOnce   sync.Once
}

func (h *hub) init() {
	h.sandboxes = map[string]map[chan struct{}]struct{}{}
	h.nodes = map[string]map[chan struct{}]struct{}{}
	h.kick = make(chan struct{}, 1)
	h.ending = make(chan struct{})
}

// EndWaits answers every long poll of this replica now, and each one that begins later at
// once, as its timeout would: sandboxes.wait (and a create's wait) with the sandbox as it is,
// a logs follow with what there is, a work request with no assignments. The control plane
// calls it as its shutdown begins, so the transport's graceful stop does not wait the polls
// out: their clients and agents call again, at another replica or once this one is back.
// Calling it again does nothing.
func (s *Service) EndWaits() { s.hub.endOnce.Do(func() { close(s.hub.ending) }) }

func watch(h *hub, m map[string]map[chan struct{}]struct{}, key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	set := m[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		m[key] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		// The set is removed only once empty, so while it holds ch it is m[key].
		if cur := m[key]; cur != nil {
			delete(cur, ch)
			if len(cur) == 0 {
				delete(m, key)
			}
		}
		h.mu.Unlock()
	}
}

func wake(h *hub, m map[string]map[chan struct{}]struct{}, keys ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		for ch := range m[k] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// watchSandbox returns a channel woken when sandbox id changes on this replica, and its cancel.
func (h *hub) watchSandbox(id string) (<-chan struct{}, func()) { return watch(h, h.sandboxes, id) }

// changed wakes the waiters of ids.
func (h *hub) changed(ids ...string) { wake(h, h.sandboxes, ids...) }

// watchNode returns a channel woken when node id has new work, and its cancel.
func (h *hub) watchNode(id string) (<-chan struct{}, func()) { return watch(h, h.nodes, id) }

// work wakes the work requests of nodes ids.
func (h *hub) work(ids ...string) { wake(h, h.nodes, ids...) }

// watched returns the sandbox and node ids someone waits for on this replica.
func (h *hub) watched() (sandboxes, nodes []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.sandboxes {
		sandboxes = append(sandboxes, id)
	}
	for id := range h.nodes {
		nodes = append(nodes, id)
	}
	return sandboxes, nodes
}

// kickLoops asks the lease holder's loops (on this replica) to run now: room may have freed.
func (h *hub) kickLoops() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Waiting returns how many calls wait for a sandbox to change on this replica (sandboxes.wait,
// creates waiting for their sandbox to run).
func (s *Service) Waiting() int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	n := 0
	for _, set := range s.hub.sandboxes {
		n += len(set)
	}
	return n
}
