package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/server"
)

func newServerCmd(stdio IO) *cobra.Command {
	var cfg server.Config
	var modules string
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
methods answer UNSUPPORTED, fleet export reports them as missing and plans block them.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			disabled, err := server.ParseModules(modules)
			if err != nil {
				return usagef("--modules: %v", err)
			}
			cfg.Disabled = disabled
			log, err := server.NewLogger(stdio.Err, cfg.LogFormat)
			if err != nil {
				return usagef("--log-format: %v", err)
			}
			ctx := cmd.Context()
			srv, err := server.New(ctx, cfg, log)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if p := srv.AdminTokenPath(); p != "" {
				fmt.Fprintf(out, "Administrator API key written to %s (mode 0600; it is not shown anywhere else).\n", p)
			} else if p := filepath.Join(cfg.DataDir, server.AdminTokenFile); cfg.Dev && privatefile.Check(p) == nil {
				fmt.Fprintf(out, "Administrator API key: %s (written on first start).\n", p)
			}
			fmt.Fprintf(out, "cubefleet control plane listening on %s\n", srv.URL())
			return srv.Serve(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", server.DefaultListen, "address to serve the API on")
	f.StringVar(&cfg.DataDir, "data-dir", server.DefaultDataDir, "data directory (created with mode 0700)")
	f.StringVar(&cfg.Database, "database", "", "database: a postgres:// URL, or a SQLite file (default <data-dir>/cubefleet.db)")
	f.BoolVar(&cfg.Dev, "dev", false, "development mode: bootstrap an admin key into <data-dir>/admin.token on first start and seed the example tenants acme and globex")
	f.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&modules, "modules", server.DefaultModules, "modules to run: core, vps, vps-templates (comma-separated; core is always on)")
	f.StringVar(&cfg.VaultAddr, "vault-addr", "", "Vault address for vault:// references (none: plans block on them)")
	f.DurationVar(&cfg.DriftEvery, "drift-every", fleet.DefaultDriftEvery, "how often the drift reconciler re-plans applied documents (a negative value turns it off)")
	cmd.AddCommand(newServerInitCmd(stdio))
	return cmd
}

func newServerInitCmd(stdio IO) *cobra.Command {
	var cfg server.InitConfig
	cmd := &cobra.Command{
		Use:   "init --token-out FILE",
		Short: "Initialize a production control plane once: the root tenant and its first admin key",
		Long: `Initialize a control plane's database once: run the migrations, create the root tenant and
its first administrator (a service account holding every permission), and write the
administrator's API key to --token-out (mode 0600; an existing file is never overwritten).
Refuses when the database is already initialized.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := server.Init(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Initialized: administrator key %s written to %s (mode 0600; it is not shown anywhere else).\n", key.ID, cfg.TokenOut)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", server.DefaultDataDir, "data directory (created with mode 0700)")
	f.StringVar(&cfg.Database, "database", "", "database: a postgres:// URL, or a SQLite file (default <data-dir>/cubefleet.db)")
	f.StringVar(&cfg.TokenOut, "token-out", "", "file to write the administrator's API key to (mode 0600)")
	cmd.MarkFlagRequired("token-out")
	return cmd
}
