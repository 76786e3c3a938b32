// Package server is the control plane's HTTP transport: listeners and TLS, bearer
// authentication, request ids, logs and metrics, /healthz, /readyz, /metrics and the OpenAPI
// document at /api/v1/openapi.json, and `POST /api/v1/<method>`, which it hands to the API's
// method table (internal/api) and answers with the one error-to-status table
// (cubefleet.HTTPStatus). The control plane itself (the database, the services, the method
// table, the console and the node routes, and the order they stop in) is the composition
// root's (internal/controlplane): New has it built and mounts the method table, the console and
// the registry's node-agent and internal nodes routes (served on --internal-listen when it is
// set); Serve runs it with the listeners as its front.
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
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/store"
)

// Defaults of Config (docs/server.md, "Flags"); the control plane's own are
// controlplane.Default's.
const (
	DefaultListen = "127.0.0.1:3010"
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
	// mode 0700 when missing. Defaults to controlplane.DefaultDataDir in the working directory.
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
	// controlplane.Default().DriftEvery (15 minutes); a negative value turns the reconciler off.
	DriftEvery time.Duration
	// InternalListen, when set, is the TCP address (the worker network) that serves the
	// node-agent routes (/internal/v1/node-agent/..., with the /internal/node-agent/v1 and
	// /internal/meta aliases) and the internal nodes routes (/internal/v1/nodes...); they are
	// then not served on Listen. "" serves them on Listen.
	InternalListen string
	// NodeHeartbeatTimeout is --node-heartbeat-timeout: the shortest heartbeat window (a node
	// whose last report is older than its window, twice its observed report interval and at
	// least this, is no longer Ready; nodes.HealthPolicy). Zero means
	// controlplane.Default().NodeHeartbeatTimeout (15 s).
	NodeHeartbeatTimeout time.Duration
	// NodeLostAfter is --node-lost-after: a node silent this long is Lost; it must exceed
	// twice NodeHeartbeatTimeout. Zero means controlplane.Default().NodeLostAfter (5 min).
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
	// means controlplane.Default().ConsoleSessionTTL (8 hours).
	ConsoleSessionTTL time.Duration
	// ResultMaxBytes is --result-max-bytes: the bytes of each output stream a sandbox's result
	// keeps (the rest is cut with a marker). Zero means
	// controlplane.Default().ResultMaxBytes (1 MiB).
	ResultMaxBytes int64
	// TenantResultMaxBytes is --tenant-result-max-bytes: the output bytes the ended sandboxes of
	// one tenant keep together; past it the oldest results' output is dropped first. Zero means
	// controlplane.Default().TenantResultMaxBytes (1 GiB).
	TenantResultMaxBytes int64
	// ResultRetention is --result-retention: how long ended sandboxes and their results are
	// kept. Zero means controlplane.Default().ResultRetention (7 days).
	ResultRetention time.Duration
	// PendingTimeout is --pending-timeout: how long a create waits for room in its pool before
	// it fails. Zero means controlplane.Default().PendingTimeout (5 minutes).
	PendingTimeout time.Duration
	// DisconnectGrace is --disconnect-grace: how long after its node's last report a running
	// sandbox of a node that stopped reporting stays unknown before it is lost (a template's
	// disconnectGraceSeconds overrides it). Zero means NodeHeartbeatTimeout (or its default)
	// plus 60 s.
	DisconnectGrace time.Duration
	// TenantMaxSandboxes is --tenant-max-sandboxes: the sandboxes one tenant may have pending,
	// starting or running at once. Zero means controlplane.Default().TenantMaxSandboxes (1,000).
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
	// AuditRetention is --audit-retention: audit rows older than this are deleted, hourly, by one
	// replica at a time (audit.Sweeper). Zero means controlplane.Default().AuditRetention (90
	// days); a negative value keeps every row.
	AuditRetention time.Duration
	// APIWorkers is --api-workers: how many API calls run at once; others wait their turn,
	// writes first up to half the slots (see workPool). Zero means one per CPU the Go runtime
	// uses (GOMAXPROCS), at least 2.
	APIWorkers int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
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
		c.DataDir = controlplane.DefaultDataDir
	}
	if c.Database == "" {
		c.Database = filepath.Join(c.DataDir, controlplane.DBFile)
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

// fleetHooks are test hooks (nil in production): fleet.apply's afterCheck runs between the
// permission checks and the transaction, its beforeCall before each call inside it; working runs in
// every API call's slot; stopped at each step of the shutdown. Tests set them before the calls they
// watch.
type fleetHooks struct {
	afterCheck func()
	beforeCall func(i int) error
	// working runs for every API call while it holds its slot of the work pool, before Call.
	working func(method string)
	// stopped runs as the control plane finishes each step of its shutdown
	// (controlplane.Config.Stopped).
	stopped func(controlplane.Stage)
}

// Server is a running control plane: store, method table and HTTP listener. Create it with New,
// run it with Serve.
type Server struct {
	cfg       Config
	log       *slog.Logger
	db        *store.DB            // sys.DB
	api       *api.Registry        // sys.API, the method table
	sys       *controlplane.System // the control plane, built in dependency order
	hooks     fleetHooks
	ln        net.Listener
	http      *http.Server
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
	closeOnce sync.Once
	closeErr  error
}

// New has the control plane built (controlplane.New: the store and its migrations, the
// services, the method table, the console and the node routes; --dev's bootstrap) and listens
// on cfg.Listen (and --internal-listen, --cubemaster-listen). log receives every log line (nil:
// a logger in cfg.LogFormat on stderr); lines logged during a request carry its request_id.
// The caller must call Serve or Close.
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
	s := &Server{cfg: cfg, log: log, tls: certs}
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
	if s.sys, err = controlplane.New(ctx, controlplane.Config{
		DB: cfg.DB, Database: cfg.Database, DataDir: cfg.DataDir, Dev: cfg.Dev, Disabled: cfg.Disabled,
		VaultConfigured: cfg.VaultAddr != "", EnvRefs: cfg.envRefs, AllowPrivateWebhookTargets: cfg.AllowPrivateWebhookTargets,
		NodeHeartbeatTimeout: cfg.NodeHeartbeatTimeout, NodeLostAfter: cfg.NodeLostAfter, NodeAgentAllowUnauthenticated: cfg.NodeAgentAllowUnauthenticated,
		SchedulerConfig: cfg.SchedulerConfig, Members: members, MemberSlots: cfg.MemberSlots,
		ResultMaxBytes: cfg.ResultMaxBytes, TenantResultMaxBytes: cfg.TenantResultMaxBytes, ResultRetention: cfg.ResultRetention,
		PendingTimeout: cfg.PendingTimeout, DisconnectGrace: cfg.DisconnectGrace, TenantMaxSandboxes: cfg.TenantMaxSandboxes,
		DriftEvery: cfg.DriftEvery, DriftIgnore: cfg.DriftIgnore, AuditRetention: cfg.AuditRetention, ConsoleSessionTTL: cfg.ConsoleSessionTTL,
		TLS: certs != nil, Authenticate: s.authenticateNamed, RequestID: RequestID,
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
		Stopped: func(st controlplane.Stage) {
			if s.hooks.stopped != nil {
				s.hooks.stopped(st)
			}
		},
		Holder: s.holder(), Now: cfg.Now, Log: log,
	}); err != nil {
		return nil, err
	}
	s.db, s.api = s.sys.DB, s.sys.API
	if s.openapi, err = contract.OpenAPI(); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s.db)
	s.keyTraces = audit.NewSummary(time.Minute, 0, cfg.Now)
	s.budget = newBodyBudget(cfg.BodyBudget)
	s.metrics.reg.MustRegister(s.budget.collectors()...)
	s.pool = newWorkPool(cfg.APIWorkers)
	s.metrics.reg.MustRegister(s.pool.gauge)
	s.metrics.reg.MustRegister(s.sys.Collectors()...)
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
func (s *Server) AdminTokenPath() string { return s.sys.AdminTokenPath() }

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

