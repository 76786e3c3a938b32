package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/api/nodetext"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/client"
)

// sandboxWaitChunk bounds one sandboxes.wait call; a longer wait makes several.
// pendingChunk bounds one while the sandbox waits for room, so its progress is shown.
const (
	sandboxWaitChunk = 5 * time.Minute
	pendingChunk     = 10 * time.Second
)

// maxSandboxTimeout bounds --timeout of create (the API's timeoutSeconds, 7 days) and the
// waits (--max-wait, wait --timeout: a week, past which a pipeline should not wait).
const maxSandboxTimeout = api.MaxSandboxTimeoutSeconds * time.Second

// checkDuration refuses duration d of flag outside 0 to maxSandboxTimeout (a usage error naming
// the flag and the range; zero says what 0 means).
func checkDuration(flag string, d time.Duration, zero string) error {
	if d < 0 || d > maxSandboxTimeout {
		return usagef("--%s %s: give 0s (%s) to 168h (7 days)", flag, d, zero)
	}
	return nil
}

func newSandboxesCmd() *cobra.Command {
	cmd := groupCmd("sandboxes", "Create, watch, list and delete sandboxes; read their output",
		`A sandbox runs a command of a sandbox template on a node of the template's pool: the control
plane places it, hands it to the node's agent and keeps its record and result (exit code, and
each output stream up to --result-max-bytes of the server) after the node is gone, for the
server's --result-retention. A sandbox is pending (waiting for a node), starting (handed to its
node), running, then exited, failed, killed or lost. Every command takes the tenant whose
sandboxes it acts on (--tenant); a tenant's keys see only its own sandboxes. See
docs/sandboxes.md.`)
	cmd.Aliases = []string{"sandbox", "sb"} // kubectl's habit: the singular and a short form
	cmd.AddCommand(newSandboxesCreateCmd(), newSandboxesGetCmd(), newSandboxesListCmd(), newSandboxesWaitCmd(),
		newSandboxesDeleteCmd(), newSandboxesLogsCmd())
	return cmd
}

// keyValues parses repeated KEY=VALUE flags into a map (nil for none); a flag without '=' is a
// usage error naming flag.
func keyValues(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("--%s %q: give KEY=VALUE", flag, p)
		}
		if old, dup := out[k]; dup {
			return nil, usagef("--%s %s is given twice (%s=%s and %s=%s): give each key once", flag, k, k, old, k, v)
		}
		out[k] = v
	}
	return out, nil
}

