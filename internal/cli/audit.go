package cli

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/iam"
)

func newAuditCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("audit", "Read the audit log", "")
	cmd.AddCommand(newAuditListCmd())
	return cmd
}

func newAuditListCmd() *cobra.Command {
	var tenant, since string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--tenant T] [--since 1h|RFC3339] [--limit N]",
		Short: "List a tenant's audit rows, oldest first",
		Long: `List the audit rows of --tenant (default root), oldest first: every state-changing call and
every refused one. --since takes a duration back from now (90m, 24h, 7d) or an RFC 3339 time;
--limit caps the rows printed (default 100).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sinceMs int64
			if since != "" {
				if d, err := parseDuration(since); err == nil && d > 0 {
					sinceMs = time.Now().Add(-d).UnixMilli()
				} else if t, err := time.Parse(time.RFC3339, since); err == nil {
					sinceMs = t.UnixMilli()
				} else {
					return usagef("--since %q: want a duration (1h, 7d) or an RFC 3339 time (2026-01-02T15:04:05Z)", since)
				}
			}
			if limit < 1 {
				return usagef("--limit must be at least 1")
			}
			items, err := listPages[audit.Entry](cmd, "audit.list", map[string]any{"tenantId": tenant, "since": sinceMs}, limit)
			if err != nil {
				return err
			}
			out := struct {
				Items []audit.Entry `json:"items"`
			}{Items: items}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(items))
				for _, e := range items {
					rows = append(rows, []string{formatTime(e.At), e.Method, e.Outcome, e.PrincipalID, orDash(e.Target), e.RequestID})
				}
				if err := printTable(w, []string{"TIME", "METHOD", "OUTCOME", "PRINCIPAL", "TARGET", "REQUEST"}, rows); err != nil {
					return err
				}
				if len(items) == limit {
					_, err := linef(w, "(first %d rows; raise --limit or narrow --since for more)\n", limit)
					return err
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", iam.RootTenant, "tenant whose audit log to read")
	f.StringVar(&since, "since", "", "only rows since this long ago (1h, 7d) or this RFC 3339 time")
	f.IntVar(&limit, "limit", 100, "at most this many rows")
	return cmd
}