// Handler returns the server's HTTP handler (every route), for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Serve runs the control plane (controlplane.System.Run) with the listeners as its front: it
// serves HTTP (HTTPS with TLS) until ctx ends, then shuts down gracefully (requests in flight
// get up to 15 s), and the control plane stops its loops, its node registry and its store, in
// that order. It returns nil after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context) error {
	err := s.sys.Run(ctx, s.serveHTTP)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

// serveHTTP serves every listener, and writes the refused keys' summaries, until ctx ends or a
// listener fails; then it shuts the HTTP servers down (requests in flight get shutdownGrace)
// and writes the summaries still open.
func (s *Server) serveHTTP(ctx context.Context) error {
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
	traces, stopTraces := context.WithCancel(context.WithoutCancel(ctx))
	tracesDone := make(chan struct{})
	go func() { s.keyTraceLoop(traces); close(tracesDone) }()
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
	stopTraces()
	<-tracesDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// holder names this replica in database leases and claims: host, process and address.
func (s *Server) holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), s.ln.Addr())
}

// CheckDrift runs one drift pass now (what the reconciler does every DriftEvery) and returns
// how many tenants have drifted, and the failures of tenants it could not check.
func (s *Server) CheckDrift(ctx context.Context) (int, error) { return s.sys.CheckDrift(ctx) }

// Close stops listening and closes the store if the control plane opened it. It is safe to
// call more than once and after Serve.
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
		if s.sys != nil {
			s.closeErr = s.sys.Close()
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
