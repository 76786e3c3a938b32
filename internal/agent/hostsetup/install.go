// Package hostsetup sets up a host for the node agent (package agent) and checks it: the
// install, check and down steps of Cube Sandbox's install-compute.sh, quickcheck.sh and down.sh.
// Install checks the host's prerequisites and writes the env file and the systemd unit that run
// `cubefleet agent run`; Check probes the local agent, the control plane, this node's
// registration and the S3 endpoint; Down stops only this node's agent. See docs/agent.md.
package hostsetup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent"
	"github.com/cubefleet/cubefleet/internal/agent/envfile"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
)

// Paths of an installation (under InstallOptions.Root / DownOptions.Root when set).
const (
	UnitName    = "cubefleet-agent.service"         // the systemd unit that runs the agent
	UnitPath    = "/etc/systemd/system/" + UnitName // where Install writes it
	PIDFilePath = "/run/cubefleet-agent.pid"        // the installed agent's PID file
)

// Systemctl runs `systemctl args...`; tests replace it.
type Systemctl func(ctx context.Context, args ...string) error

// runSystemctl runs the real systemctl.
func runSystemctl(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InstallOptions tune Install.
type InstallOptions struct {
	// Root, when set and not "/", is a directory the files are written under instead of /
	// (for tests and image builds): systemctl is not run, root is not required, this host is
	// not checked, neither its prerequisites (the files are for another machine, whose agent
	// logs any unmet prerequisite when it starts) nor with the agent check (no agent was
	// started here), and an existing agent is stopped through
	// Root/run/cubefleet-agent.pid. The files' contents name the final paths
	// (/etc/cubefleet/agent.env, ...), as with DESTDIR.
	Root string
	// Binary is the absolute path of the cubefleet binary the unit runs.
	Binary string
	// Out receives one line per step; nil discards.
	Out io.Writer
	// Systemctl runs systemctl; nil runs the real one.
	Systemctl Systemctl
	// Check tunes the check after the install (its Timeout is cfg.CheckTimeout).
	Check CheckOptions
	// Geteuid returns the effective user ID; nil is os.Geteuid.
	Geteuid func() int
}

func (o InstallOptions) real() bool { return o.Root == "" || o.Root == "/" }

func rooted(root, p string) string {
	if root == "" || root == "/" {
		return p
	}
	return filepath.Join(root, p)
}

// Install is `cubefleet agent install`, the install-compute.sh step, for a validated cfg (see
// agent.Load): it checks the prerequisites (see agent.Prerequisites; not under Root), stops an
// existing install (reinstall), writes the env file agent.InstalledEnvFile (mode 0600) and the
// systemd unit UnitPath, creates the state directory (0700), enables and starts the unit with
// systemctl, and runs Check unless cfg.RunCheck is false (under Root none of the three: no agent
// was started on this host). It returns an error for unmet prerequisites (all of them at once),
// a file or systemctl failure, or a failed check.
func Install(ctx context.Context, cfg *agent.Config, opt InstallOptions) error {
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	if opt.Systemctl == nil {
		opt.Systemctl = runSystemctl
	}
	if opt.Geteuid == nil {
		opt.Geteuid = os.Geteuid
	}
	if !filepath.IsAbs(opt.Binary) {
		return fmt.Errorf("the cubefleet binary path %q is not absolute (--binary)", opt.Binary)
	}
	if opt.real() {
		facts, err := cfg.Host.Facts()
		if err != nil {
			return err
		}
		var problems []string
		if opt.Geteuid() != 0 {
			problems = append(problems, "run it as root (sudo cubefleet agent install), or pass --root DIR to write the files under DIR")
		}
		problems = append(problems, agent.Prerequisites(cfg, facts)...)
		if _, err := exec.LookPath("systemctl"); err != nil {
			problems = append(problems, "systemctl was not found: the agent installs as a systemd service")
		}
		if len(problems) > 0 {
			return fmt.Errorf("prerequisites not met:\n  - %s", strings.Join(problems, "\n  - "))
		}
		kvm := "no KVM needed"
		if cfg.Runtime == agent.RuntimeMicroVM {
			kvm = "/dev/kvm present, not a virtual machine"
		}
		fmt.Fprintf(out, "Prerequisites: ok (%s, the cpu controller in %s, %d MiB of memory (floor %d MiB), runtime %s: %s)\n",
			facts.Arch, facts.CgroupCPU, facts.MemTotalMiB(), cfg.MinMemoryKB/1024, cfg.Runtime, kvm)
	} else {
		// The files are for another machine (an image, a test): this one's hardware says
		// nothing about it. The agent checks its own host when it starts.
		fmt.Fprintln(out, "Skipped the host prerequisite checks under --root (the files are for another host): the agent logs any unmet prerequisite when it starts there")
	}

	unit := rooted(opt.Root, UnitPath)
	if _, err := os.Stat(unit); err == nil {
		fmt.Fprintln(out, "Found an existing install: stopping it first (reinstall)")
		if err := downAgent(ctx, DownOptions{Root: opt.Root, Out: out, Systemctl: opt.Systemctl}); err != nil {
			return fmt.Errorf("stop the existing install: %w", err)
		}
	}

	var env bytes.Buffer
	if err := envfile.Write(&env, EnvFileVars(cfg)); err != nil {
		return err
	}
	envPath := rooted(opt.Root, agent.InstalledEnvFile)
	if err := atomicfile.WriteFile(envPath, env.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write the env file: %w", err)
	}
	fmt.Fprintf(out, "Wrote %s (mode 0600)\n", envPath)
	if err := atomicfile.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(unit, RenderUnit(opt.Binary), 0o644); err != nil {
		return fmt.Errorf("write the systemd unit: %w", err)
	}
	fmt.Fprintf(out, "Wrote %s\n", unit)
	stateDir := rooted(opt.Root, cfg.StateDir)
	was, err := agent.PrepareStateDir(stateDir)
	if err != nil {
		return fmt.Errorf("the state directory: %w", err)
	}
	if was != 0 {
		fmt.Fprintf(out, "Changed the mode of %s from %04o to 0700 (it holds the node credential)\n", stateDir, was)
	}

	if opt.real() {
		for _, args := range [][]string{{"daemon-reload"}, {"enable", UnitName}, {"restart", UnitName}} {
			if err := opt.Systemctl(ctx, args...); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "Enabled and started %s\n", UnitName)
	} else {
		fmt.Fprintf(out, "Skipped systemctl under --root: %s was neither enabled nor started\n", UnitName)
	}

	switch {
	case !cfg.RunCheck:
		from := cfg.RunCheckFrom
		if from == "" {
			from = "run check off"
		}
		fmt.Fprintf(out, "Skipped agent check (%s)\n", from)
		return nil
	case !opt.real():
		// Nothing was started here: a check would probe this host, not the one the files are
		// for.
		fmt.Fprintln(out, "Skipped agent check under --root: no agent was started on this host; run `cubefleet agent check` on the host the files are for")
		return nil
	}
	copt := opt.Check
	if copt.StateDir == "" {
		copt.StateDir = stateDir
	}
	return checkInstalled(ctx, cfg, copt, out)
}

// checkInstalled is install's last step: Check for up to cfg.CheckTimeout with a progress line
// per round (unless copt.Progress is set), then one line per check; an error when one fails.
func checkInstalled(ctx context.Context, cfg *agent.Config, copt CheckOptions, out io.Writer) error {
	copt.Timeout = cfg.CheckTimeout
	if copt.Progress == nil {
		copt.Progress = func(r CheckRound) { fmt.Fprintln(out, r) }
	}
	fmt.Fprintf(out, "Running agent check (up to %s)\n", cfg.CheckTimeout)
	results, ok := Check(ctx, cfg, copt)
	for _, r := range results {
		fmt.Fprintln(out, r.String())
	}
	if !ok {
		return errors.New("agent check failed: see the lines above and docs/agent.md, \"Troubleshooting\"")
	}
	return nil
}

// EnvFileVars returns the env file Install writes for cfg: every setting, resolved (the
// detected node IP, the listen address, the control-plane endpoints (https:// ones with their
// scheme), the TLS settings, the join token's value even when it came from a file), under Cube Sandbox's variable names where they exist and
// CUBEFLEET_* otherwise. It holds the S3 secret and the join token, so it is written with mode
// 0600.
func EnvFileVars(cfg *agent.Config) []envfile.Var {
	var eps []string
	for _, ep := range cfg.ControlPlane {
		eps = append(eps, strings.TrimPrefix(ep, "http://"))
	}
	b01 := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	vars := []envfile.Var{
		{Value: "cubefleet agent configuration, written by `cubefleet agent install` (see docs/agent.md).\nMode 0600: it holds the S3 secret access key and the join token. Reinstalling rewrites it."},
		{},
		{Name: "ONE_CLICK_DEPLOY_ROLE", Value: string(cfg.Role)},
		{Name: "ONE_CLICK_CONTROL_PLANE_CUBEOPS_ADDR", Value: strings.Join(eps, ",")},
		{Name: "CUBEFLEET_CONTROL_PLANE_TLS", Value: b01(cfg.ControlPlaneTLS)},
		{Name: "CUBE_SANDBOX_NODE_IP", Value: cfg.NodeID()},
		{Name: "CUBE_SANDBOX_NETWORK_CIDR", Value: cfg.NetworkCIDR.String()},
		{Name: "CUBE_SANDBOX_NETWORK_CIDR_SKIP_CONFLICT_CHECK", Value: b01(cfg.SkipCIDRConflictCheck)},
		{},
		{Name: "CUBE_S3_ENDPOINT", Value: cfg.S3.Endpoint},
		{Name: "CUBE_S3_ACCESS_KEY_ID", Value: cfg.S3.AccessKeyID},
		{Name: "CUBE_S3_SECRET_ACCESS_KEY", Value: cfg.S3.SecretAccessKey.Reveal()},
		{Name: "CUBE_S3_BUCKET", Value: cfg.S3.Bucket},
		{Name: "CUBE_S3_S3FS_EXTRA_OPTS", Value: cfg.S3.S3FSExtraOpts},
		{},
	}
	if cfg.CAFile != "" {
		// An absolute path (Load made it one): the service does not run in this directory.
		vars = append(vars, envfile.Var{Name: "CUBEFLEET_CA_FILE", Value: cfg.CAFile})
	}
	if cfg.JoinToken != "" {
		// The value, not the file it came from: the operator may delete that file once the
		// node has joined, and the service must still start.
		vars = append(vars, envfile.Var{Name: "CUBEFLEET_JOIN_TOKEN", Value: cfg.JoinToken.Reveal()})
	}
	return append(vars,
		envfile.Var{Name: "CUBEFLEET_ALLOW_LOOPBACK", Value: b01(cfg.AllowLoopback)},
		envfile.Var{Name: "CUBEFLEET_RUNTIME", Value: string(cfg.Runtime)},
		envfile.Var{Name: "CUBEFLEET_SANDBOX_DIR", Value: cfg.SandboxDir},
		envfile.Var{Name: "CUBEFLEET_SANDBOX_UIDS", Value: fmt.Sprintf("%d-%d", cfg.SandboxFirstUID, cfg.SandboxFirstUID+cfg.SandboxUIDCount-1)},
		envfile.Var{Name: "CUBEFLEET_SANDBOX_ALLOW_OWN_USER", Value: b01(cfg.SandboxAllowOwnUser)},
		envfile.Var{Name: "CUBEFLEET_SANDBOX_OUTPUT_LIMIT", Value: i64(cfg.SandboxOutputLimit)},
		envfile.Var{Name: "CUBEFLEET_SANDBOX_SPARES", Value: strconv.Itoa(cfg.SandboxSpares)},
		envfile.Var{Name: "CUBEFLEET_CLUSTER_LABEL", Value: cfg.ClusterLabel},
		envfile.Var{Name: "CUBEFLEET_AGENT_LISTEN", Value: cfg.Listen},
		envfile.Var{Name: "CUBEFLEET_AGENT_STATE_DIR", Value: cfg.StateDir},
		envfile.Var{Name: "CUBEFLEET_AGENT_PID_FILE", Value: PIDFilePath},
		envfile.Var{Name: "CUBEFLEET_REPORT_PERIOD", Value: cfg.ReportPeriod.String()},
		envfile.Var{Name: "CUBEFLEET_QUOTA_CPU", Value: i64(cfg.QuotaCPU)},
		envfile.Var{Name: "CUBEFLEET_QUOTA_MEM_MB", Value: i64(cfg.QuotaMemMB)},
		envfile.Var{Name: "CUBEFLEET_MAX_MVM_NUM", Value: i64(cfg.MaxMVMNum)},
		envfile.Var{Name: "CUBEFLEET_CREATE_CONCURRENT_NUM", Value: i64(cfg.CreateConcurrentNum)},
		envfile.Var{Name: "CUBE_MIN_MEMORY_KB", Value: i64(cfg.MinMemoryKB)},
		envfile.Var{Name: "ONE_CLICK_RUN_QUICKCHECK", Value: b01(cfg.RunCheck)},
		envfile.Var{Name: "CUBE_QUICKCHECK_READY_TIMEOUT", Value: strconv.FormatInt(int64(cfg.CheckTimeout/time.Second), 10)},
	)
}

// RenderUnit returns the systemd unit that runs binary as the agent with the installed env file.
// KillMode=process: stopping or restarting the unit ends the agent only, not its sandboxes'
// supervisors (in the unit's cgroup too), so that sandboxes outlive a restart of the agent and
// the next one takes them over; `agent down` stops them (Down).
func RenderUnit(binary string) []byte {
	return []byte(`# Written by ` + "`cubefleet agent install`" + `; reinstalling rewrites it. See docs/agent.md.
[Unit]
Description=cubefleet agent: registers this node with the control plane, reports its status and runs its sandboxes
Documentation=https://github.com/cubefleet/cubefleet/blob/main/docs/agent.md
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
ExecStart=` + systemdQuote(binary) + ` agent run --env-file ` + agent.InstalledEnvFile + `
Restart=always
RestartSec=2
KillMode=process
KillSignal=SIGTERM
TimeoutStopSec=15
UMask=0077

[Install]
WantedBy=multi-user.target
`)
}

// systemdQuote quotes a path for ExecStart when it holds blanks, quotes or backslashes.
func systemdQuote(s string) string {
	if !strings.ContainsAny(s, " \t\"'\\") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
