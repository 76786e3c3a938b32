package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm"
	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
	"github.com/cubefleet/cubefleet/internal/agent/hostsetup"
	"github.com/cubefleet/cubefleet/internal/server"
)

// newAgentCmd builds `cubefleet agent`: the node agent (run, the default) and the
// install-compute.sh, quickcheck.sh and down.sh steps (install, check, down). See docs/agent.md.
func newAgentCmd(stdio IO) *cobra.Command {
	var logFormat, hostRoot string
	cmd := &cobra.Command{
		Use:   "agent [run|install|check|down|image]",
		Short: "Node agent: register this host with the control plane and report its status",
		Long: `The node agent of a compute host (a "Cube"). "cubefleet agent" alone is "cubefleet agent run".

Settings come from flags, then the environment (CUBEFLEET_* names first, then Cube Sandbox's
names such as CUBE_SANDBOX_NODE_IP), then the env file (--env-file, $ONE_CLICK_ENV_FILE, ./.env,
else ` + agent.InstalledEnvFile + `), then the defaults. They are validated before anything is
touched: the role and the control-plane address, CUBE_S3_ENDPOINT, the node IP, the sandbox
network. See docs/agent.md for every setting.`,
		Args: agentNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd, stdio, logFormat, hostRoot) },
	}
	pf := cmd.PersistentFlags()
	for _, s := range agent.Settings() {
		if !s.NoFlag && s.Command == "" {
			addSettingFlag(pf, s)
		}
	}
	pf.StringVar(&logFormat, "log-format", "text", "log format of agent run: text or json")
	pf.StringVar(&hostRoot, "host-root", "/", "read the host's /proc, /sys, /etc and /dev under this directory (tests)")
	pf.MarkHidden("host-root")

	run := &cobra.Command{
		Use:   "run",
		Short: "Run the agent in the foreground (SIGINT or SIGTERM stops it)",
		Long: `Run the agent in the foreground: register with the control plane (retrying with backoff from
100 ms to 7 s), then report the node's status every --report-period; serve GET /healthz on
--listen. SIGINT or SIGTERM stops it (exit 0).`,
		Args: agentNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd, stdio, logFormat, hostRoot) },
	}

	var root, binary string
	install := &cobra.Command{
		Use:   "install [--root DIR]",
		Short: "Install the agent as a systemd service (Cube's install-compute.sh step), then check it",
		Long: `Validate the settings, check the prerequisites (x86_64 or aarch64, cgroup v2, the memory floor,
and for --runtime microvm /dev/kvm on a host that is not a virtual machine), stop an existing
install, write ` + agent.InstalledEnvFile + ` (mode 0600) and ` + hostsetup.UnitPath + `,
enable and start the service, and run "agent check" unless --run-check=0 (ONE_CLICK_RUN_QUICKCHECK=0).
--root DIR writes the files under DIR for another host (an image): no systemctl, no root, and
no checks of this host (prerequisites, sandbox network conflicts, the agent check); the agent
checks its host when it starts, and "agent check" runs there.`,
		Args: agentNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Under --root the files are for another host: this one's network is no conflict.
			cfg, err := loadAgentConfig(cmd, stdio, hostRoot, root != "" && root != "/")
			if err != nil {
				return err
			}
			if binary == "" {
				if binary, err = os.Executable(); err != nil {
					return err
				}
				if resolved, err := filepath.EvalSymlinks(binary); err == nil {
					binary = resolved
				}
			}
			return hostsetup.Install(cmd.Context(), cfg, hostsetup.InstallOptions{Root: root, Binary: binary, Out: cmd.OutOrStdout()})
		},
	}
	install.Flags().StringVar(&root, "root", "", "write the files under this directory instead of / (no systemctl, no root needed)")
	install.Flags().StringVar(&binary, "binary", "", "absolute path of the cubefleet binary the unit runs (default: this executable)")

	check := &cobra.Command{
		Use:   "check [--timeout 120s]",
		Short: "Check the local agent, the control plane and this node's registration (quickcheck)",
		Long: `Check that the local agent answers GET /healthz, that the control plane is ready, that it
lists this node under /internal/v1/nodes/{node_id} with "IP":"<node ip>", and that the S3
endpoint answers on TCP. Polls every 2 s until all pass or --timeout passes, with a line per
attempt on stderr while it waits; a failure that retrying cannot fix (the agent reports its node
not Ready for what it found at its start, its credential was revoked, the process runtime cannot
run sandboxes here) stops it at once. Prints one line per check; exit 0 when all pass, else 1.`,
		Args: agentNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadAgentConfig(cmd, stdio, hostRoot, true)
			if err != nil {
				return err
			}
			// A line per attempt on stderr while it waits; stdout holds the results.
			progress := func(r hostsetup.CheckRound) { linef(cmd.ErrOrStderr(), "%s\n", r.String()) }
			results, ok := hostsetup.Check(cmd.Context(), cfg, hostsetup.CheckOptions{Timeout: cfg.CheckTimeout, Progress: progress})
			if err := render(cmd, results, func(w io.Writer) error {
				for _, r := range results {
					fmt.Fprintln(w, r.String())
				}
				return nil
			}); err != nil {
				return err
			}
			if !ok {
				for _, r := range results {
					if r.Final {
						return fmt.Errorf("agent check failed: %s: retrying cannot fix this, so the check stopped", r.Name)
					}
				}
				return errors.New("agent check failed")
			}
			return nil
		},
	}

	var downRoot string
	down := &cobra.Command{
		Use:   "down [--root DIR]",
		Short: "Stop this node's agent (found by its settings: PID file, else its state directory's lock), then its sandboxes",
		Long: `Stop this node's agent, found by the settings given (--env-file, the environment): the process in
its PID file (CUBEFLEET_AGENT_PID_FILE, else /run/cubefleet-agent.pid), else the one holding its
state directory's agent.lock, only when that process is a cubefleet agent holding the lock. The
installed unit's agent is stopped with systemctl stop; another gets SIGTERM, and down waits for it
to exit (at most 15 s). Then, for the process runtime, every sandbox in its sandbox directory
(SIGTERM, then SIGKILL after their grace, at most 15 s), so that no process of it survives, and
their user id leases end. Nothing is deleted: the next agent reports the sandboxes' ends to the
control plane. Exit 0 once all of it stopped (also when the agent was not running).`,
		Args: agentNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt := hostsetup.DownOptions{Root: downRoot, Out: cmd.OutOrStdout()}
			cfg, cfgErr := loadAgentConfig(cmd, stdio, hostRoot, true)
			if cfgErr != nil {
				// The agent is stopped all the same; its sandboxes need the settings.
				if err := hostsetup.Down(cmd.Context(), opt); err != nil {
					return err
				}
				return fmt.Errorf("the agent is stopped, its sandboxes are not (their directory is a setting): %w", cfgErr)
			}
			opt.Config = cfg
			return hostsetup.Down(cmd.Context(), opt)
		},
	}
	down.Flags().StringVar(&downRoot, "root", "", "take every path under DIR (the PID file, the state and sandbox directories) and never run systemctl")

	for _, s := range agent.Settings() {
		switch s.Command {
		case "check":
			addSettingFlag(check.Flags(), s)
			addSettingFlag(install.Flags(), s)
		case "install":
			addSettingFlag(install.Flags(), s)
		}
	}
	cmd.AddCommand(run, install, check, down, agentImageCmd())
	return cmd
}