func newSandboxesCreateCmd() *cobra.Command {
	var tenant, template string
	var env, labels, selector []string
	var timeout, maxWait, grace time.Duration
	var async, wait, raw bool
	cmd := &cobra.Command{
		Use:   "create --tenant T --template TPL [--env K=V]... [--timeout D] [--async | --wait] [-- COMMAND [ARG...]]",
		Short: "Create a sandbox of a template; with --wait, run it like a local command",
		Long: `Create a sandbox of the tenant's template (its id or name) running COMMAND (after --; without
one, it idles until its timeout or a delete: sleep 2147483647). --env
adds variables over the template's (a credential's value is a secret://NAME reference, which
only the sandbox ever sees resolved); --label gives the sandbox labels; --node-selector names
labels its node must carry; --timeout ends it (SIGTERM, then SIGKILL after its grace);
--termination-grace is that grace, for a delete, the timeout, a drain's deadline and agent down
alike (1s to 1h; default: the template's, else 10s).

Without --async or --wait it waits until the sandbox runs (at most 30 s) and prints where (exit
1 with the reason when it failed, was killed or lost by then). With --async it answers at once
(pending). With --wait it waits until the command ends and prints its
output as a local run would: its stdout on stdout, its stderr on stderr, and exits with the
command's exit status (128 + the signal's number when a signal ended it; 1 when it failed to
start or was lost; a kill says why on stderr: "sandbox sbx_... killed (timeout): timeout after 5s:
..."), saying on stderr while it waits for room. A terminal gets the output's control characters
other than newline and tab as escapes (\x1b; --raw: byte for byte), a pipe byte for byte. The
sandbox does not read the caller's standard input: --wait refuses a piped input holding data
(give </dev/null). --timeout and --max-wait take 0s
to 168h; --max-wait bounds the wait (0: none); the sandbox keeps running when the wait stops. A quota refusal is RESOURCE_EXHAUSTED naming the quota, its limit and use.`,
		Example: `  cubefleet sandboxes create --tenant acme --template py --wait -- python3 -c 'print(6*7)'
  cubefleet sandboxes create --tenant acme --template py --env API_TOKEN=secret://api-token --async -- ./job.sh`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if async && wait {
				return usagef("--async and --wait exclude each other: --async answers at once, --wait waits for the command's end")
			}
			if !wait && (cmd.Flags().Changed("max-wait") || raw) {
				return usagef("--max-wait and --raw apply only with --wait")
			}
			if wait && pendingStdin(cmd.InOrStdin()) {
				return usagef("standard input holds data, and a sandbox does not read the caller's input: run the command with </dev/null, or put the data in the command (-- sh -c 'printf ... | COMMAND')")
			}
			if err := checkDuration("timeout", timeout, "none"); err != nil {
				return err
			}
			if timeout%time.Second != 0 {
				return usagef("--timeout %s: give whole seconds, 0s (none) to 168h (7 days)", timeout)
			}
			if err := checkDuration("max-wait", maxWait, "no limit"); err != nil {
				return err
			}
			if cmd.Flags().Changed("termination-grace") && (grace < time.Second || grace > time.Hour || grace%time.Second != 0) {
				return usagef("--termination-grace %s: give whole seconds, 1s to 1h", grace)
			}
			if cmd.ArgsLenAtDash() < 0 && len(args) > 0 || cmd.ArgsLenAtDash() > 0 {
				return usagef("give the command after --: cubefleet sandboxes create ... -- COMMAND [ARG...]")
			}
			in := api.SandboxCreateInput{TenantID: tenant, Template: template, Command: args, TimeoutSeconds: int64(timeout / time.Second), Async: async || wait,
				TerminationGraceSeconds: int64(grace / time.Second)}
			for _, kv := range []struct {
				flag  string
				pairs []string
				to    *map[string]string
			}{{"env", env, &in.Env}, {"label", labels, &in.Labels}, {"node-selector", selector, &in.NodeSelector}} {
				m, err := keyValues(kv.flag, kv.pairs)
				if err != nil {
					return err
				}
				*kv.to = m
			}
			r, err := typedReplicas(cmd)
			if err != nil {
				return err
			}
			s, err := r.current().Sandboxes.Create(cmd.Context(), in)
			if err != nil {
				return err
			}
			if wait {
				return runToEnd(cmd, r, tenant, s, maxWait, raw)
			}
			err = render(cmd, s, func(w io.Writer) error {
				_, err := linef(w, "%s\n", createdLine(s))
				return err
			})
			if err == nil && s.State.Final() && s.State != api.SandboxExited {
				return endError(s) // it failed, was killed or lost before it ran: as --wait says
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant whose sandbox it is")
	f.StringVar(&template, "template", "", "the tenant's sandbox template (id or name)")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE over the template's (repeatable; credentials as secret://NAME)")
	f.StringArrayVar(&labels, "label", nil, "the sandbox's label key=value (repeatable)")
	f.StringArrayVar(&selector, "node-selector", nil, "a label key=value its node must carry (repeatable)")
	f.DurationVar(&timeout, "timeout", 0, "end the sandbox this long after it started (whole seconds; 0: none)")
	durationVar(f, &grace, "termination-grace", 0, "time between SIGTERM and SIGKILL when it is stopped (whole seconds, 1s to 1h; default: the template's, else 10s)")
	f.BoolVar(&async, "async", false, "answer at once, before the sandbox is placed")
	f.BoolVar(&wait, "wait", false, "wait for the command's end, print its output and exit with its status")
	f.DurationVar(&maxWait, "max-wait", 0, "with --wait: stop waiting after this long (0: no limit)")
	f.BoolVar(&raw, "raw", false, "with --wait: write the output byte for byte to a terminal too (default there: control characters but \\n and \\t shown as escapes)")
	cmd.MarkFlagRequired("tenant")
	cmd.MarkFlagRequired("template")
	return cmd
}

// createdLine says what a create made.
func createdLine(s api.Sandbox) string {
	prefix := "Created sandbox " + s.ID
	if s.Warm && s.ClaimedAt != 0 {
		prefix = "Created sandbox " + s.ID + " from a warm sandbox"
	}
	switch {
	case s.State == api.SandboxPending && s.Message != "":
		return prefix + ": pending (" + s.Message + ")."
	case s.NodeID != "":
		return fmt.Sprintf("%s: %s on node %s.", prefix, s.State, s.NodeID)
	}
	return prefix + ": " + string(s.State) + "."
}

// exitStatus ends a command with status code and nothing more printed: sandboxes create --wait
// exits with the sandbox's command's status.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// runToEnd waits for sandbox s to end (at most maxWait, 0: no limit), writes its output (stdout
// to stdout, stderr to stderr; escaped for a terminal unless raw, see writeSandboxOutput) and returns its exit status as an exitStatus (nil for 0), or
// the error of a sandbox that failed or was lost.
func runToEnd(cmd *cobra.Command, c *replicas, tenant string, s api.Sandbox, maxWait time.Duration, raw bool) error {
	ctx := cmd.Context()
	if maxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, maxWait)
		defer cancel()
	}
	if s.State == api.SandboxPending {
		if err := waitForRoom(ctx, cmd, c, tenant, s); err != nil {
			return waitStopped(cmd, c, ctx, tenant, s.ID, err, maxWait)
		}
	}
	if !wantJSON(cmd) { // the output as it arrives
		if _, err := followLogs(ctx, c, tenant, s.ID, api.SandboxLogs{}, cmd.OutOrStdout(), cmd.ErrOrStderr(), raw); err != nil {
			return waitStopped(cmd, c, ctx, tenant, s.ID, err, maxWait)
		}
	}
	got, err := waitSandbox(ctx, c, tenant, s.ID, "ended")
	if err != nil {
		return waitStopped(cmd, c, ctx, tenant, s.ID, err, maxWait)
	}
	if !wantJSON(cmd) { // the output was printed as it arrived
		return endOf(cmd, got.Sandbox)
	}
	logs, err := reconnecting(cmd.Context(), c, func(ctx context.Context, c *client.Client) (api.SandboxLogs, error) {
		return c.Sandboxes.Logs(ctx, api.SandboxLogsInput{TenantID: tenant, ID: s.ID, Encoding: "base64"})
	})
	if err != nil {
		return err
	}
	stdout, err1 := base64.StdEncoding.DecodeString(logs.Stdout)
	stderr, err2 := base64.StdEncoding.DecodeString(logs.Stderr)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("the server's output of %s: %w", s.ID, err)
	}
	type result struct {
		Sandbox api.Sandbox `json:"sandbox"`
		Stdout  string      `json:"stdout"`
		Stderr  string      `json:"stderr"`
	}
	if err := emitJSON(cmd, result{Sandbox: got.Sandbox, Stdout: string(stdout), Stderr: string(stderr)}); err != nil {
		return err
	}
	return endOf(cmd, got.Sandbox)
}

