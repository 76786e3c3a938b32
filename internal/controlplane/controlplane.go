// Package controlplane is the composition root of `cubefleet server`: System opens the
// database, runs every module's migrations and builds the control plane in the one order its
// dependencies allow, holds the small adapters that join its services, and stops them in the
// one order that loses nothing (Run). No domain package holds a reference to the server, and
// the server (internal/server) is transport only: it serves what System built.
//
// The construction order (docs/architecture.md, "The rules"): the database and its
// migrations; the secrets box and the SSRF guard; compute; the node store and the node
// registry; the placement lane on the store's ready nodes; the sandboxes on the lane and the
// registry; the node routes on the registry and the sandboxes; the webhooks and the API's
// method table on all of them; --dev's bootstrap (which needs the method table's permission
// catalogue); the console on the method table; the drift reconciler, the webhook dispatcher
// and the audit sweeper.
package controlplane

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/netguard"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// expireEvery is how often the lease holder drops reservations older than the reservation TTL.
const expireEvery = 5 * time.Second

// Config configures a System. DataDir, Holder, Now and Log are required, and DB or Database;
// every other field has a usable zero value (every module, no Vault, the defaults of
// Defaults).
type Config struct {
	// DB, when set, is an open database used instead of Database (tests); New migrates it and
	// the System never closes it.
	DB *store.DB
	// Database is a postgres:// (or postgresql://) URL, or a SQLite file path, opened when DB
	// is nil and closed last by Run (or by Close).
	Database string
	// DataDir holds secrets.key, the node registration journal and (with Dev) admin.token.
	DataDir string
	// Dev bootstraps the root tenant and an administrator key on first start, writes the key to
	// <DataDir>/admin.token (mode 0600) and seeds DevTenants. Never for production.
	Dev bool
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
	// Defaults().NodeHeartbeatTimeout and Defaults().NodeLostAfter.
	NodeHeartbeatTimeout, NodeLostAfter time.Duration
	// NodeAgentAllowUnauthenticated lists the networks from which node-agent and internal
	// nodes calls without credentials (stock Cubelets) are accepted. Empty: none.
	NodeAgentAllowUnauthenticated []netip.Prefix
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
	// TenantMaxSandboxes are the sandboxes' limits; zero means the value of Defaults.
	ResultMaxBytes, TenantResultMaxBytes int64
	ResultRetention, PendingTimeout      time.Duration
	TenantMaxSandboxes                   int
	// DisconnectGrace is --disconnect-grace: how long after its node's last report a running
	// sandbox of a node that stopped reporting stays unknown before it is lost (a template's
	// disconnectGraceSeconds overrides it). Zero means NodeHeartbeatTimeout (or its default)
	// plus 60 s.
	DisconnectGrace time.Duration
	// DriftEvery is how often the drift reconciler re-plans applied documents. Zero means
	// Defaults().DriftEvery; a negative value turns the reconciler off.
	DriftEvery time.Duration
	// DriftIgnore are the drift ignore rules (--drift-ignore): drift checks leave these fields
	// out; plan and apply never do.
	DriftIgnore []fleet.IgnoreRule
	// AuditRetention is how long audit rows are kept (audit.Sweeper). Zero means
	// Defaults().AuditRetention; a negative value keeps every row.
	AuditRetention time.Duration
	// ConsoleSessionTTL is how long a web console session lasts. Zero means
	// Defaults().ConsoleSessionTTL.
	ConsoleSessionTTL time.Duration
	// TLS says the transport serves HTTPS: the console's session cookie is then Secure.
	TLS bool
	// Authenticate resolves an API key for the console's sign-in and the internal nodes routes,
	// naming where it is used (method, e.g. "console.signIn"): the transport's own check,
	// which counts refused keys and traces revoked and expired ones. Nil means iam.Authenticate.
	Authenticate func(ctx context.Context, token, method string) (*iam.Principal, error)
	// RequestID returns the request id a request's context carries, for audit rows; nil means
	// none.
	RequestID func(ctx context.Context) string
	// AfterCheck and BeforeCall are fleet.apply's test hooks (fleet.Applier's); nil in
	// production.
	AfterCheck func()
	BeforeCall func(i int) error
	// Stopped, when set, is called as Run finishes each step of the shutdown (a Stage), in
	// order: tests watch the order with it. Nil in production.
	Stopped func(Stage)
	// Holder names this replica in database leases and claims.
	Holder string
	// Now is the clock.
	Now func() time.Time
	// Log receives the services' log lines.
	Log *slog.Logger
}

