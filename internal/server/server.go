// Package server is the control plane's HTTP transport: listeners and TLS, bearer
// authentication, request ids, logs and metrics, /healthz, /readyz, /metrics and the OpenAPI
// document at /api/v1/openapi.json, and `POST /api/v1/<method>`, which it hands to the API's
// method table (internal/api) and answers with the one error-to-status table
// (cubefleet.HTTPStatus). New opens the store and runs every module's migrations, takes the
// domain services from the composition root (internal/controlplane), and mounts on them the
// method table, the console and the registry's node-agent and internal nodes routes (served on
// --internal-listen when it is set).
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/console"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Defaults of Config (docs/server.md, "Flags").
const (
	DefaultListen  = "127.0.0.1:3010"
	DefaultDataDir = ".cubefleet"
	// DefaultModules is the --modules value that runs everything.
	DefaultModules = ModuleCore + "," + compute.ModuleVPS + "," + compute.ModuleTemplates
	// ModuleCore is IAM, audit, secrets, sites, pools, owner quotas, offers and fleet as code:
	// always on.
	ModuleCore = "core"
	// AdminTokenFile is the file, in the data directory, where --dev writes the bootstrap
	// administrator's API key.
	AdminTokenFile = "admin.token"
	// SecretsKeyFile is the file, in the data directory, holding the 32-byte key that seals
	// secret values (created with mode 0600 on first start). Replicas sharing one PostgreSQL
	// need the same file.
	SecretsKeyFile = controlplane.SecretsKeyFile
	// DBFile is the SQLite database's file name in the data directory.
	DBFile = "cubefleet.db"
	// shutdownGrace bounds how long Serve waits for requests in flight after its context ends.
	shutdownGrace = 15 * time.Second
	// maxHeaderBytes bounds a request's head on both listeners (64 KiB): no client of ours
	// sends a larger one.
	maxHeaderBytes = 64 << 10
)

