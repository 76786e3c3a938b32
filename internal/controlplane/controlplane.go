// Package controlplane is the composition root of `cubefleet server`: System builds the
// control plane's domain services in the one order their dependencies allow and holds the
// small adapters that join them, so no domain package holds a reference to the server and the
// server (internal/server) only serves them. The order (docs/architecture.md): the secrets box
// and the SSRF guard; compute; the node store and the node registry; the placement lane on the
// store's ready nodes; the sandboxes on the lane and the registry. RunScheduler runs the lane's
// loops; the caller stops them before it closes the database.
package controlplane

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/netguard"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// SecretsKeyFile is the file, in the data directory, holding the 32-byte key that seals secret
// values (created with mode 0600 on first start). Replicas sharing one PostgreSQL need the same
// file.
const SecretsKeyFile = "secrets.key"

// expireEvery is how often the lease holder drops reservations older than the reservation TTL.
const expireEvery = 5 * time.Second

// Config configures a System. DB, DataDir, Holder, Now and Log are required; every other field
// has a usable zero value (every module, no Vault, the default scheduler and sandbox limits).
type Config struct {
	// DB is the open, migrated database every service uses; New never closes it.
	DB *store.DB
	// DataDir holds secrets.key and the node registration journal.
	DataDir string
	// Disabled lists the modules the deployment leaves out (compute.ModuleVPS,
	// compute.ModuleTemplates); without sandbox templates there are no sandboxes.
	Disabled map[string]bool
	// VaultConfigured says whether vault:// references can resolve.
	VaultConfigured bool
	// EnvRefs is the rule of env:// references (--env-ref-allow, parsed).
	EnvRefs fieldrules.EnvRefs
	// AllowPrivateWebhookTargets lets webhook URLs resolve to non-public addresses.
	AllowPrivateWebhookTargets bool
	// NodeHeartbeatTimeout and NodeLostAfter are the registry's health windows; zero means
	// nodes.DefaultHeartbeatTimeout and nodes.DefaultLostAfter.
	NodeHeartbeatTimeout, NodeLostAfter time.Duration
	// SchedulerConfig is the --scheduler-config file ("" means the defaults); an invalid file
	// fails New.
	SchedulerConfig string
	// Members is the set of node ids of a static membership (MembersOf); nil means every
	// registered node is schedulable.
	Members map[string]bool
	// MemberSlots is how many sandboxes each node runs at once at most (the scheduler's
	// MaxPerNode, every replica's own): a static membership's slots per Cube. 0 means no cap.
	MemberSlots int
	// ResultMaxBytes, TenantResultMaxBytes, ResultRetention, PendingTimeout and
	// TenantMaxSandboxes are the sandboxes' limits; zero means the sandboxes package's defaults.
	ResultMaxBytes, TenantResultMaxBytes int64
	ResultRetention, PendingTimeout      time.Duration
	TenantMaxSandboxes                   int
	// DisconnectGrace is --disconnect-grace: how long after its node's last report a running
	// sandbox of a node that stopped reporting stays unknown before it is lost (a template's
	// disconnectGraceSeconds overrides it). Zero means NodeHeartbeatTimeout (or its default)
	// plus 60 s.
	DisconnectGrace time.Duration
	// Holder names this replica in the sandboxes' database claims.
	Holder string
	// Now is the clock.
	Now func() time.Time
	// Log receives the services' log lines.
	Log *slog.Logger
}

// System is the control plane's domain services, built by New in dependency order. Its fields
// are read-only after New.
type System struct {
	// Box seals secret values and webhook signing secrets.
	Box *secrets.Box
	// Guard is the SSRF guard webhook URLs and deliveries pass.
	Guard *netguard.Guard
	// Compute is the compute objects, with fleet names and the disabled modules.
	Compute *compute.Service
	// NodeStore is the node registry's persistence.
	NodeStore *nodestore.Store
	// Nodes is the node registry.
	Nodes *nodes.Registry
	// Lane is the placement lane and its scheduler.
	Lane *lane.Lane
	// SchedulerMetrics are the scheduler's collectors.
	SchedulerMetrics *scheduler.Metrics
	// Sandboxes is the sandboxes; nil when the deployment leaves sandbox templates out.
	Sandboxes *sandboxes.Service

	cfg Config
}

