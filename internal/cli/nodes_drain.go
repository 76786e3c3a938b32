package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/client"
)

// Defaults of nodes drain --wait.
const (
	drainTimeout = 10 * time.Minute
	drainPoll    = 2 * time.Second
	minDrainPoll = 100 * time.Millisecond
	// maxDrainDeadline bounds --deadline (the API's deadlineSeconds: 7 days).
	maxDrainDeadline = 7 * 24 * time.Hour
	// drainGoneAfter is how long --wait must keep reading the node without a drain before it
	// concludes the drain ended (uncordon): a replica other than the one that took the drain
	// shows it within a second or two.
	drainGoneAfter = 3 * time.Second
)

func newNodesDrainCmd() *cobra.Command {
	var reason string
	var wait, force bool
	var timeout, poll, deadline time.Duration
	cmd := &cobra.Command{
		Use:   "drain NODE [--reason TEXT] [--force] [--deadline D] [--wait [--timeout 10m] [--poll 2s]]",
		Short: "Drain a node: cordon it and (with --wait) wait until it runs no sandboxes",
		Long: `Drain a node, as kubectl drain does: cordon it (it receives no new work; --reason becomes the
cordon's detail unless it is already cordoned) and mark it as draining. Its sandboxes run to
their end (idle warm sandboxes are stopped); the node is drained once its agent reports that it
runs none, not when it was told to stop them (a stock Cubelet: its allocated.mvm_num is 0).
Draining a node that is already draining changes nothing; uncordon ends the drain.

Without --deadline nothing is evicted: the drain waits for the sandboxes' own ends. With
--deadline D, once D has passed since this drain, the sandboxes still running there are
stopped (SIGTERM, then SIGKILL after each one's terminationGraceSeconds) and end killed with
reason node_drained; their results are kept. Draining again with an earlier deadline brings it
forward; a later one changes nothing.

A pool's policy.disruptionBudget bounds how many of its nodes may be out at once (draining, or
drained and not yet deleted; the fraction rounded up): a drain past it is refused (CONFLICT,
naming the budget and the nodes out). --force drains anyway; the audit log records that it
overrode the budget.

Without --wait it prints what it did and the sandboxes left. With --wait it polls the node every
--poll, prints a line on standard error each time the count changes
("10.0.0.5: 3 sandboxes left (42s)", the time since the drain was asked), and exits 0 once the
node is drained; once --timeout (0: no limit) has passed since the drain answered, it exits 1
with DEADLINE_EXCEEDED, naming the sandboxes left and the ids of those still running. The node
stays cordoned and draining either way, also when you interrupt the wait. --output json prints
the node as it was last read, also when the wait times out, is interrupted, or ends because the
node was uncordoned or deleted (then with an "error" member; the error text goes to stderr as
always).`,
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
			if cmd.Flags().Changed("deadline") && (deadline < time.Second || deadline > maxDrainDeadline || deadline%time.Second != 0) {
				return usagef("--deadline %s: give whole seconds, 1s to 168h (7 days)", deadline)
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			id := args[0]
			w := drainWait{cmd: cmd, c: c, ctx: cmd.Context(), id: id, timeout: timeout, poll: poll}
			out, err := c.Nodes.Drain(w.ctx, api.NodeDrainInput{NodeID: id, Reason: reason, Force: force, DeadlineSeconds: int64(deadline / time.Second)})
			if err != nil {
				return w.stopped(err, nil)
			}
			if wait && timeout > 0 { // the wait's bound counts from the drain's answer, which names the sandboxes left
				var cancel context.CancelFunc
				w.ctx, cancel = context.WithTimeout(w.ctx, timeout)
				defer cancel()
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
	f.BoolVar(&force, "force", false, "drain even past the pool's disruption budget (audited)")
	durationVar(f, &deadline, "deadline", 0, "stop the sandboxes still running this long after the drain (killed, node_drained; results kept; default: none, nothing is evicted)")
	durationVar(f, &timeout, "timeout", drainTimeout, "with --wait: give up this long after the drain answered (0: no limit)")
	durationVar(f, &poll, "poll", drainPoll, "with --wait: read the node this often")
	return cmd
}

// drainDone is what nodes drain prints once it is done (waited: after --wait).
func drainDone(out api.NodeOutput, waited bool) string {
	d := out.Drain
	switch {
	case d == nil: // cannot happen: nodes.drain answers a draining node
		return "Cordoned node " + out.ID + "."
	case d.State == api.DrainDrained && waited:
		end := d.DrainedAt
		if end == 0 {
			end = out.Now
		}
		return fmt.Sprintf("Drained node %s: cordoned, no sandboxes left (%s after it was asked).", out.ID, elapsed(end, d.RequestedAt))
	case d.State == api.DrainDrained:
		return "Drained node " + out.ID + ": cordoned, no sandboxes left."
	}
	left := fmt.Sprintf("Draining node %s: cordoned, %s left", out.ID, plural(int(d.SandboxesLeft), "sandbox", "sandboxes"))
	if d.Deadline != 0 {
		left += fmt.Sprintf("; those still running at %s (in %s) are stopped", time.UnixMilli(d.Deadline).UTC().Format(time.RFC3339), elapsed(d.Deadline, out.Now))
	}
	return left + "."
}

// elapsed renders the time from since to now (both Unix ms) in whole seconds: "42s", "2m5s".
func elapsed(now, since int64) string {
	return (time.Duration(max(now-since, 0)) * time.Millisecond).Round(time.Second).String()
}

// drainWait is one nodes drain --wait: it polls node id through c until it is drained, ctx
// (bounded by --timeout from the drain's answer) ends, or a call fails.
type drainWait struct {
	cmd     *cobra.Command
	c       *client.Client
	ctx     context.Context
	id      string
	timeout time.Duration
	poll    time.Duration
	running *api.NodeSandboxes // what the node ran by the control plane's records, when last read
}

// wait polls from out (the answer of nodes.drain) until the node is drained and returns it as
// last read, printing a progress line on standard error each time the count changes. Errors:
// DEADLINE_EXCEEDED after --timeout; CONFLICT when the node shows no drain for drainGoneAfter
// (it was uncordoned meanwhile); NOT_FOUND when it was deleted meanwhile; an interruption; any
// failed call. On an error, the node returned is the one last read.
func (w drainWait) wait(out api.NodeOutput) (api.NodeOutput, error) {
	progress := w.cmd.ErrOrStderr()
	shown := int64(-1)
	last := out.Drain // the last drain read
	w.running = out.Sandboxes
	var gone time.Time
	for {
		switch d := out.Drain; {
		case d == nil && gone.IsZero():
			gone = time.Now() // perhaps a replica that has not seen the drain yet
		case d == nil && time.Since(gone) >= drainGoneAfter:
			return out, cubefleet.Errorf(cubefleet.CodeConflict, "node %s is no longer draining: it was uncordoned while this waited", w.id)
		case d == nil:
		case d.State == api.DrainDrained:
			return out, nil
		default:
			last, gone = d, time.Time{}
			if out.Sandboxes != nil {
				w.running = out.Sandboxes
			}
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
		next, err := w.c.Nodes.Get(w.ctx, api.NodeRef{NodeID: w.id})
		if err != nil {
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
func (w drainWait) stopped(err error, last *api.NodeDrain) error {
	left := sandboxesLeft(last, "it still runs")
	switch {
	case w.cmd.Context().Err() != nil:
		return fmt.Errorf("interrupted: node %s is not drained yet: %s; it stays cordoned and draining", w.id, left)
	case errors.Is(w.ctx.Err(), context.DeadlineExceeded):
		return cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "node %s is not drained after %s: %s%s; it stays cordoned and draining (run the command again to keep waiting; uncordon ends the drain)",
			w.id, w.timeout, left, stillRuns(w.running))
	}
	return err
}

// stillRuns names the sandboxes a node still runs by the control plane's records (" (sbx_...,
// sbx_...)"), or "" when it knows of none.
func stillRuns(sb *api.NodeSandboxes) string {
	if sb == nil || sb.Running+sb.Pending == 0 {
		return ""
	}
	return " (" + idsCell(append(append([]string{}, sb.RunningIDs...), sb.PendingIDs...), sb.Running+sb.Pending) + ")"
}

// sandboxesLeft says how many sandboxes a drain had left when last read ("it still runs 3
// sandboxes", verb first), or that the count is unknown (last is nil).
func sandboxesLeft(last *api.NodeDrain, verb string) string {
	if last == nil {
		return "its sandbox count is unknown"
	}
	return verb + " " + plural(int(last.SandboxesLeft), "sandbox", "sandboxes")
}
