package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	pubclient "github.com/cubefleet/cubefleet/client"
)

// logPage is what a list of an append-only log (nodes events, audit list) prints with
// --output json: the items, oldest first (never nil), and either the cursor of the next page
// (read forwards with --since or --cursor) or whether older entries exist (the newest ones).
type logPage[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
	OlderExist bool   `json:"olderExist,omitempty"`
}

// readLog reads a log the way nodes events and audit list both do (docs/cli.md): without since
// and cursor, the newest limit entries through tail, like journalctl -n (limit at most 1000);
// with either, forwards from there through fetch, limit entries in pages (listPages). what
// names the entries in a usage error ("events", "rows").
func readLog[T any](cmd *cobra.Command, what, since, cursor string, limit int,
	tail func(ctx context.Context, c *pubclient.Client, limit int) ([]T, bool, error),
	fetch func(ctx context.Context, c *pubclient.Client, limit int, cursor string) ([]T, string, error),
) (logPage[T], error) {
	if limit < 1 {
		return logPage[T]{}, usagef("--limit must be at least 1")
	}
	if since != "" || cursor != "" {
		p, err := listPages(cmd, fetch, cursor, limit)
		return logPage[T]{Items: p.Items, NextCursor: p.NextCursor}, err
	}
	if limit > 1000 {
		return logPage[T]{}, usagef("--limit is at most 1000 for the newest %s; read older ones with --since", what)
	}
	c, err := typed(cmd)
	if err != nil {
		return logPage[T]{}, err
	}
	items, older, err := tail(cmd.Context(), c, limit)
	if err != nil {
		return logPage[T]{}, err
	}
	if items == nil {
		items = []T{}
	}
	return logPage[T]{Items: items, OlderExist: older}, nil
}

// logNotice ends a log's table that is not the whole answer (what: "events", "rows"): the
// newest ones with older ones left out, or a page with more after it (moreNotice).
func logNotice[T any](w io.Writer, p logPage[T], what string) error {
	if p.OlderExist {
		_, err := linef(w, "(the newest %d %s; older ones exist: raise --limit, or read from a time with --since 2h)\n", len(p.Items), what)
		return err
	}
	return moreNotice(w, len(p.Items), what, p.NextCursor, "narrow --since")
}
