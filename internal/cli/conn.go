package cli

import (
	"context"

	"github.com/spf13/cobra"

	pubclient "github.com/cubefleet/cubefleet/client"
	"github.com/cubefleet/cubefleet/internal/client"
)

// Global flag names (persistent on the root command, so every sub-command has them).
const (
	flagURL       = "url"
	flagTokenFile = "token-file"
	flagCAFile    = "ca-file"
	flagOutput    = "output"
)

// stdioKey is the context key under which Run stores the IO, so helpers that get only the
// command (connect) reach the environment the caller passed.
type stdioKey struct{}

// stdioOf returns the IO Run was given (with a non-nil Getenv).
func stdioOf(cmd *cobra.Command) IO {
	stdio, _ := cmd.Context().Value(stdioKey{}).(IO)
	if stdio.Getenv == nil {
		stdio.Getenv = func(string) string { return "" }
	}
	return stdio
}

func addGlobalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.String(flagURL, "", "control plane URL, or several replicas' comma-separated (waits move to the next when one is gone) (default: $"+client.EnvURL+", url in the config file, "+client.DefaultURL+")")
	f.String(flagTokenFile, "", "file holding the API key, mode 0600 (default: $"+client.EnvToken+", token_file in the config file, "+client.DefaultTokenFile+")")
	f.String(flagCAFile, "", "PEM file of CA certificates to trust for an https:// URL, besides the system's (default: $"+client.EnvCAFile+", ca_file in the config file)")
	f.StringP(flagOutput, "o", outputTable, "output format: table or json")
}

// connect returns an API client for cmd (and refuses a bad --output first, exit 2): URL from --url > CUBEFLEET_URL > url in
// $XDG_CONFIG_HOME/cubefleet/config.json > http://127.0.0.1:3010; key from --token-file >
// CUBEFLEET_TOKEN > token_file in the config file > ./.cubefleet/admin.token; CA bundle for
// https:// from --ca-file > CUBEFLEET_CA_FILE > ca_file in the config file. A token file that
// is not a private file (regular, owned by the caller, mode 0600) is refused with an error
// naming the problem; the error never contains the key.
func connect(cmd *cobra.Command) (*client.Client, error) {
	if _, err := outputFormat(cmd); err != nil {
		return nil, err // a bad --output is a usage error before anything is called
	}
	url, _ := cmd.Flags().GetString(flagURL)
	tokenFile, _ := cmd.Flags().GetString(flagTokenFile)
	caFile, _ := cmd.Flags().GetString(flagCAFile)
	return client.Connect(client.Options{URL: url, TokenFile: tokenFile, CAFile: caFile, Getenv: stdioOf(cmd).Getenv}, nil)
}

// call connects (see connect) and runs API method with input in, decoding the result into out.
func call(cmd *cobra.Command, method string, in, out any) error {
	c, err := connect(cmd)
	if err != nil {
		return err
	}
	return c.Call(cmd.Context(), method, in, out)
}

// typed connects (see connect) and returns the typed API client; its errors carry the CLI's
// words (internal/client).
func typed(cmd *cobra.Command) (*pubclient.Client, error) {
	c, err := connect(cmd)
	if err != nil {
		return nil, err
	}
	return c.API(), nil
}

// page is what listPages returns, and what a paginated list command prints with --output
// json: the items (never nil) and, when more exist, the cursor of the next page (the API's
// nextCursor; pass it as --cursor).
type page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// listPages calls a paginated list method through fetch (one page of at most limit items from
// cursor) from cursor ("" for the start) until it has limit items or the last page.
func listPages[T any](cmd *cobra.Command, fetch func(ctx context.Context, c *pubclient.Client, limit int, cursor string) ([]T, string, error), cursor string, limit int) (page[T], error) {
	c, err := typed(cmd)
	if err != nil {
		return page[T]{}, err
	}
	out := page[T]{Items: []T{}}
	for len(out.Items) < limit {
		items, next, err := fetch(cmd.Context(), c, min(limit-len(out.Items), 1000), cursor)
		if err != nil {
			return page[T]{}, err
		}
		out.Items = append(out.Items, items...)
		out.NextCursor = next
		if next == "" {
			break
		}
		cursor = next
	}
	return out, nil
}
