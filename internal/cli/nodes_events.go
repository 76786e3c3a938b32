package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/client"
)

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
			in := api.EventListInput{Type: typ, Subject: subject, Since: sinceMs}
			// --output json prints events.list's answer.
			out, err := readLog(cmd, "events", since, cursor, limit, func(ctx context.Context, c *client.Client, limit int) ([]api.Event, bool, error) {
				in.Newest, in.Limit = true, limit
				p, err := c.Events.List(ctx, in)
				return p.Items, p.OlderExist, err
			}, func(ctx context.Context, c *client.Client, limit int, cursor string) ([]api.Event, string, error) {
				in.Limit, in.Cursor = limit, cursor
				p, err := c.Events.List(ctx, in)
				return p.Items, p.NextCursor, err
			})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, e := range out.Items {
					rows = append(rows, []string{formatTime(e.At), e.Type, e.Subject, string(e.Data)})
				}
				if err := printTable(w, []string{"TIME", "TYPE", "NODE", "DATA"}, rows); err != nil {
					return err
				}
				return logNotice(w, out, "events")
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