// Config configures a Server. The zero value is usable: it serves on DefaultListen from
// DefaultDataDir with SQLite, text logs, every module, no Vault.
type Config struct {
	// Listen is the TCP address to serve on. Defaults to DefaultListen (loopback); use port 0
	// for a free port (Addr reports it).
	Listen string
	// DataDir holds the SQLite database, secrets.key and (with Dev) admin.token. Created with
	// mode 0700 when missing. Defaults to DefaultDataDir in the working directory.
	DataDir string
	// Database is a postgres:// (or postgresql://) URL, or a SQLite file path. Defaults to
	// <DataDir>/cubefleet.db.
	Database string
	// DB, when set, is an open database used instead of Database (tests); New migrates it and
	// never closes it.
	DB *store.DB
	// Dev bootstraps the root tenant and an administrator key on first start, writes the key to
	// <DataDir>/admin.token (mode 0600) and seeds DevTenants. Never for production.
	Dev bool
	// LogFormat is "text" (default) or "json". New uses it only when it is given no logger.
	LogFormat string
	// Disabled lists the modules this deployment leaves out: compute.ModuleVPS (flavors,
	// provider accounts, templates) and/or compute.ModuleTemplates (templates). ParseModules
	// turns a --modules value into it.
	Disabled map[string]bool
	// VaultAddr is the Vault server vault:// references resolve against; "" means no Vault is
	// configured, so plans block on vault:// references.
	VaultAddr string
	// EnvRefAllow is --env-ref-allow: the prefixes of the environment variable names env://
	// references may name (fieldrules.EnvRefs); only the root tenant may use env:// at all.
	// Empty allows none. New refuses a prefix that is not the start of a variable name.
	EnvRefAllow []string
	envRefs     fieldrules.EnvRefs // EnvRefAllow, parsed
	// DriftEvery is how often the drift reconciler re-plans applied documents. Zero means
	// fleet.DefaultDriftEvery (15 minutes); a negative value turns the reconciler off.
	DriftEvery time.Duration
	// InternalListen, when set, is the TCP address (the worker network) that serves the
	// node-agent routes (/internal/v1/node-agent/..., with the /internal/node-agent/v1 and
	// /internal/meta aliases) and the internal nodes routes (/internal/v1/nodes...); they are
	// then not served on Listen. "" serves them on Listen.
	InternalListen string
	// NodeHeartbeatTimeout is --node-heartbeat-timeout: the shortest heartbeat window (a node
	// whose last report is older than its window, twice its observed report interval and at
	// least this, is no longer Ready; nodes.HealthPolicy). Zero means
	// nodes.DefaultHeartbeatTimeout (15 s).
	NodeHeartbeatTimeout time.Duration
	// NodeLostAfter is --node-lost-after: a node silent this long is Lost; it must exceed
	// twice NodeHeartbeatTimeout. Zero means nodes.DefaultLostAfter (5 min).
	NodeLostAfter time.Duration
	// NodeAgentAllowUnauthenticated lists the networks from which node-agent and internal
	// nodes calls without credentials (stock Cubelets) are accepted. Empty: none.
	NodeAgentAllowUnauthenticated []netip.Prefix
	// TLSCert and TLSKey are --tls-cert and --tls-key: PEM files holding the server's
	// certificate chain and its private key. Both or neither: with them, Listen and
	// InternalListen serve HTTPS only (TLS 1.2 or later) and URL and InternalURL are https://.
	// TLSKey must be a private file (a regular file owned by the server's user, mode 0600). New
	// loads the pair before anything is written and fails on a bad one; the files are looked at
	// again at most every TLSReloadEvery, and a new pair is served from the next handshake on
	// (a new pair that does not load is logged once, and the previous one kept).
	TLSCert, TLSKey string
	// TLSReloadEvery is how often, at most, the TLS files are looked at for a new pair. Zero
	// means DefaultTLSReloadEvery (2 s).
	TLSReloadEvery time.Duration
	// CubeMasterListen, when set, is --cubemaster-listen: a TCP address (CubeMaster's port
	// 8089, say) that serves CubeMaster's surface for the one-click scripts (GET /notify/health,
	// GET /internal/meta/nodes[/{node_id}]) with the node-agent and internal nodes routes, as
	// the internal listener does. "" serves them only there.
	CubeMasterListen string
	// SchedulerConfig is --scheduler-config: a cubemaster.yaml-shaped file whose scheduler
	// section configures placement (docs/scheduler.md). "" means the defaults (profile
	// balanced_spread). An invalid file fails New; ReloadSchedulerConfig re-reads it (SIGHUP).
	SchedulerConfig string
	// DriftIgnore are the drift ignore rules (--drift-ignore KIND.FIELD, parsed with
	// fleet.ParseIgnoreRules): drift checks leave these fields out; plan and apply never do.
	DriftIgnore []fleet.IgnoreRule
	// AllowPrivateWebhookTargets is --allow-private-webhook-targets: webhook URLs may then
	// resolve to loopback, private, link-local and other non-public addresses. Off by default,
	// and Dev does not turn it on.
	AllowPrivateWebhookTargets bool
	// ConsoleSessionTTL is how long a web console session lasts (--console-session-ttl). Zero
	// means console.DefaultSessionTTL (8 hours).
	ConsoleSessionTTL time.Duration
	// ResultMaxBytes is --result-max-bytes: the bytes of each output stream a sandbox's result
	// keeps (the rest is cut with a marker). Zero means sandboxes.DefaultResultMaxBytes (1 MiB).
	ResultMaxBytes int64
	// TenantResultMaxBytes is --tenant-result-max-bytes: the output bytes the ended sandboxes of
	// one tenant keep together; past it the oldest results' output is dropped first. Zero means
	// sandboxes.DefaultTenantResultMaxBytes (1 GiB).
	TenantResultMaxBytes int64
	// ResultRetention is --result-retention: how long ended sandboxes and their results are
	// kept. Zero means sandboxes.DefaultResultRetention (7 days).
	ResultRetention time.Duration
	// PendingTimeout is --pending-timeout: how long a create waits for room in its pool before
	// it fails. Zero means sandboxes.DefaultPendingTimeout (5 minutes).
	PendingTimeout time.Duration
	// DisconnectGrace is --disconnect-grace: how long after its node's last report a running
	// sandbox of a node that stopped reporting stays unknown before it is lost (a template's
	// disconnectGraceSeconds overrides it). Zero means NodeHeartbeatTimeout (or its default)
	// plus 60 s.
	DisconnectGrace time.Duration
	// TenantMaxSandboxes is --tenant-max-sandboxes: the sandboxes one tenant may have pending,
	// starting or running at once. Zero means sandboxes.DefaultTenantMaxSandboxes (1,000).
	TenantMaxSandboxes int
	// Membership is --origins: the static membership of a deployment that loads its Cube
	// origins at start (normalised http(s) origins, cubes.ParseOrigins). When set, only nodes
	// registered under the host of one of them (their id, the agent's IP) are schedulable;
	// nil means every registered node (membership learnt live from registration).
	Membership []string
	// MemberSlots is, with Membership, how many sandboxes each Cube runs at once at most
	// (cubes.SlotsPerCube, 3): a further one is not placed there. 0 means no cap.
	MemberSlots int
	// BodyBudget is --api-body-budget: the most bytes of API request bodies the server holds at
	// once, across all requests. A body that does not fit is RESOURCE_EXHAUSTED (429, with
	// Retry-After) before it is read. Zero means DefaultBodyBudget (64 MiB).
	BodyBudget int64
	// BodyMinRate is --api-body-min-rate: after BodyRateGrace, an API request body must keep
	// arriving at this many bytes per second on average (and never stall for longer than the
	// grace), or it is refused and its connection closed. Zero means DefaultBodyMinRate
	// (1024 bytes/s); negative turns the check off.
	BodyMinRate int64
	// BodyRateGrace is how long a body may take before BodyMinRate applies; zero means
	// DefaultBodyRateGrace (5 s).
	BodyRateGrace time.Duration
	// AuditRetention is --audit-retention: audit rows older than this are deleted, hourly, by
	// one replica at a time (audit.Sweeper). Zero means audit.DefaultRetention (90 days); a
	// negative value keeps every row.
	AuditRetention time.Duration
	// APIWorkers is --api-workers: how many API calls run at once; others wait their turn,
	// writes first up to half the slots (see workPool). Zero means one per CPU the Go runtime
	// uses (GOMAXPROCS), at least 2.
	APIWorkers int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ParseModules turns a --modules value (a comma-separated list of core, vps, vps-templates;
// core is always on) into Config.Disabled. "" means DefaultModules. vps-templates needs vps.
func ParseModules(s string) (map[string]bool, error) {
	if strings.TrimSpace(s) == "" {
		s = DefaultModules
	}
	on := map[string]bool{}
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case ModuleCore, compute.ModuleVPS, compute.ModuleTemplates:
			on[m] = true
		case "":
		default:
			return nil, fmt.Errorf("unknown module %q: modules are %s", m, DefaultModules)
		}
	}
	if on[compute.ModuleTemplates] && !on[compute.ModuleVPS] {
		return nil, fmt.Errorf("module %s needs module %s", compute.ModuleTemplates, compute.ModuleVPS)
	}
	disabled := map[string]bool{}
	for _, m := range []string{compute.ModuleVPS, compute.ModuleTemplates} {
		if !on[m] {
			disabled[m] = true
		}
	}
	return disabled, nil
}

