package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetext"
	"github.com/cubefleet/cubefleet/internal/scheduler"
)

// nodeOut is one node as the nodes.* methods return it.
type nodeOut struct {
	nodes.View
	Now  int64           `json:"now"`
	Room *scheduler.Room `json:"room,omitempty"`
}

// nodeListOut is the output of nodes.list.
type nodeListOut struct {
	Items            []nodes.View `json:"items"`
	Now              int64        `json:"now"`
	HeartbeatTimeout int64        `json:"heartbeatTimeoutMs"`
	LostAfter        int64        `json:"lostAfterMs"`
}

func newNodesCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("nodes", "List, cordon, drain, label and delete compute nodes; make join tokens",
		`Compute nodes ("Cubes") register with the control plane and report every second: cubefleet
agents with a join token and then their node credential, stock Cubelets without credentials
from the networks the server allows (--node-agent-allow-unauthenticated). A node is Ready
(reported within --node-heartbeat-timeout and Ready), NotReady, Suspect (one timeout
missed), Down (two) or Lost (silent for --node-lost-after). Only Ready, uncordoned nodes of a
known pool that run cubefleet agent receive work; a stock Cubelet is registry-only. Drain a
node (cordon it and wait until it runs no sandboxes) before you delete it.`)
	cmd.AddCommand(newNodesListCmd(), newNodesGetCmd(), newNodesCordonCmd(), newNodesUncordonCmd(), newNodesDrainCmd(),
		newNodesLabelCmd(), newNodesDeleteCmd(), newNodesJoinTokenCmd(stdio), newNodesEventsCmd())
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
overcommitted), and notes (cordoned, registry-only, unknown pool). Node ids that are IP
addresses come first in numeric order (IPv4, then IPv6), then the others as text;
--output json keeps the API's order (by id as text). --pool takes a pool id or fleet name (or
the cluster label of stock Cubelets in no pool); one that no pool and no node has is NOT_FOUND.
--state takes a health state (Ready, NotReady, Suspect, Down, Lost) or a drain state (Draining,
Drained: nodes being drained, or drained), in any case.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			health, drain, err := parseStateFlag(state)
			if err != nil {
				return err
			}
			var out nodeListOut
			if err := call(cmd, "nodes.list", map[string]any{"pool": pool, "state": health}, &out); err != nil {
				return err
			}
			if out.Items == nil {
				out.Items = []nodes.View{}
			}
			if drain != "" {
				out.Items = slices.DeleteFunc(out.Items, func(v nodes.View) bool { return v.Drain == nil || v.Drain.State != drain })
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, v := range sortedForTable(out.Items) {
					rows = append(rows, []string{v.ID, v.IP, nodetext.Pool(v), nodetext.State(v), nodetext.Ago(out.Now, v.LastReportAt),
						nodetext.MicroVMs(v), nodetext.CPU(v), nodetext.Memory(v), nodetext.Notes(v)})
				}
				return printTable(w, []string{"NODE", "IP", "POOL", "STATE", "LAST REPORT", "MVM", "CPU", "MEMORY", "NOTES"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "only nodes of this pool (id or fleet name; NOT_FOUND when no pool or node has it)")
	cmd.Flags().StringVar(&state, "state", "", "only nodes in this state, any case: Ready, NotReady, Suspect, Down, Lost, or Draining, Drained")
	return cmd
}

// parseStateFlag reads nodes list --state in any case: a health state (the API filters on it)
// or a drain state (the CLI filters on it). Anything else is a usage error.
func parseStateFlag(s string) (nodes.State, nodes.DrainState, error) {
	if s == "" {
		return "", "", nil
	}
	for _, st := range nodes.States {
		if strings.EqualFold(s, string(st)) {
			return st, "", nil
		}
	}
	for _, d := range []nodes.DrainState{nodes.DrainDraining, nodes.DrainDrained} {
		if strings.EqualFold(s, string(d)) {
			return "", d, nil
		}
	}
	return "", "", usagef("--state %q: want one of Ready, NotReady, Suspect, Down, Lost (health) or Draining, Drained, in any case", s)
}

// sortedForTable returns a copy of items in the table's order: node ids that are IP addresses
// first, in numeric order (IPv4 before IPv6), then the other ids as text. The API sorts by id
// as text (127.0.0.200 before 127.0.0.50); --output json keeps that order.
func sortedForTable(items []nodes.View) []nodes.View {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b nodes.View) int { return compareNodeIDs(a.ID, b.ID) })
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
			var out nodeOut
			if err := call(cmd, "nodes.get", map[string]any{"nodeId": args[0]}, &out); err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error { return printNode(w, out) })
		},
	}
}

