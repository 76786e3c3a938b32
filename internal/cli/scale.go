package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes"
)

// newScaleCmd builds `cubefleet scale`: growing or reducing an IONOS Cube fleet to a target
// number of Cubes: scale plan and scale apply; see docs/ionos.md, "Scaling the fleet".
func newScaleCmd() *cobra.Command {
	cmd := groupCmd("scale", "IONOS Cube fleet scaling: plan which Cubes go or which slots get new ones, apply it, its journals",
		"Scaling reads the fleet as it is now (a fresh inventory through the IONOS API and the control\n"+
			"plane's members of the profile's pool) and decides which Cubes go, the least active first,\n"+
			"or which slots get new Cubes. See docs/ionos.md, \"Scaling the fleet\".")
	cmd.AddCommand(newScalePlanCmd(), newScaleApplyCmd(), newScaleStatusCmd())
	return cmd
}

func newScalePlanCmd() *cobra.Command {
	var ff fleetFlags
	target := -1
	cmd := &cobra.Command{
		Use:   "plan --profile F --config F --target-cubes N",
		Short: "Plan the fleet's change to N Cubes and print the steps (read-only; exit 1 when rejected)",
		Long: `Reads a fresh inventory of the profile's data center and the control plane's members of its
pool, and plans the change from the Cubes the configuration's slots hold to --target-cubes.

A reduction removes the least active Cubes by running sandboxes (running or placed, as the
control plane counts them; a Cube not registered counts as idle), ties going to the highest
slot index. It never removes the profile's runtime_source_cube or a protected server, and never
goes below minimum_cubes. Growth fills the lowest-index empty slots. Every planning rule of
"ionos plan" applies to the fleet as it is. The steps are printed in the order scale apply
takes them; the plan changes nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target < 0 {
				return usagef("--target-cubes: want the number of Cubes wanted (0 or more)")
			}
			if _, err := outputFormat(cmd); err != nil {
				return err
			}
			st, err := ff.read(cmd)
			if err != nil {
				return err
			}
			plan := st.scalePlan(target, ff.maxAge)
			if err := render(cmd, plan, func(w io.Writer) error { return printScalePlan(w, plan) }); err != nil {
				return err
			}
			if !plan.Accepted {
				return cubefleet.Errorf(cubefleet.CodePlanBlocked, "scale plan rejected: %s; nothing was changed", cubefleet.Count(len(plan.Problems), "problem", "problems"))
			}
			return nil
		},
	}
	ff.register(cmd)
	cmd.Flags().IntVar(&target, "target-cubes", -1, "number of Cubes wanted (required)")
	_ = cmd.MarkFlagRequired("target-cubes")
	return cmd
}

func printScalePlan(w io.Writer, p *cubes.ScalePlan) error {
	linef(w, "Scale plan for data center %s: %s to %s.\n\n", p.DatacenterID, cubefleet.Count(p.Current, "Cube", "Cubes"), cubefleet.Count(p.Target, "Cube", "Cubes"))
	rows := make([][]string, 0, len(p.Slots))
	for _, s := range p.Slots {
		running := "-"
		if s.Registered {
			running = strconv.Itoa(s.Running)
		}
		rows = append(rows, []string{strconv.Itoa(s.Index), s.Name, s.PrivateIP, orDash(s.ServerID), string(s.Action), running, s.Reason})
	}
	if err := printTable(w, []string{"SLOT", "NAME", "PRIVATE IP", "SERVER", "ACTION", "RUNNING", "REASON"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	printCapacity(w, "Capacity after", p.Capacity, p.CapacityNote)
	if !p.Accepted {
		printProblems(w, p.Problems)
		return nil
	}
	if len(p.Steps) == 0 {
		fmt.Fprintln(w, "\nNothing to do: the fleet has the target's Cubes.")
		return nil
	}
	linef(w, "\nSteps (%d):\n", len(p.Steps))
	for i, s := range p.Steps {
		cube := ""
		if s.Cube != "" {
			cube = " " + s.Cube
		}
		linef(w, "  %d. %s%s: %s\n", i+1, s.Do, cube, s.Detail)
	}
	fmt.Fprintln(w, "\nPlan accepted. It changed nothing.")
	return nil
}
