package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/server"
)

// serverGCPercent is the GC target `cubefleet server` runs with unless GOGC is set.
const serverGCPercent = 40

func newServerCmd(stdio IO) *cobra.Command {
	var cfg server.Config
	def := controlplane.Default()
	var modules, allowCIDRs, bodyBudget, originsPath string
	var cubeCount int
	var driftIgnore []string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane",
		Long: `Run the control plane: the HTTP API on --listen (loopback by default), with its data in
--data-dir (mode 0700): the SQLite database (unless --database names PostgreSQL) and
secrets.key, which seals secret values. Migrations run at start. SIGINT or SIGTERM stops it
gracefully.

--dev is for a laptop: on first start it creates the root tenant and an administrator API
key holding every permission, writes the key to <data-dir>/admin.token (mode 0600; the key is
never printed or logged, only the file's path), and seeds the example tenants acme and globex.
A production control plane runs "cubefleet server init" once instead.

--modules chooses the optional modules: core (always on: IAM, audit, secrets, sites, pools,
owner quotas, offers, fleet as code), vps (flavors, provider accounts, sandbox templates) and
vps-templates (sandbox templates; needs vps). "--modules core" runs without sandboxes: their
methods answer UNSUPPORTED, fleet export reports them as missing and plans block them.

Compute nodes register and report on the node-agent routes (/internal/v1/node-agent/...) and
are listed on /internal/v1/nodes. With --internal-listen those routes are served there (the
worker network) and not on --listen, so the API can stay on loopback. Nodes authenticate with a
join token and then their node credential; stock Cubelets, which send no credentials, are
accepted only from --node-agent-allow-unauthenticated (comma-separated CIDRs; default none).
A node is Suspect after one heartbeat window without a report (twice its observed report
interval, at least --node-heartbeat-timeout), Down after two, Lost after --node-lost-after;
after a restart it is Unknown until it reports. See docs/nodes.md.

Membership is learnt live from registration: adding or removing a Cube needs no restart. A
deployment that loads a fixed origin list at start passes --origins FILE --cube-count N (the
file coordinator render checks): then only registered nodes whose id is the host of one of its
origins are schedulable, and each runs at most 3 sandboxes at once (a Cube's 3 coordinator
slots; a fourth waits for room, or goes to another Cube). Move to a new list with a ready replacement server on the shared
PostgreSQL, hand traffic over, and let this one finish its accepted work before stopping it.

--tls-cert FILE and --tls-key FILE (PEM; both or neither) make both listeners serve HTTPS only,
TLS 1.2 or later. The key file must be a regular file owned by this user with mode 0600. The
pair is loaded at start (a bad pair stops the start) and looked at again every few seconds: to
rotate, replace the files (the key first, each by a rename) and new connections get the new
certificate; a new pair that does not load is logged and the previous one kept. Clients pass
--ca-file when the certificate is not signed by a CA the system trusts. See docs/server.md.

--scheduler-config FILE is a cubemaster.yaml whose scheduler section configures placement
(docs/scheduler.md; "cubefleet scheduler check FILE" validates one). An invalid file stops the
start. SIGHUP re-reads it; when the new file is invalid the previous configuration stays in
force and one error line names every problem.

The drift reconciler re-plans every applied fleet document each --drift-every and publishes
fleet.drifted and fleet.converged; --drift-ignore KIND.FIELD (repeatable, e.g. pool.gpuModel)
leaves a field out of drift detection, never out of plan and apply. Webhooks deliver events to
public addresses only unless --allow-private-webhook-targets is given (--dev does not imply
it). The web console is served at /console; a sign-in lasts --console-session-ttl and ends
with its API key. See docs/drift-webhooks.md and docs/console.md.

Sandboxes run on the nodes' agents; the control plane keeps their records and results. Each
output stream is kept up to --result-max-bytes (the rest cut with a marker), a tenant's results
together up to --tenant-result-max-bytes (past it the oldest results' output is dropped), ended
sandboxes for --result-retention; a create waits for room in its pool up to --pending-timeout; a tenant
has at most --tenant-max-sandboxes pending, starting or running. See docs/sandboxes.md.

The API authenticates a call before it reads its body, reads bodies as they arrive under a cap
per method, holds at most --api-body-budget bytes of bodies at once (past it: 429 with
Retry-After) and closes a connection whose body arrives slower than --api-body-min-rate. At
most --api-workers calls run at once. env:// references are the root tenant's only, for the
variables --env-ref-allow lets through. Audit rows are kept for --audit-retention. See
docs/server.md and docs/iam.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			disabled, err := controlplane.ParseModules(modules)
			if err != nil {
				return usagef("--modules: %v", err)
			}
			cfg.Disabled = disabled
			if cfg.DriftIgnore, err = controlplane.ParseDriftIgnore(driftIgnore); err != nil {
				return usagef("%v", err)
			}
			if cfg.ConsoleSessionTTL < time.Minute || cfg.ConsoleSessionTTL > 7*24*time.Hour {
				return usagef("--console-session-ttl %s: give 1m to 168h", cfg.ConsoleSessionTTL)
			}
			switch {
			case cfg.ResultMaxBytes < 1 || cfg.ResultMaxBytes > def.MaxResultMaxBytes:
				return usagef("--result-max-bytes %d: give 1 to %d (64 MiB)", cfg.ResultMaxBytes, def.MaxResultMaxBytes)
			case cfg.TenantResultMaxBytes < 2*cfg.ResultMaxBytes:
				return usagef("--tenant-result-max-bytes %d: give at least 2 × --result-max-bytes (%d), so one whole result fits", cfg.TenantResultMaxBytes, 2*cfg.ResultMaxBytes)
			case cfg.ResultRetention < time.Minute:
				return usagef("--result-retention %s: give at least 1m", cfg.ResultRetention)
			case cfg.PendingTimeout < time.Second:
				return usagef("--pending-timeout %s: give at least 1s", cfg.PendingTimeout)
			case cfg.DisconnectGrace < 0:
				return usagef("--disconnect-grace %s: give at least 1s, or 0 for the heartbeat window plus 60s", cfg.DisconnectGrace)
			case cfg.TenantMaxSandboxes < 1:
				return usagef("--tenant-max-sandboxes %d: give at least 1", cfg.TenantMaxSandboxes)
			}
			if cfg.NodeAgentAllowUnauthenticated, err = controlplane.ParseCIDRs(allowCIDRs); err != nil {
				return usagef("--node-agent-allow-unauthenticated: %v", err)
			}
			switch {
			case cfg.TLSCert != "" && cfg.TLSKey == "":
				return usagef("--tls-key is missing: --tls-cert needs it (give both PEM files, or neither)")
			case cfg.TLSKey != "" && cfg.TLSCert == "":
				return usagef("--tls-cert is missing: --tls-key needs it (give both PEM files, or neither)")
			}
			budget, err := humanize.ParseBytes(bodyBudget)
			if err != nil || budget == 0 || budget > 1<<40 {
				return usagef("--api-body-budget %q: give a size such as 64MiB or 256MB", bodyBudget)
			}
			cfg.BodyBudget = int64(budget)
			if _, err := controlplane.ParseEnvRefs(cfg.EnvRefAllow); err != nil {
				return usagef("%v", err)
			}
			if originsPath == "" && cmd.Flags().Changed("cube-count") {
				return usagef("--cube-count applies only with --origins")
			}
			if originsPath != "" {
				c, err := readOrigins(originsPath, cubeCount)
				if err != nil {
					return err
				}
				cfg.Membership, cfg.MemberSlots = c.Origins, cubes.SlotsPerCube
			}
			if cfg.APIWorkers < 0 {
				return usagef("--api-workers %d: give a positive number of calls, or 0 for one per CPU", cfg.APIWorkers)
			}
			if cfg.NodeHeartbeatTimeout <= 0 || cfg.NodeLostAfter <= 2*cfg.NodeHeartbeatTimeout {
				return usagef("--node-lost-after (%s) must exceed twice --node-heartbeat-timeout (%s), which must be positive", cfg.NodeLostAfter, cfg.NodeHeartbeatTimeout)
			}
			log, err := server.NewLogger(stdio.Err, cfg.LogFormat)
			if err != nil {
				return usagef("--log-format: %v", err)
			}
			// The server keeps one keep-alive connection per reporting node, about 20 KB each
			// with its goroutine; a GC target of 40% instead of Go's 100% keeps 10,000 nodes
			// under 500 MB resident for a few percent of CPU. GOGC in the environment wins.
			if stdio.Getenv("GOGC") == "" {
				debug.SetGCPercent(serverGCPercent)
			}
			ctx := cmd.Context()
			srv, err := server.New(ctx, cfg, log)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if p := srv.AdminTokenPath(); p != "" {
				fmt.Fprintf(out, "Administrator API key written to %s (mode 0600; it is not shown anywhere else).\n", p)
			} else if p := filepath.Join(cfg.DataDir, controlplane.AdminTokenFile); cfg.Dev && privatefile.Check(p) == nil {
				fmt.Fprintf(out, "Administrator API key: %s (written on first start).\n", p)
			}
			if cfg.InternalListen != "" {
				fmt.Fprintf(out, "cubefleet control plane listening on %s (node-agent routes on %s)\n", srv.URL(), srv.InternalURL())
			} else {
				fmt.Fprintf(out, "cubefleet control plane listening on %s\n", srv.URL())
			}
			// SIGHUP is always handled (its default action would end the server): it re-reads
			// --scheduler-config, or logs that there is nothing to reload.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						srv.ReloadSchedulerConfig() // logs what it did, or why not
					}
				}
			}()
			return srv.Serve(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", server.DefaultListen, "address to serve the API on")
	f.StringVar(&cfg.DataDir, "data-dir", def.DataDir, "data directory (created with mode 0700)")
	f.StringVar(&cfg.Database, "database", "", "database: a postgres:// URL, or a SQLite file (default <data-dir>/cubefleet.db)")
	f.BoolVar(&cfg.Dev, "dev", false, "development mode: bootstrap an admin key into <data-dir>/admin.token on first start and seed the example tenants acme and globex")
	f.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&modules, "modules", def.Modules, "modules to run: core, vps, vps-templates (comma-separated; core is always on)")
	f.StringVar(&cfg.VaultAddr, "vault-addr", "", "Vault address for vault:// references (none: plans block on them)")
	durationVar(f, &cfg.DriftEvery, "drift-every", def.DriftEvery, "how often the drift reconciler re-plans applied documents (a negative value turns it off)")
	f.StringVar(&cfg.InternalListen, "internal-listen", "", "address (the worker network) to serve the node-agent and internal nodes routes on instead of --listen")
	durationVar(f, &cfg.NodeHeartbeatTimeout, "node-heartbeat-timeout", def.NodeHeartbeatTimeout, "the shortest heartbeat window: a node without a report for its window (twice its report interval, at least this) is Suspect (two: Down)")
	durationVar(f, &cfg.NodeLostAfter, "node-lost-after", def.NodeLostAfter, "a node without a report for this long is Lost")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate chain: serve HTTPS only on --listen and --internal-listen (needs --tls-key)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert (a file you own, mode 0600)")
	f.StringVar(&cfg.CubeMasterListen, "cubemaster-listen", "", "address to answer as CubeMaster on for the one-click scripts (port 8089: GET /notify/health, /internal/meta/nodes), with the node-agent routes")
	f.StringVar(&cfg.SchedulerConfig, "scheduler-config", "", "cubemaster.yaml-shaped scheduler configuration (SIGHUP re-reads it; default: profile balanced_spread)")
	f.StringVar(&originsPath, "origins", "", "static membership: a Cube origins file (as coordinator render reads it); only nodes registered under one of its hosts are schedulable (default: every registered node)")
	f.IntVar(&cubeCount, "cube-count", cubes.DefaultCubeCount, "with --origins: how many origins the file must list")
	f.StringVar(&allowCIDRs, "node-agent-allow-unauthenticated", "", "comma-separated CIDRs from which node-agent and internal nodes calls without credentials (stock Cubelets) are accepted (default: none)")
	f.StringArrayVar(&driftIgnore, "drift-ignore", nil, "leave KIND.FIELD out of drift detection (repeatable, e.g. pool.gpuModel); plan and apply still see it")
	f.BoolVar(&cfg.AllowPrivateWebhookTargets, "allow-private-webhook-targets", false, "allow webhook URLs on loopback and private (RFC 1918, fc00::/7) addresses; link-local, cloud metadata, unspecified and reserved ones stay refused (not implied by --dev)")
	durationVar(f, &cfg.ConsoleSessionTTL, "console-session-ttl", def.ConsoleSessionTTL, "how long a web console sign-in lasts (1m to 168h)")
	f.Int64Var(&cfg.ResultMaxBytes, "result-max-bytes", def.ResultMaxBytes, "bytes of each output stream a sandbox's result keeps; the rest is cut with a marker (1 to 67108864)")
	f.Int64Var(&cfg.TenantResultMaxBytes, "tenant-result-max-bytes", def.TenantResultMaxBytes, "output bytes (both streams) one tenant's ended sandboxes keep together; past it the oldest results' output is dropped first, their records stay (at least 2 × --result-max-bytes)")
	durationVar(f, &cfg.ResultRetention, "result-retention", def.ResultRetention, "how long ended sandboxes and their results are kept")
	durationVar(f, &cfg.PendingTimeout, "pending-timeout", def.PendingTimeout, "how long a create waits for room in its pool before it fails")
	durationVar(f, &cfg.DisconnectGrace, "disconnect-grace", 0, "how long after its node's last report a running sandbox of a node that stopped reporting stays unknown (and runs on if the node comes back) before it is lost and stopped on the node's return; a template's disconnectGraceSeconds overrides it (0: --node-heartbeat-timeout plus 60s)")
	f.IntVar(&cfg.TenantMaxSandboxes, "tenant-max-sandboxes", def.TenantMaxSandboxes, "sandboxes one tenant may have pending, starting or running at once")
	f.IntVar(&cfg.APIWorkers, "api-workers", 0, "API calls that run at once (others queue; writes go first up to half of them); 0: one per CPU, at least 2")
	f.StringVar(&bodyBudget, "api-body-budget", humanize.IBytes(server.DefaultBodyBudget), "most bytes of API request bodies held at once across all calls; past it a call is answered RESOURCE_EXHAUSTED (429) with Retry-After")
	f.Int64Var(&cfg.BodyMinRate, "api-body-min-rate", server.DefaultBodyMinRate, "bytes per second an API request body must keep arriving at after its first 5 s, or the connection is closed (negative: no minimum)")
	f.StringArrayVar(&cfg.EnvRefAllow, "env-ref-allow", nil, "let the root tenant's env:// references read environment variables whose names start with PREFIX (repeatable; default none)")
	durationVar(f, &cfg.AuditRetention, "audit-retention", def.AuditRetention, "audit rows older than this are deleted (hourly, by one replica); a negative value keeps every row")
	cmd.AddCommand(newServerInitCmd(stdio))
	return cmd
}

func newServerInitCmd(stdio IO) *cobra.Command {
	var cfg controlplane.InitConfig
	cmd := &cobra.Command{
		Use:   "init --token-out FILE",
		Short: "Initialize a production control plane once: the root tenant and its first admin key",
		Long: `Initialize a control plane's database once: run the migrations, create the root tenant and
its first administrator (a service account holding every permission), and write the
administrator's API key to --token-out (mode 0600; an existing file is never overwritten).
Refuses when the database is already initialized.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := controlplane.Init(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Initialized: administrator key %s written to %s (mode 0600; it is not shown anywhere else).\n", key.ID, cfg.TokenOut)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", controlplane.DefaultDataDir, "data directory (created with mode 0700)")
	f.StringVar(&cfg.Database, "database", "", "database: a postgres:// URL, or a SQLite file (default <data-dir>/cubefleet.db)")
	f.StringVar(&cfg.TokenOut, "token-out", "", "file to write the administrator's API key to (mode 0600)")
	cmd.MarkFlagRequired("token-out")
	return cmd
}