// printNode writes one node as "key: value" lines.
func printNode(w io.Writer, out nodeOut) error {
	v := out.View
	agent := "cubefleet agent"
	if v.RegistryOnly {
		agent = "stock Cubelet (" + nodes.RegistryOnlyReason + ")"
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
		{"Last report", nodetext.Ago(out.Now, v.LastReportAt) + " (" + formatTime(v.LastReportAt) + ")"},
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
	}
	if r := out.Room; r != nil {
		lines = append(lines,
			[2]string{"Reported use", usageCell(r.Reported)},
			[2]string{"Reserved", usageCell(r.Reserved) + fmt.Sprintf(" (%s placed, not yet reported)", plural(r.Reservations, "sandbox", "sandboxes"))},
			[2]string{"Room left", usageCell(r.Remaining)})
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
func usageCell(u scheduler.Usage) string {
	s := fmt.Sprintf("%s cores, %sGi, %s", nodetext.Cores(u.CPU), nodetext.GiB(u.MemoryMiB), plural(int(u.MvmNum), "microVM", "microVMs"))
	if u.DiskMiB > 0 {
		s += ", disk " + nodetext.GiB(u.DiskMiB) + "Gi"
	}
	return s
}

func stateSince(now, since int64) string {
	if since == 0 {
		return ""
	}
	return " (since " + strings.TrimSuffix(nodetext.Ago(now, since), " ago") + ")"
}

func templatesCell(v nodes.View) string {
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

// nodeAction runs a nodes.* method that returns one node and prints done (or the node as
// JSON).
func nodeAction(cmd *cobra.Command, method string, in map[string]any, done string) error {
	var out nodeOut
	if err := call(cmd, method, in, &out); err != nil {
		return err
	}
	return render(cmd, out, func(w io.Writer) error {
		_, err := linef(w, "%s\n", done)
		return err
	})
}

func newNodesCordonCmd() *cobra.Command {
	var detail string
	cmd := &cobra.Command{
		Use:   "cordon NODE [--detail TEXT]",
		Short: "Cordon a node: it receives no new work (idempotent)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return nodeAction(cmd, "nodes.cordon", map[string]any{"nodeId": args[0], "detail": detail}, "Cordoned node "+args[0]+".")
		},
	}
	cmd.Flags().StringVar(&detail, "detail", "", "why (at most 200 characters)")
	return cmd
}

func newNodesUncordonCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "uncordon NODE",
		Short: "Uncordon a node (idempotent)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return nodeAction(cmd, "nodes.uncordon", map[string]any{"nodeId": args[0]}, "Uncordoned node "+args[0]+".")
		},
	}
}

// Defaults of nodes drain --wait.
const (
	drainTimeout = 10 * time.Minute
	drainPoll    = 2 * time.Second
	minDrainPoll = 100 * time.Millisecond
	// drainGoneAfter is how long --wait must keep reading the node without a drain before it
	// concludes the drain ended (uncordon): a replica other than the one that took the drain
	// shows it within a second or two.
	drainGoneAfter = 3 * time.Second
)

