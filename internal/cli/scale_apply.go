package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/fleetssh"
)

// scaleLockName is the lock of the scale journals' directory (<name>.lock): two scale applies
// at once are refused whatever their runs.
const scaleLockName = "apply"

func newScaleApplyCmd() *cobra.Command {
	var rf roundtripFlags
	var canary cubes.Canary
	var canaryCommand, replacement string
	var b cubeBoot
	var yes, stopAtDeadline bool
	target := -1
	cmd := &cobra.Command{
		Use:   "apply --profile F --config F --target-cubes N --canary-template T [--yes] [--replacement URL]",
		Short: "Carry out the scale plan to N Cubes (asks on a terminal, --yes otherwise; journaled; a rerun resumes)",
		Long: `Plans as scale plan does, prints the plan, asks for confirmation on a terminal (--yes
otherwise, required when stdin is not one) and carries it out, journaling each step before
and after its side effect in <private-dir>/` + journal.ScaleDir + `/<run>.json. A reduction:

  preflight        before anything changes, each departing Cube's deletion is checked with
                   the cloud: its server id holds its IP, no request is pending, it is not
                   protected. A Cube is never drained for nothing.
  accept-result    on each departing Cube a sandbox of --canary-template is accepted through
                   the profile's control plane (the previous configuration) and placed.
  coordinator      with the profile's control_plane.target_group (a control plane loading a
                   fixed origin list: cubefleet server --origins), that target group is handed
                   to --replacement, a ready server started beside it with the remaining
                   Cubes' origins on the shared database. Without --replacement the run stops
                   here saying so; the only routed server is never restarted. Then stop the
                   previous server once its accepted work is done. Without a target group the
                   control plane learns membership live and nothing moves.
  per Cube, one at a time (within any disruption budget), the least active first:
                   the steps of roundtrip down (cordon, return-traffic, drain within the
                   profile's drain_deadline, restore-targets, remove-peer, deregister,
                   delete-server of exactly the planned id, confirm-result), then
  check-result     the accepted sandbox's result read through the new and the previous
                   configuration.

A growth takes roundtrip up's steps (create-server, wait-running, attach-group, add-peer,
verify-workers, add-targets) for each new Cube in slot order, one at a time; it needs
--agent-binary-url. With the profile's control_plane.target_group its coordinator step comes
first: the group is handed to --replacement, a ready server started with the grown fleet's
origins. Each new Cube is named <cube_name_prefix><run>-<slot>; record its server id in its
slot, and scale plan accepts that name for the slot.

A drain past its deadline keeps the Cube cordoned and exits 1 saying what still runs (unless
--stop-at-deadline). An open scale journal is resumed instead of a new plan (scale status
shows it; scale status --abandon closes it after you cleaned up). Progress goes to
stderr; stdout gets the result (--output json: the journal). Exit 0 when done, 1 on any
failure (the journal says where it stands), 2 on a usage error.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target < 0 {
				return usagef("--target-cubes: want the number of Cubes wanted (0 or more)")
			}
			if canary.Template == "" {
				return usagef("--canary-template is required: the sandbox accepted on each departing Cube")
			}
			if rf.port < 1 || rf.port > 65535 || rf.poll <= 0 || rf.waitBudget <= 0 {
				return usagef("--origin-port must be 1 to 65535, --poll and --wait-budget positive")
			}
			if _, err := outputFormat(cmd); err != nil {
				return err
			}
			stdio := stdioOf(cmd)
			dir := filepath.Join(rf.privateDir, journal.ScaleDir)
			lock, err := journal.Open(filepath.Join(dir, scaleLockName), nil)
			if err != nil {
				return err
			}
			defer lock.Close()
			open, err := openScaleJournal(dir)
			if err != nil {
				return err
			}
			st, err := rf.read(cmd)
			if err != nil {
				return err
			}
			run := newScaleRun(dir, time.Now())
			if open != nil {
				run = open.Run
			}
			store, err := journal.Open(filepath.Join(dir, run+".json"), nil)
			if err != nil {
				return err
			}
			defer store.Close()
			r, err := rf.workflow(cmd, st, store)
			if err != nil {
				return err
			}
			canary.Command = strings.Fields(canaryCommand)
			r.Canary, r.StopAtDeadline, r.NodeWait, r.JoinTTL, r.NewKey = canary, stopAtDeadline, b.nodeWait, b.joinTTL, fleetssh.NewWireGuardKey
			grow := func() error {
				boot, err := b.boot()
				if err != nil {
					return err
				}
				boot.ControlPlane = st.profile.ControlPlane.URL
				r.Boot = boot
				return nil
			}
			red := &cubes.Reduction{Roundtrip: r}
			if replacement != "" {
				caFile, _ := cmd.Flags().GetString(flagCAFile)
				next, err := profileControlPlane(stdio.Getenv, caFile, cubes.ProfileControlPlane{URL: strings.TrimRight(replacement, "/"), APIKeyFile: st.profile.ControlPlane.APIKeyFile})
				if err != nil {
					return fmt.Errorf("--replacement: %w", err)
				}
				red.CP, red.Previous = next, st.cp
			}
			if id := st.found.ControlPlaneTargetGroupID; id != "" {
				red.Handover = &cubes.Handover{GroupID: id, Replacement: replacement, Ready: func(ctx context.Context) error { return readyz(ctx, replacement) }}
			}
			j := open
			if j != nil {
				r.Progress("resuming run " + j.Run)
				if j.Workflow == cubes.WorkflowScaleGrowth {
					if err := grow(); err != nil {
						return err
					}
					return finishGrowth(cmd, r, red.Handover, j)
				}
			} else {
				plan := st.scalePlan(target, rf.maxAge)
				if err := printScalePlan(stdio.Err, plan); err != nil {
					return err
				}
				switch {
				case !plan.Accepted:
					return cubefleet.Errorf(cubefleet.CodePlanBlocked, "scale plan rejected: %s; nothing was changed", cubefleet.Count(len(plan.Problems), "problem", "problems"))
				case len(plan.Steps) == 0:
					return render(cmd, plan, func(w io.Writer) error {
						linef(w, "Nothing to do: the fleet has %s.\n", cubefleet.Count(target, "Cube", "Cubes"))
						return nil
					})
				case plan.Target > plan.Current:
					if err := grow(); err != nil {
						return err
					}
					if err := confirmApply(cmd, yes, len(plan.Steps)); err != nil {
						return err
					}
					if j, err = r.NewGrowJournal(run, plan, st.inv); err != nil {
						return err
					}
					return finishGrowth(cmd, r, red.Handover, j)
				}
				if err := confirmApply(cmd, yes, len(plan.Steps)); err != nil {
					return err
				}
				d, err := fleetssh.NewDialer(st.profile.SSH.KeyFile, st.profile.SSH.KnownHostsFile, rf.timeout)
				if err != nil {
					return err
				}
				gw := st.profile.GPUWireGuard
				peers, err := d.Peers(cmd.Context(), fleetssh.WireGuardHost{Host: gw.Host, Port: gw.Port, User: gw.User, Interface: gw.Interface, ConfigFile: gw.ConfigFile})
				if err != nil {
					return fmt.Errorf("the GPU host's WireGuard peers: %w", err)
				}
				if j, err = red.NewScaleJournal(run, plan, st.inv, peers); err != nil {
					return err
				}
			}
			if err := red.Reduce(cmd.Context(), j); err != nil {
				return err
			}
			return renderScaleRun(cmd, j, "removed")
		},
	}
	rf.register(cmd)
	f := cmd.Flags()
	f.IntVar(&target, "target-cubes", -1, "number of Cubes wanted (required)")
	_ = cmd.MarkFlagRequired("target-cubes")
	f.BoolVar(&yes, "yes", false, "apply the plan just printed without asking (required when stdin is not a terminal)")
	f.StringVar(&replacement, "replacement", "", "the URL of the ready replacement control plane the profile's control_plane.target_group is handed to")
	f.StringVar(&canary.Template, "canary-template", "", "the sandbox template of the sandbox accepted on each departing Cube (required)")
	f.StringVar(&canary.Tenant, "canary-tenant", "root", "its tenant")
	f.StringVar(&canaryCommand, "canary-command", "echo cubefleet-accepted", "its command, split at spaces; it must end within the drain")
	f.StringVar(&b.binaryURL, "agent-binary-url", "", "growth: where each new Cube downloads the cubefleet binary")
	f.StringVar(&b.agentEnv, "agent-env", "", "growth: a file of extra KEY=VALUE agent settings for the new Cubes")
	durationVar(f, &b.nodeWait, "node-wait", 10*time.Minute, "growth: longest wait for a new node to be Ready and for its canary to return")
	durationVar(f, &b.joinTTL, "join-token-ttl", time.Hour, "growth: lifetime of each new Cube's one-time join token")
	f.BoolVar(&stopAtDeadline, "stop-at-deadline", false, "at the drain deadline, stop what still runs on the Cube (killed, reason node_drained) instead of exiting 1")
	return cmd
}

// finishGrowth carries out the growth of journal j (with the coordinator's handover h, nil
// for none) and prints it.
func finishGrowth(cmd *cobra.Command, r *cubes.Roundtrip, h *cubes.Handover, j *journal.Journal) error {
	if err := r.Grow(cmd.Context(), j, h); err != nil {
		return err
	}
	return renderScaleRun(cmd, j, "added")
}

// renderScaleRun prints a finished scale run: what it did to how many Cubes, and each step.
func renderScaleRun(cmd *cobra.Command, j *journal.Journal, did string) error {
	return render(cmd, j, func(w io.Writer) error {
		linef(w, "scale apply: run %s %s %s.\n", j.Run, did, cubefleet.Count(len(j.Cubes), "Cube", "Cubes"))
		for _, s := range j.Steps {
			cube := ""
			if s.Cube != "" {
				cube = " " + s.Cube
			}
			linef(w, "  %s%s: %s\n", s.Name, cube, s.Detail)
		}
		return nil
	})
}

// newScaleRun is the id of a new scale run started at now: journal.NewRun's, a second later
// for each run of dir that has it already (run ids name the Cubes a run creates: they are
// never reused).
func newScaleRun(dir string, now time.Time) string {
	for {
		run := journal.NewRun(now)
		if _, err := os.Lstat(filepath.Join(dir, run+".json")); errors.Is(err, fs.ErrNotExist) {
			return run
		}
		now = now.Add(time.Second)
	}
}

// openScaleJournal returns the open scale journal of dir (nil: none). Errors: a journal that
// is not private or not a journal, or two open ones (abandon one).
func openScaleJournal(dir string) (*journal.Journal, error) {
	all, err := readScaleJournals(dir)
	if err != nil {
		return nil, err
	}
	var open *journal.Journal
	for i := range all {
		if all[i].State != journal.StateOpen {
			continue
		}
		if open != nil {
			return nil, cubefleet.Invalid("journal", "runs %s and %s are both open in %s: finish one, or clean up after one and scale status --run R --abandon", open.Run, all[i].Run, dir)
		}
		open = &all[i]
	}
	return open, nil
}

// confirmApply asks on a terminal whether to apply the plan's steps; without a terminal it
// requires --yes.
func confirmApply(cmd *cobra.Command, yes bool, steps int) error {
	if yes {
		return nil
	}
	stdio := stdioOf(cmd)
	if !isTerminal(stdio.In) {
		return usagef("scale apply changes the fleet: pass --yes to apply the plan printed above (stdin is not a terminal to ask)")
	}
	fmt.Fprintf(stdio.Err, "Apply these %d steps? Type yes: ", steps)
	line, _ := bufio.NewReader(stdio.In).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return cubefleet.Errorf(cubefleet.CodePlanBlocked, "not confirmed; nothing was changed")
	}
	return nil
}

// readyz checks that the control plane at base answers GET /readyz with 200.
func readyz(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %s", resp.Status)
	}
	return nil
}
