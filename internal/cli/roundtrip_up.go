package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/fleetssh"
)

// EnvCrashAt names a point of the roundtrip workflows ("create-server/applied": a step's
// name, then begun, applied or done) where the process kills itself with SIGKILL: the crash
// tests' way of stopping a real run between a side effect and its journal entry.
const EnvCrashAt = "CUBEFLEET_TEST_CRASH_AT"

// roundtripFlags are the flags roundtrip up and down share besides the fleet's.
type roundtripFlags struct {
	fleetFlags
	privateDir string
	port       int
	poll       time.Duration
	waitBudget time.Duration
}

func (rf *roundtripFlags) register(cmd *cobra.Command) {
	rf.fleetFlags.register(cmd)
	f := cmd.Flags()
	f.StringVar(&rf.privateDir, "private-dir", ".private", "the private directory holding the journal ("+journal.RoundtripPath+")")
	f.IntVar(&rf.port, "origin-port", 8080, "the port of each Cube's origin in the target groups")
	durationVar(f, &rf.poll, "poll", 2*time.Second, "pause between reads while waiting (cloud requests, the node, the canary, the drain)")
	durationVar(f, &rf.waitBudget, "wait-budget", 15*time.Minute, "longest wait for one IONOS request or server; when it runs out the command exits 1 and a rerun resumes the wait")
}

// open checks the flags, reads the fleet and takes the journal's lock.
func (rf *roundtripFlags) open(cmd *cobra.Command) (*fleetState, *journal.Store, *journal.Journal, error) {
	if rf.port < 1 || rf.port > 65535 {
		return nil, nil, nil, usagef("--origin-port %d: want 1 to 65535", rf.port)
	}
	if rf.poll <= 0 || rf.waitBudget <= 0 {
		return nil, nil, nil, usagef("--poll and --wait-budget must be positive")
	}
	if _, err := outputFormat(cmd); err != nil {
		return nil, nil, nil, err
	}
	store, err := journal.Open(filepath.Join(rf.privateDir, journal.RoundtripPath), nil)
	if err != nil {
		return nil, nil, nil, err
	}
	j, err := store.Load()
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	st, err := rf.read(cmd)
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	return st, store, j, nil
}

