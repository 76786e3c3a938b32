package cli

import (
	"context"
	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/client"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newAuditCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("audit", "Read the audit log", "")
	cmd.AddCommand(newAuditListCmd())
	return cmd
}

func newAuditListCmd() *cobra.Command {
	var tenant, since, cursor string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--tenant T] [--since 1h|RFC3339] [--limit N] [--cursor C]",
		Short: "List a tenant's audit rows, the newest by default",
		Long: `List the audit rows of --tenant (default root), oldest first: every state-changing call and
every refused one. Like nodes events: without --since or --cursor it lists the newest --limit
rows (default 100, at most 1000), like journalctl -n: what just happened; when older ones exist
a last line says so (--output json: olderExist). With --since (a duration back from now, 90m,
24h, 7d, or an RFC 3339 time) or --cursor it reads forwards from there, --limit rows at a time;
when more exist a last line names the --cursor that lists the next ones (--output json:
nextCursor).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sinceMs, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			out, err := readLog(cmd, "rows", since, cursor, limit, func(ctx context.Context, c *client.Client, limit int) ([]api.AuditEntry, bool, error) {
				p, err := c.Audit.List(ctx, api.AuditListInput{TenantID: tenant, Limit: limit, Newest: true})
				return p.Items, p.OlderExist, err
			}, func(ctx context.Context, c *client.Client, limit int, cursor string) ([]api.AuditEntry, string, error) {
				p, err := c.Audit.List(ctx, api.AuditListInput{TenantID: tenant, Since: sinceMs, Limit: limit, Cursor: cursor})
				return p.Items, p.NextCursor, err
			})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, e := range out.Items {
					rows = append(rows, []string{formatTime(e.At), e.Method, e.Outcome, e.PrincipalID, orDash(e.Target), e.RequestID})
				}
				if err := printTable(w, []string{"TIME", "METHOD", "OUTCOME", "PRINCIPAL", "TARGET", "REQUEST"}, rows); err != nil {
					return err
				}
				return logNotice(w, out, "rows")
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", api.RootTenant, "tenant whose audit log to read")
	f.StringVar(&since, "since", "", "only rows since this long ago (1h, 7d) or this RFC 3339 time")
	f.IntVar(&limit, "limit", 100, "at most this many rows (the newest, without --since or --cursor: at most 1000)")
	f.StringVar(&cursor, "cursor", "", "start after this row (the cursor a previous page named)")
	return cmd
}

// parseSince reads a --since flag: a duration back from now (90m, 24h, 7d) or an RFC 3339 time,
// as Unix milliseconds; "" is 0 (no bound).
func parseSince(since string, now time.Time) (int64, error) {
	if since == "" {
		return 0, nil
	}
	if d, err := parseDuration(since); err == nil && d > 0 {
		return now.Add(-d).UnixMilli(), nil
	}
	if t, err := time.Parse(time.RFC3339, since); err == nil {
		return t.UnixMilli(), nil
	}
	return 0, usagef("--since %q: want a duration (10m, 1h, 7d) or an RFC 3339 time (2026-01-02T15:04:05Z)", since)
}

// moreNotice ends a list printed for people that is not the whole answer: when next (the
// cursor of the next page) is set, it says how many were shown (what: "rows", "events") and
// how to see more: the next page with --cursor, more at once with --limit, or narrow (what to
// narrow: "narrow --since").
func moreNotice(w io.Writer, shown int, what, next, narrow string) error {
	if next == "" {
		return nil
	}
	_, err := linef(w, "(first %d %s; more exist: --cursor %s shows the next ones, or raise --limit, or %s)\n", shown, what, next, narrow)
	return err
}