// agentImageCmd is `agent image`: the microvm runtime's template images.
func agentImageCmd() *cobra.Command {
	image := &cobra.Command{Use: "image", Short: "Manage the microvm runtime's template images (<imageId>.ext4 in CUBEFLEET_IMAGE_DIR)"}
	var dir string
	imp := &cobra.Command{
		Use:   "import NAME FILE|DIR",
		Short: "Make FILE (a raw ext4 image) or DIR (built with mkfs.ext4 -d) the image NAME, a template's imageId",
		Long: `Make FILE, a raw ext4 image, or DIR, a root file system tree built into one with mkfs.ext4 -d, the
image NAME of this node: <image dir>/NAME.ext4, where the microvm runtime boots the templates whose
imageId is NAME. The image is written beside its final name and renamed into place; a template is
listed as prepared on the node once its image is here. Prints the image's path.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				dir = cmp.Or(os.Getenv("CUBEFLEET_IMAGE_DIR"), agent.DefaultImageDir)
			}
			path, err := microvm.ImportImage(cmd.Context(), dir, args[0], args[1])
			if err != nil {
				return err
			}
			linef(cmd.OutOrStdout(), "%s\n", path)
			return nil
		},
	}
	imp.Flags().StringVar(&dir, "image-dir", "", "the image directory (default $CUBEFLEET_IMAGE_DIR, else "+agent.DefaultImageDir+")")
	image.AddCommand(imp)
	return image
}

// agentNoArgs is noArgs for the agent commands, except that a switch's value written after a
// space (--run-check 0: pflag takes the switch alone as 1 and 0 as an argument) is explained:
// a switch takes its value after "=".
func agentNoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		switch strings.ToLower(args[0]) {
		case "0", "1", "true", "false", "yes", "no", "on", "off":
			var switches []string
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Changed && f.NoOptDefVal != "" && f.Value.String() == f.NoOptDefVal {
					switches = append(switches, f.Name)
				}
			})
			if len(switches) == 1 {
				return usagef("%q is not a command: a switch takes its value after \"=\": write --%s=%s (--%s alone means %s)", args[0], switches[0], args[0], switches[0], cmd.Flags().Lookup(switches[0]).NoOptDefVal)
			}
			if len(switches) > 1 {
				return usagef("%q is not a command: a switch takes its value after \"=\", as in --%s=%s", args[0], switches[0], args[0])
			}
		}
	}
	return noArgs(cmd, args)
}

// addSettingFlag declares s as a string flag; a switch needs no value (--allow-loopback = 1).
func addSettingFlag(f *pflag.FlagSet, s agent.Setting) {
	usage := s.Usage
	if len(s.Env) > 0 {
		usage += " ($" + s.Env[len(s.Env)-1] + ")"
	}
	if s.Bool {
		usage += " (0 or 1, after =: --" + s.Key + "=0)"
	}
	f.String(s.Key, s.Default, usage)
	if s.Bool {
		f.Lookup(s.Key).NoOptDefVal = "1"
	}
}

// loadAgentConfig loads and validates the agent's settings from the command's flags, the IO's
// environment and the env file, and prints the warnings to stderr.
func loadAgentConfig(cmd *cobra.Command, stdio IO, hostRoot string, noConflictCheck bool) (*agent.Config, error) {
	flags := map[string]string{}
	for _, s := range agent.Settings() {
		if f := cmd.Flags().Lookup(s.Key); f != nil && f.Changed {
			flags[s.Key] = f.Value.String()
		}
	}
	cfg, err := agent.Load(agent.Sources{Flags: flags, Getenv: stdio.Getenv, Host: hostinfo.Host{Root: hostRoot}, NoConflictCheck: noConflictCheck})
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
	}
	return cfg, nil
}

func runAgent(cmd *cobra.Command, stdio IO, logFormat, hostRoot string) error {
	log, err := server.NewLogger(cmd.ErrOrStderr(), logFormat)
	if err != nil {
		return usagef("--log-format: %v", err)
	}
	cfg, err := loadAgentConfig(cmd, stdio, hostRoot, false)
	if err != nil {
		return err
	}
	a, err := agent.New(cfg, agent.Options{Log: log})
	if err != nil {
		return err
	}
	return a.Run(cmd.Context())
}