// NewLogger returns a slog logger writing to w in format "text" or "json" ("" is text).
func NewLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

func (c *Config) setDefaults() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Database == "" {
		c.Database = filepath.Join(c.DataDir, DBFile)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("log format %q: want text or json", c.LogFormat)
	}
	if c.TLSReloadEvery <= 0 {
		c.TLSReloadEvery = DefaultTLSReloadEvery
	}
	var err error
	if c.envRefs, err = fieldrules.ParseEnvRefs(c.EnvRefAllow); err != nil {
		return err
	}
	if c.BodyBudget <= 0 {
		c.BodyBudget = DefaultBodyBudget
	}
	if c.BodyMinRate == 0 {
		c.BodyMinRate = DefaultBodyMinRate
	}
	if c.BodyRateGrace <= 0 {
		c.BodyRateGrace = DefaultBodyRateGrace
	}
	return c.checkTLSFlags()
}

// Modules are the migration modules every server runs, in order.
func Modules() []store.Module {
	return []store.Module{store.LeaseModule, iam.Module, audit.Module, compute.Module, secrets.Module, fleet.Module, events.Module, nodestore.Module, lane.Module, sandboxes.Module}
}

// fleetHooks are test hooks (nil in production): fleet.apply's afterCheck runs between the
// permission checks and the transaction, its beforeCall before each call inside it; working
// runs in every API call's slot. Tests set them before the calls they watch.
type fleetHooks struct {
	afterCheck func()
	beforeCall func(i int) error
	// working runs for every API call while it holds its slot of the work pool, before Call.
	working func(method string)
}