// System is the control plane, built by New in dependency order and run by Run. Its fields
// are read-only after New.
type System struct {
	// DB is the database every service uses.
	DB *store.DB
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
	// NodeRoutes is the registry's HTTP edge: the node-agent and internal nodes routes (with
	// the sandboxes' work API), which the transport mounts.
	NodeRoutes *nodehttp.Handler
	// API is the method table the transport hands `POST /api/v1/<method>` to.
	API *api.Registry
	// Console is the web console, which the transport mounts at console.Prefix.
	Console *console.Console

	cfg        Config
	ownsDB     bool
	tokenPath  string // the admin.token this start wrote, or ""
	driftM     *fleet.DriftMetrics
	webhookM   *events.WebhookMetrics
	reconciler *fleet.Reconciler
	dispatcher *events.Dispatcher
	sweeper    *audit.Sweeper
	closeOnce  sync.Once
	closeErr   error
}

// New builds a System: it opens the database (unless cfg.DB is given) and runs every module's
// migrations, opens <DataDir>/secrets.key (creating it only for a database that has recorded
// no key), then builds the services in dependency order (the package comment), and with
// cfg.Dev bootstraps a new database. Errors: an unreachable database or a failed migration, a
// bad key file, an invalid --scheduler-config (naming every problem), a registry or journal
// that does not load. On an error nothing stays open.
func New(ctx context.Context, cfg Config) (_ *System, err error) {
	sys := &System{cfg: cfg, DB: cfg.DB}
	defer func() {
		if err != nil {
			sys.Close()
		}
	}()
	if sys.DB == nil {
		if sys.DB, err = store.Open(ctx, cfg.Database); err != nil {
			return nil, err
		}
		sys.ownsDB = true
	}
	if err := sys.DB.Migrate(ctx, Modules()...); err != nil {
		return nil, err
	}
	if sys.Box, err = secrets.OpenKey(ctx, sys.DB, filepath.Join(cfg.DataDir, SecretsKeyFile)); err != nil {
		return nil, err
	}
	sys.Guard = &netguard.Guard{AllowPrivate: cfg.AllowPrivateWebhookTargets}
	sys.Compute = &compute.Service{Disabled: cfg.Disabled, Names: fleet.Names{}, Now: cfg.Now, VaultConfigured: cfg.VaultConfigured, EnvRefs: cfg.EnvRefs}
	// The registry's drains count the sandboxes' unacknowledged ones through acks: the
	// registry is built before the sandboxes (whose nodes it is), so acks learns them last.
	acks := &sandboxAcks{}
	if sys.NodeStore, err = nodestore.New(nodestore.Config{
		DB: sys.DB, Now: cfg.Now, Log: cfg.Log, JournalPath: filepath.Join(cfg.DataDir, nodestore.JournalFile),
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
			DB: sys.DB, Secrets: sys.Box, Placer: lanePlacer{lane: sys.Lane, nodes: sys.Nodes, members: cfg.Members}, Nodes: sys.Nodes,
			Names: sys.Compute.Names, Holder: cfg.Holder,
			ResultMaxBytes: cfg.ResultMaxBytes, TenantResultMaxBytes: cfg.TenantResultMaxBytes, ResultRetention: cfg.ResultRetention, PendingTimeout: cfg.PendingTimeout,
			DisconnectGrace: disconnect, TenantMaxSandboxes: cfg.TenantMaxSandboxes, Now: cfg.Now, Log: cfg.Log,
		}); err != nil {
			return nil, err
		}
		acks.svc = sys.Sandboxes
	}
	if err := sys.newNodeRoutes(); err != nil {
		return nil, err
	}
	sys.API = api.New(api.Config{
		DB: sys.DB, Compute: sys.Compute, Secrets: sys.Box, Nodes: sys.Nodes, NodeStore: sys.NodeStore, Scheduler: sys.Lane, Sandboxes: sys.Sandboxes,
		VaultConfigured: cfg.VaultConfigured, Now: cfg.Now, Log: cfg.Log,
		Webhooks:    &events.Webhooks{DB: sys.DB, Box: sys.Box, Guard: sys.Guard, Types: EventTypes(), Now: cfg.Now},
		DriftIgnore: cfg.DriftIgnore, AfterCheck: cfg.AfterCheck, BeforeCall: cfg.BeforeCall,
	})
	if cfg.Dev {
		if err := sys.bootstrapDev(ctx); err != nil {
			return nil, err
		}
	} else if ready, err := iam.Initialized(ctx, sys.DB); err != nil {
		return nil, err
	} else if !ready {
		cfg.Log.Warn("this control plane has no administrator yet, so every API call will be refused: run `cubefleet server init --token-out FILE` with the same --data-dir and --database first (or --dev on a laptop)")
	}
	if err := sys.newConsole(); err != nil {
		return nil, err
	}
	sys.newLoops()
	return sys, nil
}

