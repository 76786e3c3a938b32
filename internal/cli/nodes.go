package cli

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/api/nodetext"
	"github.com/cubefleet/cubefleet/client"
)

func newNodesCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("nodes", "List, cordon, drain, label and delete compute nodes; make join tokens",
		`Compute nodes ("Cubes") register with the control plane and report every second: cubefleet
agents with a join token and then their node credential, stock Cubelets without credentials
from the networks the server allows (--node-agent-allow-unauthenticated). A node is Ready
(reported within its heartbeat window and Ready), NotReady, Suspect (one window missed), Down
(two) or Lost (silent for --node-lost-after); the window is twice the node's observed report
interval, at least --node-heartbeat-timeout. After a server restart a node is Unknown until
it reports (or one window passes). Only Ready, uncordoned nodes of a known pool that run
cubefleet agent receive work; a stock Cubelet is registry-only. Drain a node (cordon it and
wait until it runs no sandboxes) before you delete it.`)
	cmd.Aliases = []string{"node", "no"} // kubectl's habit: the singular and a short form
	cmd.AddCommand(newNodesListCmd(), newNodesGetCmd(), newNodesCordonCmd(), newNodesUncordonCmd(), newNodesDrainCmd(),
		newNodesLabelCmd(), newNodesDeleteCmd(stdio), newNodesJoinTokenCmd(stdio), newNodesEventsCmd())
	return cmd
}