func newNodesDrainCmd() *cobra.Command {
	var reason string
	var wait bool
	var timeout, poll time.Duration
	cmd := &cobra.Command{
		Use:   "drain NODE [--reason TEXT] [--wait [--timeout 10m] [--poll 2s]]",
		Short: "Drain a node: cordon it and (with --wait) wait until it runs no sandboxes",
		Long: `Drain a node, as kubectl drain does: cordon it (it receives no new work; --reason becomes the
cordon's detail unless it is already cordoned) and mark it as draining. The node is drained once
it runs no sandboxes: cubefleet places no sandboxes yet, so that is the node's own last report
(allocated.mvm_num 0, or none reported). Draining a node that is already draining changes
nothing; uncordon ends the drain.

Without --wait it prints what it did and the sandboxes left. With --wait it polls the node every
--poll, prints a line on standard error each time the count changes
("10.0.0.5: 3 sandboxes left (42s)", the time since the drain was asked), and exits 0 once the
node is drained; after --timeout (0: no limit) it exits 1 with DEADLINE_EXCEEDED, naming the
sandboxes left. The node stays cordoned and draining either way, also when you interrupt the
wait. --output json prints the node as it was last read, also when the wait times out, is
interrupted, or ends because the node was uncordoned or deleted (then with an "error" member;
the error text goes to stderr as always).`,
		Example: `  cubefleet nodes drain 10.0.0.5 --reason "kernel update" --wait --timeout 30m
  cubefleet nodes delete 10.0.0.5`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !wait && (cmd.Flags().Changed("timeout") || cmd.Flags().Changed("poll")) {
				return usagef("--timeout and --poll apply only with --wait")
			}
			if timeout < 0 {
				return usagef("--timeout %s: want 0 (no limit) or more", timeout)
			}
			if poll < minDrainPoll {
				return usagef("--poll %s: want at least %s", poll, minDrainPoll)
			}
			c, err := connect(cmd)
			if err != nil {
				return err
			}
			id := args[0]
			ctx := cmd.Context()
			if wait && timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			w := drainWait{cmd: cmd, c: c, ctx: ctx, id: id, timeout: timeout, poll: poll}
			var out nodeOut
			if err := c.Call(ctx, "nodes.drain", map[string]any{"nodeId": id, "reason": reason}, &out); err != nil {
				return w.stopped(err, nil)
			}
			if wait {
				if out, err = w.wait(out); err != nil {
					// Timed out, interrupted, uncordoned or deleted: --output json still
					// prints the node as last read (with the error added; see Run).
					if wantJSON(cmd) {
						if jerr := emitJSON(cmd, out); jerr != nil {
							return errors.Join(err, jerr)
						}
					}
					return err
				}
			}
			return render(cmd, out, func(w io.Writer) error {
				_, err := linef(w, "%s\n", drainDone(out, wait))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&reason, "reason", "", "why (at most 200 characters; the cordon's detail unless the node is already cordoned)")
	f.BoolVar(&wait, "wait", false, "wait until the node runs no sandboxes")
	f.DurationVar(&timeout, "timeout", drainTimeout, "with --wait: give up after this long (0: no limit)")
	f.DurationVar(&poll, "poll", drainPoll, "with --wait: read the node this often")
	return cmd
}

// drainDone is what nodes drain prints once it is done (waited: after --wait).
func drainDone(out nodeOut, waited bool) string {
	d := out.Drain
	switch {
	case d == nil: // cannot happen: nodes.drain answers a draining node
		return "Cordoned node " + out.ID + "."
	case d.State == nodes.DrainDrained && waited:
		end := d.DrainedAt
		if end == 0 {
			end = out.Now
		}
		return fmt.Sprintf("Drained node %s: cordoned, no sandboxes left (%s after it was asked).", out.ID, elapsed(end, d.RequestedAt))
	case d.State == nodes.DrainDrained:
		return "Drained node " + out.ID + ": cordoned, no sandboxes left."
	}
	return fmt.Sprintf("Draining node %s: cordoned, %s left.", out.ID, plural(int(d.SandboxesLeft), "sandbox", "sandboxes"))
}

// elapsed renders the time from since to now (both Unix ms) in whole seconds: "42s", "2m5s".
func elapsed(now, since int64) string {
	return (time.Duration(max(now-since, 0)) * time.Millisecond).Round(time.Second).String()
}

// drainWait is one nodes drain --wait: it polls node id through c until it is drained, ctx
// (bounded by --timeout) ends, or a call fails.
type drainWait struct {
	cmd     *cobra.Command
	c       *client.Client
	ctx     context.Context
	id      string
	timeout time.Duration
	poll    time.Duration
}

// wait polls from out (the answer of nodes.drain) until the node is drained and returns it as
// last read, printing a progress line on standard error each time the count changes. Errors:
// DEADLINE_EXCEEDED after --timeout; CONFLICT when the node shows no drain for drainGoneAfter
// (it was uncordoned meanwhile); NOT_FOUND when it was deleted meanwhile; an interruption; any
// failed call. On an error, the node returned is the one last read.
func (w drainWait) wait(out nodeOut) (nodeOut, error) {
	progress := w.cmd.ErrOrStderr()
	shown := int64(-1)
	last := out.Drain // the last drain read
	var gone time.Time
	for {
		switch d := out.Drain; {
		case d == nil && gone.IsZero():
			gone = time.Now() // perhaps a replica that has not seen the drain yet
		case d == nil && time.Since(gone) >= drainGoneAfter:
			return out, cubefleet.Errorf(cubefleet.CodeConflict, "node %s is no longer draining: it was uncordoned while this waited", w.id)
		case d == nil:
		case d.State == nodes.DrainDrained:
			return out, nil
		default:
			last, gone = d, time.Time{}
			if d.SandboxesLeft != shown {
				linef(progress, "%s: %s left (%s)\n", w.id, plural(int(d.SandboxesLeft), "sandbox", "sandboxes"), elapsed(out.Now, d.RequestedAt))
				shown = d.SandboxesLeft
			}
		}
		t := time.NewTimer(w.poll)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return out, w.stopped(w.ctx.Err(), last)
		case <-t.C:
		}
		var next nodeOut
		if err := w.c.Call(w.ctx, "nodes.get", map[string]any{"nodeId": w.id}, &next); err != nil {
			if cubefleet.IsCode(err, cubefleet.CodeNotFound) {
				return out, cubefleet.Errorf(cubefleet.CodeNotFound, "node %s was deleted while this waited for its drain (%s when last read)", w.id, sandboxesLeft(last, "it ran"))
			}
			return out, w.stopped(err, last)
		}
		out = next
	}
}

// stopped turns the error that ended a drain or its wait into the command's error: the
// timeout is DEADLINE_EXCEEDED and an interruption (Ctrl-C) says so, both naming the node and
// the sandboxes it ran when last read (last; nil when it was never read); other errors pass.
func (w drainWait) stopped(err error, last *nodes.DrainView) error {
	left := sandboxesLeft(last, "it still runs")
	switch {
	case w.cmd.Context().Err() != nil:
		return fmt.Errorf("interrupted: node %s is not drained yet: %s; it stays cordoned and draining", w.id, left)
	case errors.Is(w.ctx.Err(), context.DeadlineExceeded):
		return cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "node %s is not drained after %s: %s; it stays cordoned and draining (run the command again to keep waiting; uncordon ends the drain)",
			w.id, w.timeout, left)
	}
	return err
}

