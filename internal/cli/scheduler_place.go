package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/api/nodetext"
)

// placeFlags names the flag of each scheduler.place input field, for its errors.
var placeFlags = map[string]string{
	"sandboxId": "sandbox-id", "pool": "pool", "template": "template", "cpu": "cpu",
	"memoryMiB": "memory-mib", "diskMiB": "disk-mib", "nodeSelector": "node-selector", "exclude": "exclude",
}

func newSchedulerPlaceCmd() *cobra.Command {
	var sandboxID, pool, template string
	var cpu, memoryMiB, diskMiB int64
	var selector, exclude []string
	cmd := &cobra.Command{
		Use:   "place --sandbox-id ID (--pool P | --template T) --cpu MILLICORES --memory-mib MIB [--disk-mib MIB]",
		Short: "Place a sandbox: choose its node and reserve the room there (scheduler.place)",
		Long: `Ask the control plane's scheduler (scheduler.place, permission scheduler:place on tenant/root)
to choose a node for a sandbox and reserve its room there, as a sandbox create does. --pool is
a pool id or fleet name; --template a sandbox template id or name (it lends its pool when
--pool is left out), or a template id a node lists. --cpu is in millicores (1000 = one core),
--memory-mib and --disk-mib in MiB. The same command again (the same sandbox id and sizes)
answers the same decision; "scheduler release ID" gives the room back. Nothing fits: exit 1
with the reasons (RESOURCE_EXHAUSTED). --output json prints the API's answer: {nodeId, score,
reservation}. See docs/scheduler.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := api.PlaceInput{SandboxID: sandboxID, Pool: pool, Template: template, CPU: cpu, MemoryMiB: memoryMiB, DiskMiB: diskMiB}
			if len(selector) > 0 {
				sel := map[string]string{}
				for _, kv := range splitList(selector) {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return usagef("--node-selector %q: want KEY=VALUE", kv)
					}
					sel[k] = v
				}
				in.NodeSelector = sel
			}
			if ex := splitList(exclude); len(ex) > 0 {
				in.Exclude = ex
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Scheduler.Place(cmd.Context(), in)
			if err != nil {
				return flagProblems(err, placeFlags)
			}
			return render(cmd, out, func(w io.Writer) error {
				r := out.Reservation
				if _, err := linef(w, "Placed sandbox %s on node %s (score %.4f).\n", r.SandboxID, out.NodeID, out.Score); err != nil {
					return err
				}
				pool := r.Pool
				if out.PoolName != "" {
					pool = out.PoolName + " (" + r.Pool + ")"
				}
				return printFields(w, 9, [][2]string{
					{"Pool", pool},
					{"Reserved", fmt.Sprintf("%s cores, %sGi memory, %d MiB disk", nodetext.Cores(r.CPU), nodetext.GiB(r.MemoryMiB), r.DiskMiB)},
				})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&sandboxID, "sandbox-id", "", "the sandbox's id: its reservation is released by it")
	f.StringVar(&pool, "pool", "", "pool id or fleet name")
	f.StringVar(&template, "template", "", "sandbox template id or name (lends its pool), or a template id a node lists")
	f.Int64Var(&cpu, "cpu", 0, "CPU in millicores (1000 = one core)")
	f.Int64Var(&memoryMiB, "memory-mib", 0, "memory in MiB")
	f.Int64Var(&diskMiB, "disk-mib", 0, "disk in MiB (default: none asked)")
	f.StringArrayVar(&selector, "node-selector", nil, "only nodes with this label, KEY=VALUE (repeatable, comma-separated)")
	f.StringArrayVar(&exclude, "exclude", nil, "never this node id (repeatable, comma-separated): one that already failed this create")
	cmd.MarkFlagRequired("sandbox-id")
	cmd.MarkFlagRequired("cpu")
	cmd.MarkFlagRequired("memory-mib")
	return cmd
}

func newSchedulerReleaseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "release SANDBOX_ID",
		Short: "Release a sandbox's reservation (scheduler.release)",
		Long: `Give back the room "scheduler place" reserved for a sandbox whose create failed or was given
up (scheduler.release, permission scheduler:release on tenant/root). A sandbox without a
reservation is not an error: the answer says nothing was held. --output json prints the API's
answer: {sandboxId, released}.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Scheduler.Release(cmd.Context(), api.SandboxRef{SandboxID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				if !out.Released {
					_, err := linef(w, "Sandbox %s held no reservation: nothing released.\n", out.SandboxID)
					return err
				}
				_, err := linef(w, "Released the reservation of sandbox %s.\n", out.SandboxID)
				return err
			})
		},
	}
}
