package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// Output formats of --output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// outputFormat returns cmd's --output value, "table" or "json"; anything else is a usage error.
func outputFormat(cmd *cobra.Command) (string, error) {
	f, _ := cmd.Flags().GetString(flagOutput)
	switch f {
	case "", outputTable:
		return outputTable, nil
	case outputJSON:
		return outputJSON, nil
	}
	return "", usagef("--output %q: want table or json", f)
}

// render prints v on cmd's stdout: as indented JSON with --output json, otherwise through
// human, which writes the table (or text) for people.
func render(cmd *cobra.Command, v any, human func(w io.Writer) error) error {
	format, err := outputFormat(cmd)
	if err != nil {
		return err
	}
	if format == outputJSON {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	return human(cmd.OutOrStdout())
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printTable writes a table for people: header in capitals, columns aligned with two spaces.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// formatTime renders Unix milliseconds as RFC 3339 in UTC, "-" for 0.
func formatTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// formatTimePtr is formatTime for optional times ("-" for nil).
func formatTimePtr(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return formatTime(*ms)
}

// orDash returns s, or "-" when it is empty (tables never have empty cells).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
