package api

import (
	"log/slog"
	"time"

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

// Config is what the methods' handlers use. New only keeps it: nothing in it is used until a
// method runs.
type Config struct {
	// DB is the database: write methods run in its transactions.
	DB *store.DB
	// Compute runs the compute objects (with fleet names and the disabled modules).
	Compute *compute.Service
	// Secrets seals secret values.
	Secrets *secrets.Box
	// Nodes is the node registry.
	Nodes *nodes.Registry
	// Scheduler is the placement lane (nil: the scheduler.* methods answer UNSUPPORTED).
	Scheduler *lane.Lane
	// Webhooks manages webhook subscriptions; nil answers webhooks.create and
	// webhooks.rotateSecret UNSUPPORTED.
	Webhooks *events.Webhooks
	// DriftIgnore are the drift ignore rules (--drift-ignore): fleet.status shows them and
	// fleet.status with check leaves their fields out.
	DriftIgnore []fleet.IgnoreRule
	// NodeStore is the node registry's persistence: it keeps join tokens.
	NodeStore *nodestore.Store
	// Sandboxes runs the sandboxes; nil answers sandboxes.* UNSUPPORTED (a deployment
	// without the vps-templates module).
	Sandboxes *sandboxes.Service
	// VaultConfigured is true when a Vault server is configured (--vault-addr); without one,
	// fleet plans block on vault:// references.
	VaultConfigured bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives what a handler logs (an audit row that could not be written); nil discards.
	Log *slog.Logger
	// AfterCheck and BeforeCall are fleet.apply's test hooks (fleet.Applier's); nil in
	// production.
	AfterCheck func()
	BeforeCall func(i int) error
}

// deps is what the register functions give the handlers: Config with its defaults.
type deps struct {
	db              *store.DB
	compute         *compute.Service
	secrets         *secrets.Box
	nodes           *nodes.Registry
	scheduler       *lane.Lane
	webhooks        *events.Webhooks
	driftIgnore     []fleet.IgnoreRule
	nodeStore       *nodestore.Store
	sandboxes       *sandboxes.Service
	vaultConfigured bool
	now             func() time.Time
	log             *slog.Logger
	afterCheck      func()
	beforeCall      func(i int) error
	// registry is the method table (iam.keys.create and iam.permissions.list read its
	// catalogue); planner and applier run the fleet.* methods.
	registry *Registry
	planner  *fleet.Planner
	applier  *fleet.Applier
}

// New returns the registry of every API method, over cfg: iam.*, audit.list, compute.<kind>.*,
// secrets.*, fleet.*, nodes.*, events.list, sandboxes.*, webhooks.* and scheduler.*. Methods of a module the deployment leaves out
// stay registered and answer UNSUPPORTED, so the table (and its catalogue) is the same for
// every deployment.
func New(cfg Config) *Registry {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	d := &deps{db: cfg.DB, compute: cfg.Compute, secrets: cfg.Secrets, nodes: cfg.Nodes, nodeStore: cfg.NodeStore, scheduler: cfg.Scheduler,
		sandboxes: cfg.Sandboxes, webhooks: cfg.Webhooks, driftIgnore: cfg.DriftIgnore, vaultConfigured: cfg.VaultConfigured,
		now: cfg.Now, log: cfg.Log, afterCheck: cfg.AfterCheck, beforeCall: cfg.BeforeCall}
	r := NewRegistry(cfg.DB, cfg.Now, cfg.Log)
	d.registry = r
	d.planner = &fleet.Planner{Compute: d.compute, VaultConfigured: d.vaultConfigured, DriftIgnore: d.driftIgnore}
	d.applier = &fleet.Applier{DB: d.db, Planner: d.planner, Now: d.now, Log: d.log, AfterCheck: d.afterCheck, BeforeCall: d.beforeCall}
	registerIAMMethods(r, d)
	registerAuditMethods(r, d)
	registerComputeMethods(r, d)
	registerSecretsMethods(r, d)
	registerFleetMethods(r, d)
	registerNodesMethods(r, d)
	registerSandboxesMethods(r, d)
	registerSchedulerMethods(r, d)
	registerWebhooksMethods(r, d)
	return r
}

// Catalogue returns the permission catalogue of the API's method table (New's): what
// `cubefleet keys permissions` prints and what iam checks grants against. It is the same for
// every deployment.
func Catalogue() iam.Catalogue { return New(Config{}).Catalogue() }
