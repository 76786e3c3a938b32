package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newAPICmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "api METHOD [JSON|-]",
		Short: "Call any API method with a JSON input and print its JSON result",
		Long: `Call API method METHOD (e.g. compute.pools.list) with the JSON object given as the second
argument, read from stdin with "-", or {} when absent, and print the result as JSON. The server
lists its methods at /api/v1/openapi.json.`,
		Example: `  cubefleet api compute.pools.list '{"tenantId":"root"}'
  cubefleet api fleet.plan - < plan-input.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("api takes METHOD and an optional JSON input (or - for stdin)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			input := []byte("{}")
			if len(args) == 2 {
				input = []byte(args[1])
				if args[1] == "-" {
					var err error
					if input, err = io.ReadAll(cmd.InOrStdin()); err != nil {
						return fmt.Errorf("read the input from stdin: %w", err)
					}
				}
			}
			input = bytes.TrimSpace(input)
			if len(input) == 0 || input[0] != '{' || !json.Valid(input) {
				return usagef("the input must be one JSON object")
			}
			var out json.RawMessage
			if err := call(cmd, args[0], json.RawMessage(input), &out); err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, out, "", "  "); err != nil {
				return fmt.Errorf("the server's result is not JSON: %w", err)
			}
			buf.WriteByte('\n')
			// The result is JSON either way; --output json only makes a failure JSON too.
			return render(cmd, out, func(w io.Writer) error {
				_, err := w.Write(buf.Bytes())
				return err
			})
		},
	}
}