// workflow is the cubes.Roundtrip of the fleet st read, with progress on stderr.
func (rf *roundtripFlags) workflow(cmd *cobra.Command, st *fleetState, store *journal.Store) (*cubes.Roundtrip, error) {
	p := st.profile
	d, err := fleetssh.NewDialer(p.SSH.KeyFile, p.SSH.KnownHostsFile, rf.timeout)
	if err != nil {
		return nil, err
	}
	stdio := stdioOf(cmd)
	name := cmd.CommandPath()
	progress := func(line string) { fmt.Fprintf(stdio.Err, "%s: %s\n", strings.TrimPrefix(name, "cubefleet "), line) }
	wait := cubes.Wait{Poll: rf.poll, Budget: rf.waitBudget, Progress: progress}
	r := &cubes.Roundtrip{Profile: p, Config: st.config, Found: st.found, Cloud: st.ionos, CP: st.cp, Store: store, Wait: wait,
		Poll: rf.poll, OriginPort: rf.port, Progress: progress,
		Peers: wireGuardPeers{d: d, h: fleetssh.WireGuardHost{Host: p.GPUWireGuard.Host, Port: p.GPUWireGuard.Port, User: p.GPUWireGuard.User,
			Interface: p.GPUWireGuard.Interface, ConfigFile: p.GPUWireGuard.ConfigFile}}}
	if at := stdio.Getenv(EnvCrashAt); at != "" {
		r.Crash = func(point string) {
			if point == at {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}
	return r, nil
}

// wireGuardPeers is cubes.Peers over SSH to the profile's GPU host.
type wireGuardPeers struct {
	d *fleetssh.Dialer
	h fleetssh.WireGuardHost
}

func (w wireGuardPeers) AddPeer(ctx context.Context, key string, ip netip.Addr, comment string) error {
	return w.d.AddPeer(ctx, w.h, key, ip, comment)
}

func (w wireGuardPeers) RemovePeer(ctx context.Context, key string, ip netip.Addr) error {
	return w.d.RemovePeer(ctx, w.h, key, ip)
}

// printRun prints a journal's outcome for people.
func printRun(w io.Writer, j *journal.Journal, what string) error {
	c := j.Cubes[0]
	linef(w, "%s: run %s, Cube %s (slot %d, %s, server %s) %s.\n", j.Workflow, j.Run, c.Name, c.Slot, c.PrivateIP, orDash(c.ServerID), what)
	for _, st := range j.Steps {
		linef(w, "  %s: %s\n", st.Name, st.Detail)
	}
	return nil
}

func newRoundtripUpCmd() *cobra.Command {
	var rf roundtripFlags
	var canary cubes.Canary
	var canaryCommand string
	var b cubeBoot
	cmd := &cobra.Command{
		Use:   "up --profile F --config F --agent-binary-url URL --canary-template T",
		Short: "Add one Cube to the baseline: preflight, create, attach, peer, verify, route (journaled; a rerun resumes)",
		Long: `Adds one Cube to the profile's baseline. A new run first repeats roundtrip check (any FAIL
exits 1, nothing changed), then journals the Cube's unique name (<cube_name_prefix><run>-<slot>)
and the target groups' lists in <private-dir>/` + journal.RoundtripPath + `, and then, journaling
each step before and after its side effect:

  create-server   one POST of a CUBE server (template, a DAS volume of the profile's image, a
                  NIC on the private LAN with the slot's IP, cloud-init user data installing
                  cubefleet from --agent-binary-url and starting its agent with a one-time
                  join token for the pool and a new WireGuard key). Never POSTed twice: after
                  an unknown outcome the name is looked up (one: verified and kept; none: one
                  new POST; several: exit 1 listing them, nothing deleted).
  wait-running    the request DONE and the server RUNNING (404s while it is queued are fine).
  attach-group    the worker security group attached (a PUT of the union).
  add-peer        the Cube's WireGuard peer on the GPU host, live and in its config file.
  verify-workers  the node Ready in the pool; a canary of --canary-template pinned to it running
                  --canary-command
                  (nodeSelector kubernetes.io/hostname) runs and exits.
  add-targets     the Cube's origin into every target group.

An open journal is resumed instead (no preflight): an interrupted step is checked before it
is done again. A wait that runs out of --wait-budget or --node-wait exits 1; the rerun resumes
the same request and server. Progress goes to stderr; stdout gets the result (--output json:
the journal). Exit 0 when the Cube is up, 1 on any failure (the journal says where it stands:
roundtrip status), 2 on a usage error.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if canary.Template == "" || b.binaryURL == "" {
				return usagef("--canary-template and --agent-binary-url are required")
			}
			boot, err := b.boot()
			if err != nil {
				return err
			}
			st, store, j, err := rf.open(cmd)
			if err != nil {
				return err
			}
			defer store.Close()
			r, err := rf.workflow(cmd, st, store)
			if err != nil {
				return err
			}
			canary.Command = strings.Fields(canaryCommand)
			r.Canary, r.NodeWait, r.JoinTTL, r.NewKey = canary, b.nodeWait, b.joinTTL, fleetssh.NewWireGuardKey
			boot.ControlPlane = st.profile.ControlPlane.URL
			r.Boot = boot
			switch {
			case j != nil && j.State == journal.StateOpen && j.Workflow != cubes.WorkflowUp:
				return cubefleet.Invalid("journal", "run %s's %s did not finish: rerun it (it resumes) before a new roundtrip up", j.Run, j.Workflow)
			case j != nil && j.State == journal.StateDone && j.Workflow == cubes.WorkflowUp:
				return cubefleet.Invalid("journal", "run %s's Cube %s is up: roundtrip down first; one roundtrip at a time", j.Run, j.Cubes[0].Name)
			case j != nil && j.State == journal.StateOpen:
				r.Progress("resuming run " + j.Run + " (" + j.Cubes[0].Name + ")")
			default:
				if err := r.LiveMembership(); err != nil {
					return err
				}
				out, failed := fleetChecks(cmd.Context(), st, &rf.fleetFlags, rf.port)
				if failed > 0 {
					printChecks(stdioOf(cmd).Err, out.Checks)
					return cubefleet.Errorf(cubefleet.CodePlanBlocked, "preflight: %d of %d checks failed (roundtrip check lists them); nothing was changed", failed, len(out.Checks))
				}
				sp := st.scalePlan(st.config.Occupied()+1, rf.maxAge)
				if j, err = r.NewUpJournal(cubes.PlanRoundtrip(st.config, st.profile, st.found, sp), st.inv); err != nil {
					return err
				}
				r.Progress(fmt.Sprintf("preflight: %d checks ok; run %s creates %s", len(out.Checks), j.Run, j.Cubes[0].Name))
			}
			if err := r.Up(cmd.Context(), j); err != nil {
				return err
			}
			return render(cmd, j, func(w io.Writer) error { return printRun(w, j, "is up") })
		},
	}
	rf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&canary.Template, "canary-template", "", "the sandbox template of the canary run on the new Cube (required)")
	f.StringVar(&canary.Tenant, "canary-tenant", "root", "the tenant of the canary")
	f.StringVar(&canaryCommand, "canary-command", "echo cubefleet-canary", "the canary's command, split at spaces; it must exit 0")
	f.StringVar(&b.binaryURL, "agent-binary-url", "", "where the new Cube downloads the cubefleet binary (required)")
	f.StringVar(&b.agentEnv, "agent-env", "", "a file of extra KEY=VALUE agent settings for the new Cube (such as CUBE_S3_ENDPOINT); it becomes part of its user data")
	durationVar(f, &b.nodeWait, "node-wait", 10*time.Minute, "longest wait for the new node to be Ready and for its canary to return")
	durationVar(f, &b.joinTTL, "join-token-ttl", time.Hour, "lifetime of the new Cube's one-time join token")
	return cmd
}

// cubeBoot holds the flags that say how a new Cube boots, shared by `roundtrip up` and `scale
// apply`'s growth: --agent-binary-url, --agent-env, --node-wait and --join-token-ttl.
type cubeBoot struct {
	binaryURL, agentEnv string
	nodeWait, joinTTL   time.Duration
}

// boot checks the flags and returns the new Cubes' boot settings (ControlPlane left for the
// caller, from the profile). A bad flag is a usage error naming it; an unreadable --agent-env
// file is an error naming the file.
func (b *cubeBoot) boot() (cubes.CubeBoot, error) {
	if !strings.HasPrefix(b.binaryURL, "https://") && !strings.HasPrefix(b.binaryURL, "http://") {
		return cubes.CubeBoot{}, usagef("--agent-binary-url %q: want the http(s) URL new Cubes download cubefleet from", b.binaryURL)
	}
	if b.nodeWait <= 0 || b.joinTTL < time.Minute {
		return cubes.CubeBoot{}, usagef("--node-wait must be positive and --join-token-ttl at least 1m")
	}
	var extra []string
	if b.agentEnv != "" {
		lines, err := readAgentEnv(b.agentEnv)
		if err != nil {
			return cubes.CubeBoot{}, err
		}
		extra = lines
	}
	return cubes.CubeBoot{AgentBinaryURL: b.binaryURL, AgentEnv: extra}, nil
}

// readAgentEnv reads extra agent settings: KEY=VALUE lines, blank lines and # comments
// skipped. Errors name the file and line.
func readAgentEnv(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--agent-env: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, _, ok := strings.Cut(line, "="); !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, usagef("--agent-env %s line %d: want KEY=VALUE", path, n)
		}
		out = append(out, line)
	}
	return out, sc.Err()
}

func newRoundtripDownCmd() *cobra.Command {
	var rf roundtripFlags
	var stopAtDeadline bool
	cmd := &cobra.Command{
		Use:   "down --profile F --config F [--stop-at-deadline]",
		Short: "Remove the roundtrip's Cube: cordon, traffic back, drain, targets, peer, delete by id (journaled; a rerun resumes)",
		Long: `Removes the Cube of the finished roundtrip up in <private-dir>/` + journal.RoundtripPath + `. First, before
anything changes, the cloud is asked whether the deletion will be possible (the journaled
server id still holds the journaled IP, no request is pending, it is not protected). Then,
journaling each step before and after its side effect:

  cordon           no new work reaches the Cube's node.
  return-traffic   the Cube's targets at weight 0: traffic back to the baseline.
  drain            wait until the node runs no sandboxes, as its agent reports them
                   (progress on stderr), at most the profile's drain_deadline from the
                   drain's start. At the deadline the Cube stays cordoned and the command
                   exits 1 naming the sandboxes that still run, unless --stop-at-deadline:
                   then they are stopped at the deadline (killed, reason node_drained,
                   results kept).
  restore-targets  the Cube's targets removed: the baseline target lists again.
  remove-peer      exactly the Cube's WireGuard peer removed on the GPU host (live and in
                   its config file).
  deregister       the node removed from the control plane's registry.
  delete-server    the server re-read by its journaled id (its IP, its name, its node idle),
                   then exactly that id deleted (never by name) and its absence confirmed.
  confirm-result   the canary's result, accepted on the departed Cube, read again through
                   the control plane.

An open roundtrip down journal is resumed. Exit 0 when the Cube is gone, 1 on any failure
(roundtrip status shows where it stands), 2 on a usage error.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, store, j, err := rf.open(cmd)
			if err != nil {
				return err
			}
			defer store.Close()
			r, err := rf.workflow(cmd, st, store)
			if err != nil {
				return err
			}
			r.StopAtDeadline = stopAtDeadline
			if j, err = r.StartDown(j); err != nil {
				return err
			}
			if err := r.Down(cmd.Context(), j); err != nil {
				return err
			}
			return render(cmd, j, func(w io.Writer) error { return printRun(w, j, "is gone") })
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&stopAtDeadline, "stop-at-deadline", false, "at the drain deadline, stop what still runs on the Cube (killed, reason node_drained) instead of exiting 1")
	return cmd
}