// endOf is how `create --wait` ends for sandbox s, which has ended: its exit status, and on
// stderr why a sandbox that did not exit by itself ended (as a shell says what killed a
// command: a timeout, a delete, a drain).
func endOf(cmd *cobra.Command, s api.Sandbox) error {
	err := endStatus(s)
	if s.State != api.SandboxExited && errors.As(err, new(exitStatus)) {
		linef(cmd.ErrOrStderr(), "%s\n", endError(s))
	}
	return err
}

// endStatus is the exit status of an ended sandbox as a shell gives it: its exit code, 128 plus
// the signal's number when a signal ended it; a sandbox that failed or was lost is an error.
func endStatus(s api.Sandbox) error {
	r := s.Result
	switch {
	case r != nil && r.ExitCode != nil && *r.ExitCode == 0:
		return nil
	case r != nil && r.ExitCode != nil:
		return exitStatus{*r.ExitCode}
	case r != nil && r.Signal != "":
		if n := unix.SignalNum(r.Signal); n != 0 {
			return exitStatus{128 + int(n)}
		}
		return exitStatus{128}
	case s.State == api.SandboxKilled:
		return exitStatus{128 + int(unix.SIGKILL)}
	}
	return endError(s)
}

// endError says why sandbox s ended without a result of its command: "sandbox sbx_... lost
// (node_down): node 10.0.0.5 is Down".
func endError(s api.Sandbox) error {
	msg := "sandbox " + s.ID + " " + string(s.State)
	if s.Reason != "" && !strings.HasPrefix(s.Message, s.Reason) { // "timeout after 30s: ..." says it
		msg += " (" + s.Reason + ")"
	}
	if s.Message != "" {
		msg += ": " + s.Message
	}
	return errors.New(msg)
}

