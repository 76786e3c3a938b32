// Package cli builds the cubefleet command tree (cobra): flag parsing, output as tables or JSON,
// and exit codes. It holds no domain logic; commands call the control plane's API or the domain
// packages and print what they return.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
)

// Exit codes (../shared/DESIGN.md, "Ports and defaults").
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // a failure with a code, printed as `error: CODE: message`
	ExitUsage   = 2 // a usage error
)

// IO is what a command reads and writes; tests pass buffers, main passes the process's files.
type IO struct {
	In     io.Reader
	Out    io.Writer
	Err    io.Writer
	Getenv func(string) string
}

// usageError marks an error as a usage error (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// Run executes the command line args (without the program name) and returns the exit code.
func Run(ctx context.Context, args []string, stdio IO) int {
	if stdio.Getenv == nil {
		stdio.Getenv = os.Getenv
	}
	root := newRootCmd(stdio)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var u usageError
	if errors.As(err, &u) || isCobraUsage(err) {
		fmt.Fprintf(stdio.Err, "error: %v\n", err)
		return ExitUsage
	}
	var e *cubefleet.Error
	if errors.As(err, &e) {
		fmt.Fprintf(stdio.Err, "error: %s: %s\n", e.Code, e.Message)
		for _, fe := range fieldErrors(e) {
			fmt.Fprintf(stdio.Err, "  %s: %s\n", fe.Path, fe.Message)
		}
		return ExitFailure
	}
	fmt.Fprintf(stdio.Err, "error: %v\n", err)
	return ExitFailure
}

func newRootCmd(stdio IO) *cobra.Command {
	root := &cobra.Command{
		Use:           "cubefleet",
		Short:         "Fleet control plane for Cube sandbox hosts",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
	// Each top-level command is built by its own file's constructor.
	)
	return root
}

// isCobraUsage reports whether err is one of cobra's own usage errors (unknown command or
// sub-command); flag and argument errors are wrapped in usageError where they are made.
func isCobraUsage(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown shorthand flag") || strings.HasPrefix(err.Error(), "unknown flag")
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// noArgs is cobra.NoArgs with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return usageError{err}
	}
	return nil
}

func fieldErrors(e *cubefleet.Error) []cubefleet.FieldError {
	if e.Details == nil {
		return nil
	}
	switch v := e.Details["errors"].(type) {
	case []cubefleet.FieldError:
		if len(v) > 1 {
			return v
		}
	}
	return nil
}