// authenticate is the key check of the console and the node routes, used for method.
func (sys *System) authenticate(method string) func(ctx context.Context, token string) (*iam.Principal, error) {
	return func(ctx context.Context, token string) (*iam.Principal, error) {
		if sys.cfg.Authenticate != nil {
			return sys.cfg.Authenticate(ctx, token, method)
		}
		return iam.Authenticate(ctx, sys.DB, token, sys.cfg.Now())
	}
}

// newNodeRoutes builds the node-agent and internal nodes routes on the registry (API keys on
// the internal nodes routes are checked by the transport's Authenticate, and audit rows carry
// the request id); they serve the sandboxes' work API when the deployment runs sandboxes.
func (sys *System) newNodeRoutes() error {
	var work nodehttp.Work
	var maxEvent int64
	if sys.Sandboxes != nil {
		work, maxEvent = sys.Sandboxes, nodehttp.MaxEventBytesFor(sys.Sandboxes.ResultMaxBytes())
	}
	routes, err := nodehttp.New(nodehttp.Config{
		Work:                 work,
		MaxEventBytes:        maxEvent,
		Registry:             sys.Nodes,
		Audit:                sys.NodeStore,
		DB:                   sys.DB,
		AllowUnauthenticated: sys.cfg.NodeAgentAllowUnauthenticated,
		Authenticate:         sys.authenticate("internal-nodes"),
		RequestID:            sys.cfg.RequestID,
		Now:                  sys.cfg.Now,
		Log:                  sys.cfg.Log,
	})
	if err != nil {
		return err
	}
	sys.NodeRoutes = routes
	return nil
}

// newConsole builds the web console on the method table (its node actions), the registry,
// the scheduler's rooms, the pools and the sandboxes.
func (sys *System) newConsole() error {
	var ignore []string
	for _, r := range sys.cfg.DriftIgnore {
		ignore = append(ignore, r.String())
	}
	var consoleSandboxes console.SandboxSource
	if sys.Sandboxes != nil {
		consoleSandboxes = sys.Sandboxes
	}
	rooms := sys.Lane.Scheduler().Room
	var err error
	sys.Console, err = console.New(console.Config{
		DB: sys.DB, Nodes: sys,
		Sandboxes: consoleSandboxes, Actions: sys.API, TLS: sys.cfg.TLS,
		Pools:      consolePools{reg: sys.Nodes, rooms: rooms, pools: sys.Pools, sandboxes: sys.Sandboxes},
		SessionTTL: sys.cfg.ConsoleSessionTTL, DriftIgnore: ignore, Now: sys.cfg.Now, Log: sys.cfg.Log,
		Authenticate: sys.authenticate("console.signIn"),
	})
	return err
}

// ConsoleNodes lists the rows of the console's Nodes page (console.NodeSource): every node in
// the CLI's words, with the scheduler's reservations on it.
func (sys *System) ConsoleNodes(ctx context.Context) ([]console.Node, error) {
	return consoleNodes{reg: sys.Nodes, rooms: sys.Lane.Scheduler().Room, now: sys.cfg.Now}.ConsoleNodes(ctx)
}

// Collectors returns the Prometheus collectors of every service: the registry and its store,
// the node routes, the scheduler, the sandboxes, drift and webhook deliveries.
func (sys *System) Collectors() []prometheus.Collector {
	var out []prometheus.Collector
	out = append(out, sys.Nodes.Collectors()...)
	if sys.Sandboxes != nil {
		out = append(out, sys.Sandboxes.Collectors()...)
	}
	out = append(out, sys.SchedulerMetrics.Collectors()...)
	out = append(out, sys.driftM.Collectors()...)
	out = append(out, sys.webhookM.Collectors()...)
	out = append(out, sys.NodeStore.Collectors()...)
	out = append(out, sys.NodeRoutes.Collectors()...)
	return out
}

// Pools lists every pool with its fleet name (for a stock Cubelet's cluster_label) and whether
// it is archived: compute lists them, with the names fleet keeps.
func (sys *System) Pools(ctx context.Context) ([]nodes.Pool, error) {
	pools, err := sys.Compute.Pools(ctx, sys.DB)
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
		DB:     sys.DB,
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

// AdminTokenPath returns the file --dev wrote the bootstrap administrator's key to during this
// New, or "" when this start did not bootstrap (the database was initialized before).
func (sys *System) AdminTokenPath() string { return sys.tokenPath }

// Close closes the database if New opened it. Run closes it itself, last; Close is for a
// System that never ran. It is safe to call more than once and after Run.
func (sys *System) Close() error {
	sys.closeOnce.Do(func() {
		if sys.ownsDB && sys.DB != nil {
			sys.closeErr = sys.DB.Close()
		}
	})
	return sys.closeErr
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
