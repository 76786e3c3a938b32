package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/agent/envfile"
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

// render prints v on cmd's stdout: as indented JSON with --output json (through emitJSON),
// otherwise through human, which writes the table (or text) for people.
func render(cmd *cobra.Command, v any, human func(w io.Writer) error) error {
	format, err := outputFormat(cmd)
	if err != nil {
		return err
	}
	if format == outputJSON {
		return emitJSON(cmd, v)
	}
	return human(cmd.OutOrStdout())
}

// The error codes of --output json that are not API codes: a usage error (exit 2), and a
// failure without a code (an unreachable server, a key file refused, an interruption).
const (
	codeUsage = "USAGE"
	codeError = "ERROR"
)

// errorJSON is the "error" member --output json prints when a command fails.
type errorJSON struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// jsonResult is the --output json result of the command Run runs: emitJSON keeps it, and Run
// prints it once the command has ended, with the error added when it failed, so that stdout
// holds exactly one JSON value.
type jsonResult struct {
	v   any
	set bool
}

// jsonResultKey is the context key of Run's *jsonResult.
type jsonResultKey struct{}

// emitJSON makes v the command's --output json result: Run prints it when the command ends
// (with an "error" member when the command fails). Outside Run it is printed at once.
func emitJSON(cmd *cobra.Command, v any) error {
	r, ok := cmd.Context().Value(jsonResultKey{}).(*jsonResult)
	if !ok {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	if r.set { // a command prints one result; should one print two, the first goes out as it is
		if err := writeJSON(cmd.OutOrStdout(), r.v); err != nil {
			return err
		}
	}
	r.v, r.set = v, true
	return nil
}

// withError is what --output json prints for a command that failed with e: {"error": e}, or
// the result it had (r) with an "error" member added; a result that is not a JSON object (or
// already has an "error" member) becomes {"result": ..., "error": e}.
func withError(r *jsonResult, e errorJSON) any {
	type wrapped struct {
		Result any       `json:"result,omitempty"`
		Error  errorJSON `json:"error"`
	}
	if !r.set {
		return wrapped{Error: e}
	}
	b, err := json.Marshal(r.v)
	var fields map[string]json.RawMessage
	if err != nil || json.Unmarshal(b, &fields) != nil || fields == nil || fields["error"] != nil {
		return wrapped{Result: r.v, Error: e}
	}
	eb, err := json.Marshal(e)
	if err != nil {
		return wrapped{Result: r.v, Error: e}
	}
	b = bytes.TrimSuffix(bytes.TrimSpace(b), []byte("}"))
	if len(fields) > 0 {
		b = append(b, ',')
	}
	b = append(append(append(b, `"error":`...), eb...), '}')
	return json.RawMessage(b)
}

// jsonRequested reports whether the command line asked for --output json: the flag as cmd
// parsed it, or, when parsing stopped before it (an unknown flag), as args spell it (-o json,
// -ojson, -o=json, --output json, --output=json; the last one counts; none after --).
func jsonRequested(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup(flagOutput); f != nil && f.Changed {
			return f.Value.String() == outputJSON
		}
	}
	value := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return value == outputJSON
		case a == "-o" || a == "--"+flagOutput:
			if i+1 < len(args) {
				value = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--"+flagOutput+"="):
			value = strings.TrimPrefix(a, "--"+flagOutput+"=")
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "--"):
			value = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		}
	}
	return value == outputJSON
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // JSON for scripts and people, not HTML: <pool> stays <pool>
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// printTable writes a table for people: header in capitals, columns aligned with two spaces.
// Every cell goes through safeText, so a value cannot add a line, a column or an escape.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(safeCells(header), "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(safeCells(r), "\t"))
	}
	return tw.Flush()
}

func safeCells(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = safeText(c)
	}
	return out
}

// printFields writes "key: value" lines for people, the values aligned after the longest key
// (at least width characters including the colon). Keys and values go through safeText.
func printFields(w io.Writer, width int, fields [][2]string) error {
	for _, f := range fields {
		if _, err := fmt.Fprintf(w, "%-*s %s\n", width, safeText(f[0])+":", safeText(f[1])); err != nil {
			return err
		}
	}
	return nil
}

// linef is fmt.Fprintf for text meant for people: every argument of a string kind, and every
// error, goes through safeText first (the format itself is trusted). Use it for every line a
// command prints that holds a value from the server, a node, a document or the command line.
func linef(w io.Writer, format string, args ...any) (int, error) {
	for i, a := range args {
		switch v := a.(type) {
		case nil:
		case error:
			args[i] = safeText(v.Error())
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				args[i] = safeText(rv.String())
			}
		}
	}
	return fmt.Fprintf(w, format, args...)
}

// safeText renders s for a terminal: every character that could move the cursor, change
// colours, start a line or reorder text is written as a visible escape instead. That is the C0
// controls and DEL (\n, \r, \t, else \x1b), the C1 controls (\u009b), the Unicode bidi
// controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069, as \u202e), the zero-width
// characters (U+200B-U+200D, U+2060, U+FEFF), the line and paragraph separators (U+2028,
// U+2029), and bytes that are not UTF-8 (\xff). Everything else,
// backslashes included, is kept. Every table cell, "key: value" line and message of the CLI's
// human output goes through it; JSON output does not need it (the encoder escapes).
func safeText(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !unsafeRune(r, size):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// safeLines is safeText for a message made on this side that may hold several lines (an
// error listing problems one per line): each line is escaped, the line breaks are kept.
func safeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = safeText(l)
	}
	return strings.Join(lines, "\n")
}

// unsafeRune reports whether r (decoded from size bytes) is one safeText escapes.
func unsafeRune(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size <= 1: // not UTF-8
		return true
	case r < 0x20 || r == 0x7f: // C0, DEL
		return true
	case r >= 0x80 && r <= 0x9f: // C1
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f: // bidi marks
		return true
	case r >= 0x200b && r <= 0x200d || r == 0x2060 || r == 0xfeff: // zero-width: hide text or make look-alikes
		return true
	case r == 0x2028 || r == 0x2029: // line and paragraph separators
		return true
	case r >= 0x202a && r <= 0x202e: // bidi embeddings and overrides
		return true
	case r >= 0x2066 && r <= 0x2069: // bidi isolates
		return true
	}
	return false
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

// shellLine joins argv as one POSIX shell command line, each argument one word (envfile.Quote):
// what a person would type to run it, "" for none.
func shellLine(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = envfile.Quote(a)
	}
	return strings.Join(words, " ")
}