// waitForRoom waits while pending sandbox s waits for room, saying so on stderr ("Sandbox
// sbx_... is pending: waiting for room in pool vps-fra (2 creates ahead)") whenever what the
// records say changes, until it is placed or ended (or ctx ends).
func waitForRoom(ctx context.Context, cmd *cobra.Command, c *replicas, tenant string, s api.Sandbox) error {
	last := ""
	for s.State == api.SandboxPending {
		if line := pendingLine(s); line != last {
			linef(cmd.ErrOrStderr(), "%s\n", line)
			last = line
		}
		chunk := pendingChunk
		if d, ok := ctx.Deadline(); ok {
			chunk = min(chunk, max(time.Until(d), time.Second))
		}
		next, err := reconnecting(ctx, c, func(ctx context.Context, c *client.Client) (api.SandboxWaitOutput, error) {
			return c.Sandboxes.Wait(ctx, api.SandboxWaitInput{TenantID: tenant, ID: s.ID, Until: "running", TimeoutSeconds: int64((chunk + time.Second - 1) / time.Second)})
		})
		if err != nil {
			return err
		}
		s = next.Sandbox
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// pendingLine says why pending sandbox s waits.
func pendingLine(s api.Sandbox) string {
	why := s.Message
	if why == "" {
		why = s.Reason
	}
	return "Sandbox " + s.ID + " is pending: " + why
}

// waitSandbox calls sandboxes.wait until sandbox id got where until says ("ended" or
// "running") or ctx ends; it returns the sandbox as last read (and ctx's error, if it ended
// first).
func waitSandbox(ctx context.Context, c *replicas, tenant, id, until string) (api.SandboxWaitOutput, error) {
	var out api.SandboxWaitOutput
	for {
		chunk := sandboxWaitChunk
		if d, ok := ctx.Deadline(); ok {
			chunk = min(chunk, max(time.Until(d), time.Second))
		}
		next, err := reconnecting(ctx, c, func(ctx context.Context, c *client.Client) (api.SandboxWaitOutput, error) {
			return c.Sandboxes.Wait(ctx, api.SandboxWaitInput{TenantID: tenant, ID: id, Until: until, TimeoutSeconds: int64((chunk + time.Second - 1) / time.Second)})
		})
		if err != nil {
			return out, err
		}
		out = next
		if out.Done {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
}

// waitStopped turns the error that ended a wait for sandbox id into the command's error: its
// limit is DEADLINE_EXCEEDED and an interruption says so, both naming the sandbox and where it
// is now (read again: running on node N, pending: waiting for room ...) and the command that
// waits on; the sandbox goes on (running, or pending while it waits for room).
func waitStopped(cmd *cobra.Command, c *replicas, ctx context.Context, tenant, id string, err error, limit time.Duration) error {
	interrupted := cmd.Context().Err() != nil
	next := fmt.Sprintf("cubefleet sandboxes wait %s --tenant %s, or cubefleet sandboxes delete %s --tenant %s", id, tenant, id, tenant)
	if !interrupted && ctx.Err() == nil && connectionLost(err) {
		return fmt.Errorf("the control plane could not be reached for %s: %w; sandbox %s keeps running (%s)", reconnectFor, err, id, next)
	}
	if !interrupted && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	where, keeps := "its state could not be read", "it keeps running"
	if !interrupted {
		rctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
		defer cancel()
		if s, err := c.current().Sandboxes.Get(rctx, api.TenantSandboxRef{TenantID: tenant, ID: id}); err == nil {
			where = "it is " + whereText(s)
			if s.State == api.SandboxPending {
				keeps = "it keeps waiting for room"
			}
		}
	}
	if interrupted {
		return fmt.Errorf("interrupted: the wait stopped, not sandbox %s, which goes on running or waiting for room (%s)", id, next)
	}
	return cubefleet.Errorf(cubefleet.CodeDeadlineExceeded, "sandbox %s has not ended after %s: %s; %s (%s)", id, limit, where, keeps, next)
}

// whereText says where sandbox s is: "running on node 10.0.0.7", "pending: waiting for room in
// pool vps-fra (2 creates ahead)", "exited (exit code 0)".
func whereText(s api.Sandbox) string {
	switch {
	case s.State == api.SandboxPending:
		return strings.TrimPrefix(pendingLine(s), "Sandbox "+s.ID+" is ")
	case s.State.Final():
		return strings.TrimSuffix(strings.TrimPrefix(waitedLine(s), "Sandbox "+s.ID+" "), ".")
	case s.NodeID != "":
		return string(s.State) + " on node " + s.NodeID
	}
	return string(s.State)
}

func newSandboxesGetCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "get ID --tenant T",
		Short: "Show a sandbox: its state and every state it reached, its command, node and result",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			s, err := c.Sandboxes.Get(cmd.Context(), api.TenantSandboxRef{TenantID: tenant, ID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, s, func(w io.Writer) error { return printSandbox(w, s) })
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose sandbox it is")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// printSandbox writes one sandbox as "key: value" lines, its states one per line.
func printSandbox(w io.Writer, s api.Sandbox) error {
	state := string(s.State)
	if s.Reason != "" && s.Reason != state {
		state += " (" + s.Reason + ")"
	}
	lines := [][2]string{
		{"Sandbox", s.ID},
		{"Tenant", s.TenantID},
		{"Template", s.Template + " (" + s.TemplateID + ")"},
		{"State", state},
	}
	if s.Message != "" {
		lines = append(lines, [2]string{"Message", s.Message})
	}
	lines = append(lines,
		[2]string{"Node", orDash(s.NodeID)},
		[2]string{"Command", orDash(shellLine(s.Command))},
		[2]string{"Resources", fmt.Sprintf("%d vCPU, %d GiB memory, %d GiB disk, %d GPU", s.Resources.VCPU, s.Resources.MemoryGiB, s.Resources.DiskGiB, s.Resources.GPU)},
	)
	if len(s.Env) > 0 {
		lines = append(lines, [2]string{"Env", joinPairs(s.Env)})
	}
	if len(s.Labels) > 0 {
		lines = append(lines, [2]string{"Labels", joinPairs(s.Labels)})
	}
	if len(s.NodeSelector) > 0 {
		lines = append(lines, [2]string{"Node selector", joinPairs(s.NodeSelector)})
	}
	if s.TimeoutSeconds > 0 {
		lines = append(lines, [2]string{"Timeout", (time.Duration(s.TimeoutSeconds) * time.Second).String()})
	}
	if s.Warm {
		warm := "idle, ready to be claimed"
		if s.ClaimedAt != 0 {
			warm = "claimed " + formatTime(s.ClaimedAt)
		}
		lines = append(lines, [2]string{"Warm", warm})
	}
	lines = append(lines, [2]string{"Created", formatTime(s.CreatedAt) + " by " + s.CreatedBy})
	for _, tr := range s.States {
		lines = append(lines, [2]string{"  " + string(tr.State), formatTime(tr.At) + "  " + tr.Reason})
	}
	if r := s.Result; r != nil {
		lines = append(lines, [2]string{"Result", resultText(r)})
		lines = append(lines, [2]string{"Output", fmt.Sprintf("stdout %s%s, stderr %s%s (cubefleet sandboxes logs %s)",
			cubefleet.Count(int(r.StdoutBytes), "byte", "bytes"), cutNote(r.StdoutTruncated), cubefleet.Count(int(r.StderrBytes), "byte", "bytes"), cutNote(r.StderrTruncated), s.ID)})
		var usage []string
		if r.CPUMillis > 0 {
			usage = append(usage, fmt.Sprintf("CPU %d ms", r.CPUMillis))
		}
		if r.PeakMemoryBytes > 0 {
			usage = append(usage, "peak memory "+nodetext.MemoryBytes(r.PeakMemoryBytes))
		}
		if len(usage) > 0 {
			lines = append(lines, [2]string{"Usage", strings.Join(usage, ", ")})
		}
	}
	return printFields(w, 14, lines)
}

func cutNote(cut bool) string {
	if cut {
		return " (cut)"
	}
	return ""
}

// resultText says how a sandbox ended: "exit code 0", "signal SIGKILL", "-".
func resultText(r *api.SandboxResult) string {
	switch {
	case r.ExitCode != nil:
		return fmt.Sprintf("exit code %d", *r.ExitCode)
	case r.Signal != "":
		return "signal " + r.Signal
	}
	return "-"
}

// joinPairs renders a map as "k=v, k=v" in key order.
func joinPairs(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

func newSandboxesListCmd() *cobra.Command {
	var tenant, state, node, template, cursor string
	var warm bool
	var limit int
	cmd := &cobra.Command{
		Use:   "list --tenant T [--state S] [--node N] [--template TPL] [--warm] [--limit N] [--cursor C]",
		Short: "List a tenant's sandboxes, newest first",
		Long: `List a tenant's sandboxes, newest first: id, template, state (with why), node, when it was
created, its exit status once ended, and its command. --state (pending, starting, running,
unknown, exited, failed, killed, lost), --node and --template (id or name) narrow the list; --warm lists
the idle sandboxes of the tenant's warm pools instead, which a create claims. At most --limit
(default 100) are listed; when there are more, the next page's --cursor is printed on stderr.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !api.SandboxState(state).Valid() {
				return usagef("--state %q: give pending, starting, running, unknown, exited, failed, killed or lost", state)
			}
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: give 1 to 1000", limit)
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Sandboxes.List(cmd.Context(), api.SandboxListInput{TenantID: tenant, State: state, Node: node, Template: template, Warm: warm, Limit: limit, Cursor: cursor})
			if err != nil {
				return err
			}
			if out.Items == nil {
				out.Items = []api.Sandbox{}
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, s := range out.Items {
					exit := "-"
					if s.Result != nil {
						exit = strings.TrimPrefix(strings.TrimPrefix(resultText(s.Result), "exit code "), "signal ")
					}
					rows = append(rows, []string{s.ID, s.Template, stateText(s), orDash(s.NodeID), formatTime(s.CreatedAt), exit, commandText(s.Command)})
				}
				if err := printTable(w, []string{"SANDBOX", "TEMPLATE", "STATE", "NODE", "CREATED", "EXIT", "COMMAND"}, rows); err != nil {
					return err
				}
				if out.NextCursor != "" {
					linef(cmd.ErrOrStderr(), "More sandboxes: add --cursor %s\n", out.NextCursor)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant whose sandboxes to list")
	f.StringVar(&state, "state", "", "only sandboxes in this state")
	f.StringVar(&node, "node", "", "only sandboxes on this node")
	f.StringVar(&template, "template", "", "only sandboxes of this template (id or name)")
	f.BoolVar(&warm, "warm", false, "list the idle sandboxes of the tenant's warm pools")
	f.IntVar(&limit, "limit", 100, "list at most this many (1 to 1000)")
	f.StringVar(&cursor, "cursor", "", "the page after this cursor (printed by the previous page)")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// stateText is a sandbox's state with why, for tables: "running", "pending (waiting_for_room)".
func stateText(s api.Sandbox) string {
	switch {
	case s.Warm && s.ClaimedAt == 0 && s.State == api.SandboxRunning:
		return "idle (warm)"
	case s.Warm && s.ClaimedAt == 0 && !s.State.Final():
		return string(s.State) + " (warm top-up)"
	case s.Reason == "" || s.Reason == string(s.State) || s.State == api.SandboxRunning || s.State == api.SandboxStarting:
		return string(s.State)
	}
	return string(s.State) + " (" + s.Reason + ")"
}

// commandText is a command for a table cell: its words quoted for the shell (shellLine), cut
// at 40 characters.
func commandText(argv []string) string {
	s := shellLine(argv)
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > 40 {
		return string(r[:39]) + "…"
	}
	return s
}

func newSandboxesWaitCmd() *cobra.Command {
	var tenant, until string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID --tenant T [--until ended|running] [--timeout 10m]",
		Short: "Wait until a sandbox has ended (or runs), then say how",
		Long: `Wait until the sandbox has ended (--until ended, the default) or runs (--until running), and say
how it ended or where it runs; exit 0. After --timeout (0: no limit) it exits 1 with
DEADLINE_EXCEEDED naming where the sandbox is; the sandbox keeps running. --output json prints
the sandbox as last read.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if until != "ended" && until != "running" {
				return usagef("--until %q: give ended or running", until)
			}
			if err := checkDuration("timeout", timeout, "no limit"); err != nil {
				return err
			}
			c, err := typedReplicas(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			got, err := waitSandbox(ctx, c, tenant, args[0], until)
			if err != nil {
				if got.ID != "" && wantJSON(cmd) {
					emitJSON(cmd, got)
				}
				return waitStopped(cmd, c, ctx, tenant, args[0], err, timeout)
			}
			return render(cmd, got, func(w io.Writer) error {
				_, err := linef(w, "%s\n", waitedLine(got.Sandbox))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose sandbox it is")
	cmd.Flags().StringVar(&until, "until", "ended", "ended or running")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long (0: no limit)")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// waitedLine says where a waited-for sandbox got.
func waitedLine(s api.Sandbox) string {
	if !s.State.Final() {
		return fmt.Sprintf("Sandbox %s is %s on node %s.", s.ID, s.State, orDash(s.NodeID))
	}
	line := fmt.Sprintf("Sandbox %s %s", s.ID, s.State)
	if r := s.Result; r != nil && resultText(r) != "-" && (r.Signal == "" || !strings.Contains(s.Message, r.Signal)) {
		line += " (" + resultText(r) + ")" // unless the message names the signal: "killed by SIGTERM"
	}
	if s.State != api.SandboxExited && s.Message != "" {
		line += ": " + s.Message
	}
	return line + "."
}

func newSandboxesDeleteCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "delete ID --tenant T",
		Short: "Delete a sandbox: stop it if it runs, and forget it with its result",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			s, err := c.Sandboxes.Delete(cmd.Context(), api.TenantSandboxRef{TenantID: tenant, ID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, s, func(w io.Writer) error {
				line := "Deleted sandbox " + s.ID + " and its result."
				if !ran(s) {
					line = "Deleted sandbox " + s.ID + "; it never ran, so it had no result."
				}
				if s.StopRequestedAt != 0 {
					line = "Deleted sandbox " + s.ID + ": node " + s.NodeID + " stops it (SIGTERM, then SIGKILL after its grace)."
				}
				_, err := linef(w, "%s\n", line)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose sandbox it is")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// ran reports whether sandbox s ever ran (reached running).
func ran(s api.Sandbox) bool {
	for _, st := range s.States {
		if st.State == api.SandboxRunning {
			return true
		}
	}
	return false
}

func newSandboxesLogsCmd() *cobra.Command {
	var tenant string
	var raw, follow bool
	cmd := &cobra.Command{
		Use:   "logs ID --tenant T [--follow]",
		Short: "Print a sandbox's output: its stdout on stdout, its stderr on stderr",
		Long: `Print the output of a sandbox: its stdout on stdout and its stderr on stderr, each as kept
(at most the server's --result-max-bytes, a cut stream ending with the marker line). While the
sandbox runs, its node sends its output as it writes it (every 100 ms): without --follow, logs
prints what arrived so far; with --follow, it prints the output as it arrives until the sandbox
ends. --output json prints both as text (no --follow). A pipe or file gets the output byte for
byte; a terminal gets control characters other than newline and tab shown as escapes (\x1b),
since the output is the tenant's and could otherwise write to the clipboard or clear the
screen; --raw writes it byte for byte there too.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			if follow {
				if wantJSON(cmd) {
					return usageError{errors.New("--follow prints the output as it arrives: it takes no --output json")}
				}
				r, err := typedReplicas(cmd)
				if err != nil {
					return err
				}
				_, err = followLogs(cmd.Context(), r, tenant, args[0], api.SandboxLogs{}, cmd.OutOrStdout(), cmd.ErrOrStderr(), raw)
				return err
			}
			encoding := "base64"
			if wantJSON(cmd) {
				encoding = "text"
			}
			out, err := c.Sandboxes.Logs(cmd.Context(), api.SandboxLogsInput{TenantID: tenant, ID: args[0], Encoding: encoding})
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return emitJSON(cmd, out)
			}
			stdout, err1 := base64.StdEncoding.DecodeString(out.Stdout)
			stderr, err2 := base64.StdEncoding.DecodeString(out.Stderr)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("the server's output: %w", err)
			}
			return errors.Join(writeSandboxOutput(cmd.OutOrStdout(), stdout, raw), writeSandboxOutput(cmd.ErrOrStderr(), stderr, raw))
		},
	}
	cmd.Flags().BoolVar(&raw, "raw", false, "write the output byte for byte to a terminal too (default there: control characters but \\n and \\t shown as escapes)")
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose sandbox it is")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the output as it arrives, until the sandbox ends")
	cmd.MarkFlagRequired("tenant")
	return cmd
}