// Server is a running control plane: store, method table and HTTP listener. Create it with New,
// run it with Serve.
type Server struct {
	cfg       Config
	log       *slog.Logger
	db        *store.DB
	ownsDB    bool
	api       *api.Registry        // the method table
	sys       *controlplane.System // the domain services, built in dependency order
	hooks     fleetHooks
	ln        net.Listener
	http      *http.Server
	console   *console.Console // the web console at /console
	driftM    *fleet.DriftMetrics
	webhookM  *events.WebhookMetrics
	nodeHTTP  *nodehttp.Handler
	inLn      net.Listener  // --internal-listen, or nil
	inHTTP    *http.Server  // serves inLn
	cmLn      net.Listener  // --cubemaster-listen, or nil
	cmHTTP    *http.Server  // serves cmLn
	tls       *certReloader // the --tls-cert/--tls-key pair, or nil for plain HTTP
	metrics   *metrics
	budget    *bodyBudget    // buffered API request body bytes
	pool      *workPool      // the API calls that run at once
	keyTraces *audit.Summary // refused API keys, summarized per key and reason
	openapi   []byte
	tokenPath string
	closeOnce sync.Once
	closeErr  error
}

// New opens the store, runs the migrations of iam, audit, compute, secrets and fleet, opens
// <DataDir>/secrets.key (creating it only for a database that has recorded no key), registers every API method, bootstraps when cfg.Dev and
// the database is new, and listens on cfg.Listen. log receives every log line (nil: a logger
// in cfg.LogFormat on stderr); lines logged during a request carry its request_id. The caller
// must call Serve or Close.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		var err error
		if log, err = NewLogger(os.Stderr, cfg.LogFormat); err != nil {
			return nil, err
		}
	}
	log = slog.New(requestIDHandler{log.Handler()})
	// The TLS pair first: a bad one fails the start before anything is written.
	var certs *certReloader
	if cfg.TLSCert != "" {
		var err error
		if certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey, cfg.TLSReloadEvery, log); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if fi, err := os.Stat(cfg.DataDir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the data dir is open to other users; run chmod 700 on it", "data_dir", cfg.DataDir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	members, err := controlplane.MembersOf(cfg.Membership)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, db: cfg.DB, tls: certs}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	// Listen first: a taken port or a bad address fails before anything is written.
	if s.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if cfg.InternalListen != "" {
		if s.inLn, err = net.Listen("tcp", cfg.InternalListen); err != nil {
			if overlaps(cfg.InternalListen, s.ln.Addr().String()) {
				return nil, fmt.Errorf("--internal-listen %s takes the address --listen %s already serves: give the internal listener another address or port, or leave --internal-listen out to serve the node-agent routes on --listen: %w",
					cfg.InternalListen, cfg.Listen, err)
			}
			return nil, fmt.Errorf("internal listen: %w", err)
		}
	}
	if cfg.CubeMasterListen != "" {
		if s.cmLn, err = net.Listen("tcp", cfg.CubeMasterListen); err != nil {
			return nil, fmt.Errorf("--cubemaster-listen: %w", err)
		}
	}
	if s.db == nil {
		db, err := store.Open(ctx, cfg.Database)
		if err != nil {
			return nil, err
		}
		s.db, s.ownsDB = db, true
	}
	if err := s.db.Migrate(ctx, Modules()...); err != nil {
		return nil, err
	}
	if s.sys, err = controlplane.New(ctx, controlplane.Config{
		DB: s.db, DataDir: cfg.DataDir, Disabled: cfg.Disabled, VaultConfigured: cfg.VaultAddr != "", EnvRefs: cfg.envRefs,
		AllowPrivateWebhookTargets: cfg.AllowPrivateWebhookTargets,
		NodeHeartbeatTimeout:       cfg.NodeHeartbeatTimeout, NodeLostAfter: cfg.NodeLostAfter, SchedulerConfig: cfg.SchedulerConfig,
		Members: members, MemberSlots: cfg.MemberSlots, ResultMaxBytes: cfg.ResultMaxBytes, TenantResultMaxBytes: cfg.TenantResultMaxBytes, ResultRetention: cfg.ResultRetention, PendingTimeout: cfg.PendingTimeout, DisconnectGrace: cfg.DisconnectGrace,
		TenantMaxSandboxes: cfg.TenantMaxSandboxes, Holder: s.holder(), Now: cfg.Now, Log: log,
	}); err != nil {
		return nil, err
	}
	if err := s.newNodeRoutes(); err != nil {
		return nil, err
	}
	box := s.sys.Box
	s.api = api.New(api.Config{
		DB: s.db, Compute: s.sys.Compute, Secrets: box, Nodes: s.sys.Nodes, NodeStore: s.sys.NodeStore, Scheduler: s.sys.Lane, Sandboxes: s.sys.Sandboxes, VaultConfigured: cfg.VaultAddr != "", Now: cfg.Now, Log: log,
		Webhooks: &events.Webhooks{DB: s.db, Box: box, Guard: s.sys.Guard, Types: EventTypes(), Now: cfg.Now}, DriftIgnore: cfg.DriftIgnore,
		AfterCheck: func() {
			if s.hooks.afterCheck != nil {
				s.hooks.afterCheck()
			}
		},
		BeforeCall: func(i int) error {
			if s.hooks.beforeCall != nil {
				return s.hooks.beforeCall(i)
			}
			return nil
		},
	})
	if s.openapi, err = contract.OpenAPI(); err != nil {
		return nil, err
	}
	if cfg.Dev {
		if err := s.bootstrapDev(ctx); err != nil {
			return nil, err
		}
	} else if ready, err := iam.Initialized(ctx, s.db); err != nil {
		return nil, err
	} else if !ready {
		log.Warn("this control plane has no administrator yet, so every API call will be refused: run `cubefleet server init --token-out FILE` with the same --data-dir and --database first (or --dev on a laptop)")
	}
	s.metrics = newMetrics(s.db)
	s.keyTraces = audit.NewSummary(time.Minute, 0, cfg.Now)
	s.budget = newBodyBudget(cfg.BodyBudget)
	s.metrics.reg.MustRegister(s.budget.collectors()...)
	s.pool = newWorkPool(cfg.APIWorkers)
	s.metrics.reg.MustRegister(s.pool.gauge)
	s.metrics.reg.MustRegister(s.sys.Nodes.Collectors()...)
	if s.sys.Sandboxes != nil {
		s.metrics.reg.MustRegister(s.sys.Sandboxes.Collectors()...)
	}
	s.metrics.reg.MustRegister(s.sys.SchedulerMetrics.Collectors()...)
	s.driftM = fleet.NewDriftMetrics(s.db)
	s.metrics.reg.MustRegister(s.driftM.Collectors()...)
	s.webhookM = events.NewWebhookMetrics(s.db, cfg.Now)
	s.metrics.reg.MustRegister(s.webhookM.Collectors()...)
	var ignore []string
	for _, r := range cfg.DriftIgnore {
		ignore = append(ignore, r.String())
	}
	var consoleSandboxes console.SandboxSource
	if s.sys.Sandboxes != nil {
		consoleSandboxes = s.sys.Sandboxes
	}
	if s.console, err = console.New(console.Config{DB: s.db, Nodes: consoleNodes{reg: s.sys.Nodes, rooms: s.sys.Lane.Scheduler().Room, now: cfg.Now},
		Sandboxes: consoleSandboxes, Actions: s.api, TLS: s.tls != nil,
		Pools:      consolePools{reg: s.sys.Nodes, rooms: s.sys.Lane.Scheduler().Room, pools: s.sys.Pools, sandboxes: s.sys.Sandboxes},
		SessionTTL: cfg.ConsoleSessionTTL, DriftIgnore: ignore, Now: cfg.Now, Log: log,
		Authenticate: func(ctx context.Context, token string) (*iam.Principal, error) {
			return s.authenticateKey(ctx, token, "console.signIn", "")
		}}); err != nil {
		return nil, err
	}
	s.metrics.reg.MustRegister(s.sys.NodeStore.Collectors()...)
	s.metrics.reg.MustRegister(s.nodeHTTP.Collectors()...)
	if cfg.InternalListen != "" {
		s.inHTTP = &http.Server{
			Handler:           s.internalRoutes(),
			ReadHeaderTimeout: 10 * time.Second,
			MaxHeaderBytes:    maxHeaderBytes,
			ReadTimeout:       time.Minute,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          newErrorLog(log, time.Now),
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
		if s.tls != nil {
			s.inHTTP.TLSConfig = s.tls.tlsConfig()
		}
	}
	if s.cmLn != nil {
		s.cmHTTP = &http.Server{
			Handler:           s.internalRoutes(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       time.Minute,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          newErrorLog(log, time.Now),
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
		if s.tls != nil {
			s.cmHTTP.TLSConfig = s.tls.tlsConfig()
		}
	}
	if cfg.Dev && !isLoopback(s.ln.Addr()) {
		log.Warn("--dev on a non-loopback address: dev mode is meant for loopback only", "addr", s.ln.Addr().String())
	}
	s.http = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          newErrorLog(log, time.Now),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if s.tls != nil {
		s.http.TLSConfig = s.tls.tlsConfig()
	}
	var disabled []string
	for m := range cfg.Disabled {
		disabled = append(disabled, m)
	}
	sort.Strings(disabled)
	log.Info("control plane ready", "url", s.URL(), "internal_url", s.InternalURL(), "tls", s.tls != nil, "database", string(s.db.Dialect()), "data_dir", cfg.DataDir,
		"methods", len(s.api.Methods()), "disabled_modules", strings.Join(disabled, ","), "dev", cfg.Dev, "nodes", s.sys.Nodes.Len(),
		"node_agent_allow_unauthenticated", nodehttp.FormatCIDRs(cfg.NodeAgentAllowUnauthenticated))
	ok = true
	return s, nil
}

// Addr returns the address the server listens on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL returns the base URL of the server's API: https://127.0.0.1:3010 with TLS (TLSCert),
// else http://127.0.0.1:3010.
func (s *Server) URL() string { return s.scheme() + "://" + s.ln.Addr().String() }

// TLS reports whether the server serves HTTPS (Config.TLSCert and TLSKey are set).
func (s *Server) TLS() bool { return s.tls != nil }

func (s *Server) scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// AdminTokenPath returns the file --dev wrote the bootstrap administrator's key to during this
// New, or "" when this start did not bootstrap (the database was initialized before).
func (s *Server) AdminTokenPath() string { return s.tokenPath }

// CubeMasterURL returns the base URL of --cubemaster-listen ("" without it); https:// with TLS.
func (s *Server) CubeMasterURL() string {
	if s.cmLn == nil {
		return ""
	}
	return s.scheme() + "://" + s.cmLn.Addr().String()
}

// InternalURL returns the base URL of the node-agent and internal nodes routes: the
// --internal-listen address when set, else the same as URL; https:// with TLS.
func (s *Server) InternalURL() string {
	if s.inLn != nil {
		return s.scheme() + "://" + s.inLn.Addr().String()
	}
	return s.URL()
}

// Nodes returns the server's node registry.
func (s *Server) Nodes() *nodes.Registry { return s.sys.Nodes }

// NodeStore returns the node registry's persistence (its Flush writes what the registry holds).
func (s *Server) NodeStore() *nodestore.Store { return s.sys.NodeStore }

// Handler returns the server's HTTP handler (every route), for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Serve serves HTTP (HTTPS with TLS) until ctx ends, then shuts down gracefully (requests in flight get up to
// 15 s) and closes the store. It returns nil after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context) error {
	type listener struct {
		srv *http.Server
		ln  net.Listener
	}
	servers := []listener{{s.http, s.ln}}
	if s.inHTTP != nil {
		servers = append(servers, listener{s.inHTTP, s.inLn})
	}
	if s.cmHTTP != nil {
		servers = append(servers, listener{s.cmHTTP, s.cmLn})
	}
	errc := make(chan error, len(servers))
	for _, l := range servers {
		go func() {
			if l.srv.TLSConfig != nil {
				errc <- l.srv.ServeTLS(l.ln, "", "") // the certificate comes from TLSConfig.GetCertificate
				return
			}
			errc <- l.srv.Serve(l.ln)
		}()
	}
	// The node registry stops after the HTTP servers (no report arrives any more) and before
	// the store closes, so its last flush writes everything it holds.
	nodesCtx, stopNodes := context.WithCancel(context.WithoutCancel(ctx))
	nodesDone := make(chan error, 1)
	go func() { nodesDone <- s.sys.Nodes.Run(nodesCtx) }()
	// The node routes' loops stop first, so the refusal summaries they write last reach the
	// registry's last flush.
	listCtx, stopList := context.WithCancel(context.WithoutCancel(ctx))
	listDone := make(chan struct{})
	go func() { s.nodeHTTP.Run(listCtx); close(listDone) }()
	defer stopList()
	defer stopNodes()
	loops, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	if s.cfg.DriftEvery >= 0 {
		wg.Go(func() { s.reconciler().Run(loops) })
	}
	wg.Go(func() { s.dispatcher().Run(loops) })
	wg.Go(func() { s.keyTraceLoop(loops) })
	wg.Go(func() { s.auditSweeper().Run(loops) })
	wg.Go(func() { s.sys.RunScheduler(loops) })
	if s.sys.Sandboxes != nil {
		wg.Go(func() { s.sys.Sandboxes.Run(loops) })
	}
	defer func() {
		stopLoops()
		wg.Wait()
	}()
	var err error
	select {
	case err = <-errc:
		for _, l := range servers {
			l.srv.Close()
		}
	case <-ctx.Done():
		s.log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		for _, l := range servers {
			if serr := l.srv.Shutdown(sctx); err == nil {
				err = serr
			}
		}
		cancel()
		for range servers {
			if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
				err = serr
			}
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	// The loops stop while the store is open: the scheduler writes what it queued and hands
	// its lease over, so another replica takes over at once.
	stopLoops()
	wg.Wait()
	stopList()
	<-listDone
	stopNodes()
	if nerr := <-nodesDone; err == nil {
		err = nerr
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

// holder names this replica in database leases and claims: host, process and address.
func (s *Server) holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), s.ln.Addr())
}

// reconciler returns the fleet.drift reconciler of this server.
func (s *Server) reconciler() *fleet.Reconciler {
	return &fleet.Reconciler{
		DB:      s.db,
		Planner: &fleet.Planner{Compute: s.sys.Compute, VaultConfigured: s.cfg.VaultAddr != "", DriftIgnore: s.cfg.DriftIgnore},
		Every:   s.cfg.DriftEvery,
		Holder:  s.holder(),
		Now:     s.cfg.Now,
		Log:     s.log,
		Metrics: s.driftM,
	}
}

// dispatcher returns the webhook dispatcher of this server: it sends the outbox's deliveries,
// dialling through the SSRF guard.
func (s *Server) dispatcher() *events.Dispatcher {
	return &events.Dispatcher{DB: s.db, Box: s.sys.Box, Guard: s.sys.Guard, Holder: s.holder(), Now: s.cfg.Now, Log: s.log, Metrics: s.webhookM}
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

// CheckDrift runs one drift pass now (what the reconciler does every DriftEvery) and returns
// how many tenants have drifted, and the failures of tenants it could not check.
func (s *Server) CheckDrift(ctx context.Context) (int, error) { return s.reconciler().CheckAll(ctx) }

// Close stops listening and closes the store if New opened it. It is safe to call more than
// once and after Serve.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.ln != nil {
			s.ln.Close()
		}
		if s.inLn != nil {
			s.inLn.Close()
		}
		if s.cmLn != nil {
			s.cmLn.Close()
		}
		if s.ownsDB && s.db != nil {
			s.closeErr = s.db.Close()
		}
	})
	return s.closeErr
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// overlaps reports whether TCP addresses a and b (host:port) claim the same port on a common
// address: the same port, and the same host or either one unspecified (all addresses).
func overlaps(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp {
		return false
	}
	any := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || ip != nil && ip.IsUnspecified()
	}
	return ah == bh || any(ah) || any(bh)
}