// New builds a System on cfg.DB: it opens <DataDir>/secrets.key (creating it only for a
// database that has recorded no key), then builds compute, the node registry, the placement
// lane and the sandboxes. Errors: a bad key file, an invalid --scheduler-config (naming every
// problem), a registry or journal that does not load.
func New(ctx context.Context, cfg Config) (*System, error) {
	box, err := secrets.OpenKey(ctx, cfg.DB, filepath.Join(cfg.DataDir, SecretsKeyFile))
	if err != nil {
		return nil, err
	}
	sys := &System{cfg: cfg, Box: box, Guard: &netguard.Guard{AllowPrivate: cfg.AllowPrivateWebhookTargets}}
	sys.Compute = &compute.Service{Disabled: cfg.Disabled, Names: fleet.Names{}, Now: cfg.Now, VaultConfigured: cfg.VaultConfigured, EnvRefs: cfg.EnvRefs}
	// The registry's drains count the sandboxes' unacknowledged ones through acks: the
	// registry is built before the sandboxes (whose nodes it is), so acks learns them last.
	acks := &sandboxAcks{}
	if sys.NodeStore, err = nodestore.New(nodestore.Config{
		DB: cfg.DB, Now: cfg.Now, Log: cfg.Log, JournalPath: filepath.Join(cfg.DataDir, nodestore.JournalFile),
	}); err != nil {
		return nil, err
	}
	if sys.Nodes, err = nodes.New(ctx, nodes.Config{
		Store:            sys.NodeStore,
		JoinTokens:       sys.NodeStore,
		HeartbeatTimeout: cfg.NodeHeartbeatTimeout,
		LostAfter:        cfg.NodeLostAfter,
		Now:              cfg.Now,
		Log:              cfg.Log,
		Pools:            sys.Pools,
		Unacknowledged:   acks.count,
	}); err != nil {
		return nil, err
	}
	if err := sys.newLane(); err != nil {
		return nil, err
	}
	if !cfg.Disabled[compute.ModuleVPS] && !cfg.Disabled[compute.ModuleTemplates] {
		disconnect := cfg.DisconnectGrace
		if disconnect <= 0 {
			disconnect = cmp.Or(cfg.NodeHeartbeatTimeout, nodes.DefaultHeartbeatTimeout) + time.Minute
		}
		if sys.Sandboxes, err = sandboxes.New(sandboxes.Config{
			DB: cfg.DB, Secrets: box, Placer: lanePlacer{lane: sys.Lane, nodes: sys.Nodes, members: cfg.Members}, Nodes: sys.Nodes,
			Names: sys.Compute.Names, Holder: cfg.Holder,
			ResultMaxBytes: cfg.ResultMaxBytes, TenantResultMaxBytes: cfg.TenantResultMaxBytes, ResultRetention: cfg.ResultRetention, PendingTimeout: cfg.PendingTimeout,
			DisconnectGrace: disconnect, TenantMaxSandboxes: cfg.TenantMaxSandboxes, Now: cfg.Now, Log: cfg.Log,
		}); err != nil {
			return nil, err
		}
		acks.svc = sys.Sandboxes
	}
	return sys, nil
}

// Pools lists every pool with its fleet name (for a stock Cubelet's cluster_label) and whether
// it is archived: compute lists them, with the names fleet keeps.
func (sys *System) Pools(ctx context.Context) ([]nodes.Pool, error) {
	pools, err := sys.Compute.Pools(ctx, sys.cfg.DB)
	if err != nil {
		return nil, err
	}
	out := make([]nodes.Pool, len(pools))
	for i, p := range pools {
		out[i] = nodes.Pool{ID: p.ID, TenantID: p.TenantID, Name: p.Name, Archived: p.Archived()}
	}
	return out, nil
}

// newLane loads --scheduler-config (an invalid file fails the start, naming every problem) and
// builds the placement lane with the scheduler's metrics on the node store's ready nodes.
func (sys *System) newLane() error {
	cfg := scheduler.Default()
	if path := sys.cfg.SchedulerConfig; path != "" {
		c, warns, err := scheduler.LoadFile(path)
		if err != nil {
			return fmt.Errorf("--scheduler-config: %w", err)
		}
		for _, w := range warns {
			sys.cfg.Log.Warn("scheduler configuration", "file", path, "warning", w.String())
		}
		cfg = c
	}
	host, _ := os.Hostname()
	sys.SchedulerMetrics = scheduler.NewMetrics()
	l, err := lane.New(lane.Config{
		DB:     sys.cfg.DB,
		Holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), cubefleet.NewID("rep")),
		Scheduler: scheduler.Options{
			Config: cfg, ConfigFile: sys.cfg.SchedulerConfig, Now: sys.cfg.Now, Metrics: sys.SchedulerMetrics, MaxPerNode: int64(sys.cfg.MemberSlots),
		},
		Ready: sys.NodeStore.Current,
		Log:   sys.cfg.Log,
	})
	if err != nil {
		return err
	}
	sys.Lane = l
	sys.cfg.Log.Info("scheduler", "profile", cfg.Profile, "priority_select_num", cfg.PrioritySelectNum,
		"least_select_name", cfg.LeastSelectName, "config_file", sys.cfg.SchedulerConfig)
	return nil
}

// RunScheduler feeds the scheduler from the node registry, runs the placement lane (the
// scheduler lease, the reservations' group commits, the requests forwarded by other replicas)
// and drops expired reservations, until ctx ends.
func (sys *System) RunScheduler(ctx context.Context) {
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

// ReloadSchedulerConfig re-reads --scheduler-config and puts it in force. An invalid file
// keeps the configuration in force: the error, naming every problem, is logged once and
// returned. Without --scheduler-config it logs that there is nothing to reload and returns nil.
func (sys *System) ReloadSchedulerConfig() error {
	path := sys.cfg.SchedulerConfig
	if path == "" {
		sys.cfg.Log.Info("SIGHUP: nothing to reload (no --scheduler-config)")
		return nil
	}
	warns, err := sys.Lane.Scheduler().ReloadFile(path)
	if err != nil {
		sys.cfg.Log.Error("scheduler configuration not reloaded: the previous one stays in force", "file", path, "err", err)
		return err
	}
	for _, w := range warns {
		sys.cfg.Log.Warn("scheduler configuration", "file", path, "warning", w.String())
	}
	cfg := sys.Lane.Scheduler().Config()
	sys.cfg.Log.Info("scheduler configuration reloaded", "file", path, "profile", cfg.Profile,
		"priority_select_num", cfg.PrioritySelectNum, "least_select_name", cfg.LeastSelectName)
	return nil
}

// MembersOf is the set of node ids (hosts) of a static membership's origins (Config.Members);
// nil for none. An origin without a host is an error naming it.
func MembersOf(origins []string) (map[string]bool, error) {
	if origins == nil {
		return nil, nil
	}
	out := make(map[string]bool, len(origins))
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("membership: %q is not an origin", o)
		}
		out[u.Hostname()] = true
	}
	return out, nil
}