// sandboxesLeft says how many sandboxes a drain had left when last read ("it still runs 3
// sandboxes", verb first), or that the count is unknown (last is nil).
func sandboxesLeft(last *nodes.DrainView, verb string) string {
	if last == nil {
		return "its sandbox count is unknown"
	}
	return verb + " " + plural(int(last.SandboxesLeft), "sandbox", "sandboxes")
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
			var out struct {
				nodeOut
				Changed *bool `json:"changed,omitempty"` // absent from a server that does not tell
			}
			if err := call(cmd, "nodes.label", map[string]any{"nodeId": id, "set": set, "remove": remove}, &out); err != nil {
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

func newNodesDeleteCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete NODE [--force]",
		Short: "Delete a cordoned node and revoke its credential",
		Long: `Delete a node from the registry and revoke its node credential: its agent is refused from
then on and joins again only with a new join token (a stock Cubelet registers again when it
restarts). The node must be cordoned; without --force it must also be Ready and run no
sandboxes.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return nodeAction(cmd, "nodes.delete", map[string]any{"nodeId": args[0], "force": force}, "Deleted node "+args[0]+".")
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete even while the node is not Ready or runs sandboxes")
	return cmd
}

func newNodesJoinTokenCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("join-token", "Make, list and revoke join tokens for cubefleet agent", "")
	cmd.AddCommand(newNodesJoinTokenCreateCmd(stdio), newNodesJoinTokenListCmd(), newNodesJoinTokenRevokeCmd())
	return cmd
}

// joinTokenListOut is the output of nodes.joinTokens.list.
type joinTokenListOut struct {
	Items []nodes.JoinToken `json:"items"`
	Now   int64             `json:"now"`
}

func newNodesJoinTokenListCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list [--all]",
		Short: "List join tokens: id, prefix, pool, state, uses left, address, expiry (never the token)",
		Long: `List the join tokens, oldest first: id, the token's first characters (PREFIX, to recognise
it), pool, state (usable, used, expired, revoked), uses left of the uses it allowed, the
address it is bound to ("any" for --any-ip, "first use" while unbound), when it expires and who
made it. Without --all only usable tokens are listed. The token itself is never shown again.
--output json prints the API's answer.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out joinTokenListOut
			if err := call(cmd, "nodes.joinTokens.list", map[string]any{"all": all}, &out); err != nil {
				return err
			}
			if out.Items == nil {
				out.Items = []nodes.JoinToken{}
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, t := range out.Items {
					rows = append(rows, []string{t.ID, t.Prefix + "...", poolName(t), string(t.State), fmt.Sprintf("%d/%d", t.UsesLeft, t.Uses),
						joinTokenAddr(t), formatTime(t.ExpiresAt), t.CreatedBy})
				}
				return printTable(w, []string{"ID", "PREFIX", "POOL", "STATE", "USES LEFT", "IP", "EXPIRES", "CREATED BY"}, rows)
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also list used, expired and revoked tokens")
	return cmd
}

// joinTokenAddr is where a token is accepted from: its address, "any", or "first use".
func joinTokenAddr(t nodes.JoinToken) string {
	switch {
	case t.AnyIP:
		return "any"
	case t.IP != "":
		return t.IP
	}
	return "first use"
}

func newNodesJoinTokenRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a join token: no node can join with it from then on (idempotent)",
		Long: `Revoke a join token by its id (jtk_..., as join-token list shows it): every control plane
replica refuses it from then on. Revoking a revoked token changes nothing. Nodes that already
joined with it keep their own credentials (delete them to remove them).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				JoinToken nodes.JoinToken `json:"joinToken"`
			}
			if err := call(cmd, "nodes.joinTokens.revoke", map[string]any{"id": args[0]}, &out); err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Revoked join token %s (%s..., pool %s).\n", out.JoinToken.ID, out.JoinToken.Prefix, poolName(out.JoinToken))
				return err
			})
		},
	}
}

func newNodesJoinTokenCreateCmd(stdio IO) *cobra.Command {
	var pool, ip string
	var uses int
	var ttl time.Duration
	var anyIP bool
	cmd := &cobra.Command{
		Use:   "create --pool P [--uses 1] [--ttl 1h] [--ip A.B.C.D | --any-ip]",
		Short: "Create a join token and print it once",
		Long: `Create a join token for "cubefleet agent" and print it on stdout, shown only this once. The
node that registers with it joins --pool (a pool id or fleet name) and receives its own node
credential. The token allows --uses registrations (default 1, at most 10000), expires after
--ttl (1s to 168h, default 1h), and is accepted only from --ip and registers only that address
(the node's node_id and host_ip); without --ip it binds itself to the address of its first
successful registration, unless --any-ip. --ip is a node's address: not 0.0.0.0, ::, a
multicast or the broadcast address. A join token never takes over a registered node.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if uses < 1 || uses > nodes.MaxJoinTokenUses {
				return usagef("--uses %d: a join token allows 1 to %d registrations", uses, nodes.MaxJoinTokenUses)
			}
			if ttl < time.Second || ttl > nodes.MaxJoinTokenTTL {
				return usagef("--ttl %s: a join token lives 1s to 168h", ttl)
			}
			if ip != "" {
				if _, err := nodes.ParseJoinTokenIP(ip); err != nil {
					return usagef("--ip %v", err)
				}
			}
			in := map[string]any{"pool": pool, "uses": uses, "ttlSeconds": int64(ttl / time.Second), "ip": ip, "anyIp": anyIP}
			var out struct {
				JoinToken nodes.JoinToken `json:"joinToken"`
				Token     string          `json:"token"`
			}
			if err := call(cmd, "nodes.joinTokens.create", in, &out); err != nil {
				return err
			}
			bound := "bound to the address of its first use"
			switch {
			case out.JoinToken.IP != "":
				bound = "accepted only from " + out.JoinToken.IP
			case out.JoinToken.AnyIP:
				bound = "accepted from any address"
			}
			fmt.Fprintf(stdio.Err, "warning: join token %s for pool %s (%d use(s), %s, expires %s) is shown only this once.\n",
				out.JoinToken.ID, poolName(out.JoinToken), out.JoinToken.Uses, bound, formatTime(out.JoinToken.ExpiresAt))
			return render(cmd, out, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, out.Token)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&pool, "pool", "", "pool the node joins (id or fleet name)")
	f.IntVar(&uses, "uses", 1, "how many registrations the token allows")
	f.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	f.StringVar(&ip, "ip", "", "the only address the token is accepted from")
	f.BoolVar(&anyIP, "any-ip", false, "accept the token from any address (for --uses > 1 across hosts)")
	cmd.MarkFlagRequired("pool")
	cmd.MarkFlagsMutuallyExclusive("ip", "any-ip")
	return cmd
}