func newNodesListCmd() *cobra.Command {
	var pool, state string
	cmd := &cobra.Command{
		Use:   "list [--pool P] [--state S]",
		Short: "List the nodes: IP, pool, state, age of the last report, microVMs, CPU and memory",
		Long: `List the registered nodes: IP, pool, health state (with ",Draining" or ",Drained" while the
node is drained), how long ago the last report arrived, microVMs used/max, CPU used/quota in
cores and memory used/quota in GiB (the quota is what the node offers the scheduler, already
overcommitted), and notes (no report since start, cordoned, registry-only, unknown pool).
Node ids that are IP addresses come first in numeric order (IPv4, then IPv6), then the others
as text; --output json keeps the API's order (by id as text). --pool takes a pool id or fleet name (or
the cluster label of stock Cubelets in no pool); one that no pool and no node has is NOT_FOUND.
--state takes a health state (Ready, NotReady, Suspect, Down, Lost, Unknown) or a drain state
(Draining, Drained: nodes being drained, or drained), in any case.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			health, drain, err := parseStateFlag(state)
			if err != nil {
				return err
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Nodes.List(cmd.Context(), api.NodeListInput{Pool: pool, State: string(health)})
			if err != nil {
				return err
			}
			if out.Items == nil {
				out.Items = []api.Node{}
			}
			if drain != "" {
				out.Items = slices.DeleteFunc(out.Items, func(v api.Node) bool { return v.Drain == nil || v.Drain.State != drain })
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, v := range sortedForTable(out.Items) {
					rows = append(rows, []string{v.ID, v.IP, nodetext.Pool(v), nodetext.State(v), nodetext.Ago(out.Now, v.LastReportAt),
						nodetext.MicroVMs(v), nodetext.CPU(v), nodetext.Memory(v), nodetext.Reserved(out.Rooms[v.ID]), nodetext.Notes(v)})
				}
				return printTable(w, []string{"NODE", "IP", "POOL", "STATE", "LAST REPORT", "MVM", "CPU", "MEMORY", "RESERVED", "NOTES"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "only nodes of this pool (id or fleet name; NOT_FOUND when no pool or node has it)")
	cmd.Flags().StringVar(&state, "state", "", "only nodes in this state, any case: Ready, NotReady, Suspect, Down, Lost, Unknown, or Draining, Drained")
	return cmd
}

// parseStateFlag reads nodes list --state in any case: a health state (the API filters on it)
// or a drain state (the CLI filters on it). Anything else is a usage error.
func parseStateFlag(s string) (api.NodeState, api.DrainState, error) {
	if s == "" {
		return "", "", nil
	}
	states := api.NodeStates()
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
		if strings.EqualFold(s, string(st)) {
			return st, "", nil
		}
	}
	for _, d := range []api.DrainState{api.DrainDraining, api.DrainDrained} {
		if strings.EqualFold(s, string(d)) {
			return "", d, nil
		}
	}
	return "", "", usagef("--state %q: want one of %s (health) or Draining, Drained, in any case", s, strings.Join(names, ", "))
}

// sortedForTable returns a copy of items in the table's order: node ids that are IP addresses
// first, in numeric order (IPv4 before IPv6), then the other ids as text. The API sorts by id
// as text (127.0.0.200 before 127.0.0.50); --output json keeps that order.
func sortedForTable(items []api.Node) []api.Node {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b api.Node) int { return compareNodeIDs(a.ID, b.ID) })
	return out
}

// compareNodeIDs orders node ids: IP addresses numerically (IPv4 first), before any other id;
// other ids, and equal addresses, as text.
func compareNodeIDs(a, b string) int {
	ipA, errA := netip.ParseAddr(a)
	ipB, errB := netip.ParseAddr(b)
	switch {
	case errA == nil && errB == nil:
		if c := ipA.Compare(ipB); c != 0 {
			return c
		}
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func newNodesGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NODE",
		Short: "Show one node: health, pool, whether it can receive work and why not, usage, labels",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Nodes.Get(cmd.Context(), api.NodeRef{NodeID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error { return printNode(w, out) })
		},
	}
}

// printNode writes one node as "key: value" lines.
func printNode(w io.Writer, out api.NodeOutput) error {
	v := out.Node
	agent := "cubefleet agent"
	if v.RegistryOnly {
		agent = "stock Cubelet (" + api.RegistryOnlyReason + ")"
	}
	sched := "yes"
	if !v.Schedulable {
		sched = "no: " + strings.Join(v.UnschedulableReasons, "; ")
	}
	lines := [][2]string{
		{"Node", v.ID},
		{"IP", v.IP},
		{"Agent", agent},
		{"Pool", nodetext.Pool(v)},
		{"Cluster label", orDash(v.ClusterLabel)},
		{"State", string(v.State) + stateSince(out.Now, v.StateSince)},
	}
	if why := nodetext.NotReady(v); why != "" {
		lines = append(lines, [2]string{"Not ready", why})
	}
	lines = append(lines, [][2]string{
		{"Last report", nodetext.Ago(out.Now, v.LastReportAt) + " (" + formatTime(v.LastReportAt) + "); " + nodetext.Heartbeat(v)},
		{"Schedulable", sched},
		{"Cordoned", nodetext.Cordon(v)},
		{"Drain", nodetext.Drain(out.Now, v)},
		{"Registered", formatTime(v.RegisteredAt)},
		{"Instance type", orDash(v.InstanceType)},
		{"MicroVMs", nodetext.MicroVMs(v)},
		{"CPU (cores)", nodetext.CPU(v)},
		{"Memory", nodetext.Memory(v)},
		{"Capacity", fmt.Sprintf("%s cores, %sGi", nodetext.Cores(v.Capacity.MilliCPU), nodetext.GiB(v.Capacity.MemoryMiB))},
		{"Images", strconv.Itoa(v.Images)},
		{"Templates", templatesCell(v)},
		{"Labels", labelsCell(v.Labels)},
	}...)
	if r := out.Room; r != nil {
		lines = append(lines,
			[2]string{"Reported use", usageCell(r.Reported)},
			[2]string{"Reserved", usageCell(r.Reserved) + fmt.Sprintf(" (%s placed, not yet reported)", cubefleet.Count(r.Reservations, "sandbox", "sandboxes"))},
			[2]string{"Host reserve", nodetext.HostReserve(v, r)},
			[2]string{"Room left", usageCell(r.Remaining)})
	}
	if sb := out.Sandboxes; sb != nil {
		unknown := ""
		if sb.Unknown > 0 {
			unknown = fmt.Sprintf(", %d unknown (running when the node stopped reporting)", sb.Unknown)
		}
		lines = append(lines, [2]string{"Sandboxes", fmt.Sprintf("%d running, %d pending (placed, not yet running)%s, %d of them idle warm", sb.Running, sb.Pending, unknown, sb.WarmIdle)})
		if len(sb.RunningIDs) > 0 {
			lines = append(lines, [2]string{"  running", idsCell(sb.RunningIDs, sb.Running)})
		}
		if len(sb.PendingIDs) > 0 {
			lines = append(lines, [2]string{"  pending", idsCell(sb.PendingIDs, sb.Pending)})
		}
		if len(sb.UnknownIDs) > 0 {
			lines = append(lines, [2]string{"  unknown", idsCell(sb.UnknownIDs, sb.Unknown)})
		}
	}
	if v.DiskUsage != nil {
		lines = append(lines, [2]string{"Disks", fmt.Sprintf("data %.0f%%, storage %.0f%%, system %.0f%%", v.DiskUsage.Data, v.DiskUsage.Storage, v.DiskUsage.Sys)})
	}
	for _, ver := range v.Versions {
		lines = append(lines, [2]string{"Version", strings.TrimSpace(ver.Component + " " + ver.Version)})
	}
	return printFields(w, 15, lines)
}

// usageCell renders an amount of each resource: "1.5 cores, 3.0Gi, 2 microVMs" (disk when
// there is any).
func usageCell(u api.Usage) string {
	s := fmt.Sprintf("%s cores, %sGi, %s", nodetext.Cores(u.CPU), nodetext.GiB(u.MemoryMiB), cubefleet.Count(int(u.MvmNum), "microVM", "microVMs"))
	if u.DiskMiB > 0 {
		s += ", disk " + nodetext.GiB(u.DiskMiB) + "Gi"
	}
	return s
}

// idsCell lists ids, and how many more there are than listed (of total).
func idsCell(ids []string, total int) string {
	s := strings.Join(ids, ", ")
	if more := total - len(ids); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

func stateSince(now, since int64) string {
	if since == 0 {
		return ""
	}
	return " (since " + strings.TrimSuffix(nodetext.Ago(now, since), " ago") + ")"
}

func templatesCell(v api.Node) string {
	if v.LocalTemplates == nil {
		return "not reported"
	}
	return orDash(strings.Join(v.LocalTemplates, ", "))
}

func labelsCell(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return orDash(strings.Join(parts, ", "))
}

// nodeAction connects and runs act, a nodes.* method that returns one node, and prints the
// line done makes of its answer (or the answer as JSON).
func nodeAction[O any](cmd *cobra.Command, act func(ctx context.Context, c *client.Client) (O, error), done func(O) string) error {
	c, err := typed(cmd)
	if err != nil {
		return err
	}
	out, err := act(cmd.Context(), c)
	if err != nil {
		return err
	}
	return render(cmd, out, func(w io.Writer) error {
		_, err := linef(w, "%s\n", done(out))
		return err
	})
}

// cordonDone is the line of nodes cordon and uncordon: "Cordoned node N." (done), or "No
// change: node N is already cordoned." (state) when the call changed nothing.
func cordonDone(id, done, state string) func(api.NodeCordonOutput) string {
	return func(out api.NodeCordonOutput) string {
		if !out.Changed {
			return "No change: node " + id + " is already " + state + "."
		}
		return done + " node " + id + "."
	}
}

func newNodesCordonCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cordon NODE [--reason TEXT]",
		Short: "Cordon a node: it receives no new work (idempotent)",
		Long: `Cordon a node: it keeps running what it has but receives no new work. --reason says why (at most
200 characters), as for nodes drain; nodes get and nodes list show it. Idempotent: cordoning a
node cordoned with that reason says "No change: node N is already cordoned." (exit 0;
--output json: "changed": false).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return nodeAction(cmd, func(ctx context.Context, c *client.Client) (api.NodeCordonOutput, error) {
				return c.Nodes.Cordon(ctx, api.NodeCordonInput{NodeID: args[0], Detail: reason})
			}, cordonDone(args[0], "Cordoned", "cordoned"))
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (at most 200 characters)")
	cmd.Flags().StringVar(&reason, "detail", "", "the former name of --reason")
	cmd.Flags().MarkHidden("detail")
	return cmd
}

func newNodesUncordonCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "uncordon NODE",
		Short: "Uncordon a node (idempotent)",
		Long: `Uncordon a node: it receives new work again, and a drain ends. Idempotent: uncordoning a node
that is not cordoned says "No change: node N is already uncordoned." (exit 0; --output json:
"changed": false).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return nodeAction(cmd, func(ctx context.Context, c *client.Client) (api.NodeCordonOutput, error) {
				return c.Nodes.Uncordon(ctx, api.NodeRef{NodeID: args[0]})
			}, cordonDone(args[0], "Uncordoned", "uncordoned"))
		},
	}
}

func newNodesLabelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "label NODE KEY=VALUE... KEY-...",
		Short: "Set (KEY=VALUE) and remove (KEY-) a node's labels",
		Long: `Set labels with KEY=VALUE (merged into the node's labels) and remove them with KEY-. Keys are
[prefix/]name as in Kubernetes; a node carries at most 64 labels. The isolation label is
changed only by cordon and uncordon. When nothing changes (every label already has its value,
every key removed is absent) it says so.

An argument that starts with "-" is read as a flag; put -- before such arguments:
cubefleet nodes label NODE -- -k=v (every argument after -- is a label argument).`,
		Example: `  cubefleet nodes label 10.0.0.5 rack=r12 kubernetes.io/os-
  cubefleet nodes label 10.0.0.5 -- -odd=key`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("label takes NODE and at least one KEY=VALUE or KEY-")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			set := map[string]string{}
			var remove []string
			for _, a := range args[1:] {
				if k, v, ok := strings.Cut(a, "="); ok {
					set[k] = v
				} else if k, ok := strings.CutSuffix(a, "-"); ok && k != "" {
					remove = append(remove, k)
				} else {
					return usagef("%q: want KEY=VALUE to set a label or KEY- to remove one", a)
				}
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			var out struct {
				api.NodeOutput
				Changed *bool `json:"changed,omitempty"` // absent from a server that does not tell
			}
			if err := c.Call(cmd.Context(), "nodes.label", api.NodeLabelInput{NodeID: id, Set: set, Remove: remove}, &out); err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				if out.Changed != nil && !*out.Changed {
					_, err := linef(w, "No change: node %s %s.\n", id, unchangedLabels(set, remove))
					return err
				}
				_, err := linef(w, "Labelled node %s.\n", id)
				return err
			})
		},
	}
	// A label argument that starts with "-" is taken for a flag: say how to pass it.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		msg := err.Error()
		if !strings.HasPrefix(msg, "unknown flag: ") && !strings.HasPrefix(msg, "unknown shorthand flag: ") {
			return usageError{err}
		}
		arg := "-k=v"
		if _, a, ok := strings.Cut(msg, " in "); ok {
			arg = a
		} else if _, a, ok := strings.Cut(msg, ": "); ok {
			arg = a
		}
		return usagef("%v; if %s is a label argument, put -- before it: cubefleet nodes label NODE -- %s", err, arg, arg)
	})
	return cmd
}

// unchangedLabels says why nodes label changed nothing: "already has a=1, b=2 and has no label
// c, d".
func unchangedLabels(set map[string]string, remove []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "already has "+labelsCell(set))
	}
	if len(remove) > 0 {
		parts = append(parts, "has no label "+strings.Join(remove, ", "))
	}
	return strings.Join(parts, " and ")
}

func newNodesDeleteCmd(stdio IO) *cobra.Command {
	var force bool
	var reason string
	cmd := &cobra.Command{
		Use:   "delete NODE [--force [--reason TEXT]]",
		Short: "Delete a cordoned node and revoke its credential",
		Long: `Delete a node from the registry and revoke its node credential: its agent is refused from
then on and joins again only with a new join token (a stock Cubelet registers again when it
restarts). The node must be cordoned; without --force it must also be Ready and run no
sandboxes. --force deletes a node that is not Ready (Down, Lost: its sandbox count is unknown)
or still runs sandboxes, and cordons it first when it is not cordoned, with --reason as the
cordon's reason (the cordon is a nodes.cordon call of its own, audited).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if reason != "" && !force {
				return usagef("--reason is the reason of the cordon --force sets first: give --force, or cordon with cubefleet nodes cordon %s --reason TEXT", id)
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			if force {
				n, err := c.Nodes.Get(cmd.Context(), api.NodeRef{NodeID: id})
				if err != nil {
					return err
				}
				if !n.Cordoned {
					if reason == "" {
						reason = "cordoned by nodes delete --force"
					}
					if _, err := c.Nodes.Cordon(cmd.Context(), api.NodeCordonInput{NodeID: id, Detail: reason}); err != nil {
						return err
					}
					linef(stdio.Err, "Cordoned node %s first (--force; it was not cordoned).\n", id)
				}
			}
			return nodeAction(cmd, func(ctx context.Context, c *client.Client) (api.NodeOutput, error) {
				return c.Nodes.Delete(ctx, api.NodeDeleteInput{NodeID: id, Force: force})
			}, func(api.NodeOutput) string { return "Deleted node " + id + "." })
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete even while the node is not Ready or runs sandboxes; cordon it first if it is not")
	cmd.Flags().StringVar(&reason, "reason", "", "with --force: the reason of the cordon it sets first (at most 200 characters)")
	return cmd
}