func poolName(t nodes.JoinToken) string {
	if t.Pool != "" {
		return t.Pool
	}
	return t.PoolID
}

// eventPage is what `nodes events` prints with --output json: events.list's answer.
type eventPage struct {
	Items      []events.Event `json:"items"`
	NextCursor string         `json:"nextCursor,omitempty"`
	OlderExist bool           `json:"olderExist,omitempty"`
}

func newNodesEventsCmd() *cobra.Command {
	var typ, since, cursor string
	var limit int
	cmd := &cobra.Command{
		Use:   "events [NODE] [--type node.lost] [--since 10m|RFC3339] [--limit N] [--cursor C]",
		Short: "List node lifecycle events (joined, suspect, down, lost, recovered, cordoned, draining, drained, ...), the newest by default",
		Long: `List the node lifecycle events of the event log (of NODE, or of every node), oldest first:
node.joined, node.suspect, node.down, node.lost, node.recovered, node.notReady, node.cordoned,
node.uncordoned, node.draining, node.drained, node.deleted.

Without --since or --cursor it lists the newest --limit events (default 100, at most 1000),
like journalctl -n: what just happened. When older ones exist a last line says so
(--output json: olderExist). With --since (a duration back from now, 10m, 2h, 7d, or an
RFC 3339 time) or --cursor it reads forwards from there, --limit events at a time; when more
exist a last line names the --cursor that lists the next ones (--output json: nextCursor).

Events reach the log about a second after the change: the registry writes them with its
once-a-second flush.`,
		Example: `  cubefleet nodes events 10.0.0.5                 # why did it just go Down?
  cubefleet nodes events --type node.lost --since 24h`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("events takes at most one NODE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 {
				return usagef("--limit must be at least 1")
			}
			sinceMs, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			if typ == "" {
				typ = "node."
			}
			subject := ""
			if len(args) == 1 {
				subject = args[0]
			}
			in := map[string]any{"type": typ, "subject": subject, "since": sinceMs}
			var out eventPage
			if since == "" && cursor == "" { // the tail of the log
				if limit > 1000 {
					return usagef("--limit is at most 1000 for the newest events; read older ones with --since")
				}
				in["newest"], in["limit"] = true, limit
				if err := call(cmd, "events.list", in, &out); err != nil {
					return err
				}
			} else {
				p, err := listPages[events.Event](cmd, "events.list", in, cursor, limit)
				if err != nil {
					return err
				}
				out.Items, out.NextCursor = p.Items, p.NextCursor
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, e := range out.Items {
					rows = append(rows, []string{formatTime(e.At), e.Type, e.Subject, string(e.Data)})
				}
				if err := printTable(w, []string{"TIME", "TYPE", "NODE", "DATA"}, rows); err != nil {
					return err
				}
				if out.OlderExist {
					_, err := linef(w, "(the newest %d events; older ones exist: raise --limit, or read from a time with --since 2h)\n", len(out.Items))
					return err
				}
				return moreNotice(w, len(out.Items), "events", out.NextCursor, "narrow --since")
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "only events of this type (node.lost) or prefix (node.)")
	f.StringVar(&since, "since", "", "only events since this long ago (10m, 1h, 7d) or this RFC 3339 time")
	f.IntVar(&limit, "limit", 100, "at most this many events (the newest, without --since or --cursor: at most 1000)")
	f.StringVar(&cursor, "cursor", "", "start after this event (the cursor a previous page named)")
	return cmd
}
