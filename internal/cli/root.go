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
	"github.com/cubefleet/cubefleet/internal/buildinfo"
)

// Exit codes (docs/cli.md, "Exit codes").
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
	result := &jsonResult{}
	ctx = context.WithValue(ctx, stdioKey{}, stdio)
	ctx = context.WithValue(ctx, jsonResultKey{}, result)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		if result.set {
			if err := writeJSON(stdio.Out, result.v); err != nil {
				fmt.Fprintf(stdio.Err, "error: %v\n", err)
				return ExitFailure
			}
		}
		return ExitOK
	}
	var status exitStatus
	if errors.As(err, &status) { // a sandbox's command's exit status: nothing more to print
		if result.set {
			if werr := writeJSON(stdio.Out, result.v); werr != nil {
				fmt.Fprintf(stdio.Err, "error: %v\n", werr)
			}
		}
		return status.code
	}
	code, jerr := ExitFailure, errorJSON{Code: codeError, Message: err.Error()}
	var u usageError
	var e *cubefleet.Error
	switch {
	case errors.As(err, &u) || isCobraUsage(err):
		code, jerr.Code = ExitUsage, codeUsage
	case errors.As(err, &e):
		jerr = errorJSON{Code: string(e.Code), Message: e.Message, Details: e.Details}
	}
	// --output json: stdout holds one JSON object, the result with "error" added, or the error.
	if result.set || jsonRequested(cmd, args) {
		if werr := writeJSON(stdio.Out, withError(result, jerr)); werr != nil {
			fmt.Fprintf(stdio.Err, "error: %v\n", werr)
		}
	}
	switch {
	case code == ExitUsage:
		fmt.Fprintf(stdio.Err, "error: %s\n", safeLines(err.Error()))
	case e != nil:
		// The message comes from the server and may quote what a node sent: one line, escaped.
		linef(stdio.Err, "error: %s: %s\n", e.Code, e.Message)
		for _, fe := range fieldErrors(e) {
			linef(stdio.Err, "  %s: %s\n", fe.Path, fe.Message)
		}
	default:
		fmt.Fprintf(stdio.Err, "error: %s\n", safeLines(err.Error()))
	}
	return code
}

func newRootCmd(stdio IO) *cobra.Command {
	root := &cobra.Command{
		Use:           "cubefleet",
		Short:         "Fleet control plane for Cube sandbox hosts",
		Version:       buildinfo.Read().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Refuse a bad --output before any command does work (exit 2).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			_, err := outputFormat(cmd)
			return err
		},
		// Alone: the help; an unknown command: a usage error with suggestions, on one line.
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// A word that names no sub-command, followed by flags (`cubefleet sandboxs list
		// --tenant root`): the word is the mistake, whatever flags follow it.
		if cmd.HasSubCommands() && cmd.Flags().NArg() > 0 {
			return runGroup(cmd, cmd.Flags().Args())
		}
		return usageError{err}
	})
	addGlobalFlags(root)
	root.AddCommand(
		// Each top-level command is built by its own file's constructor.
		newServerCmd(stdio),
		newTenantsCmd(stdio),
		newKeysCmd(stdio),
		newAuditCmd(stdio),
		newSecretsCmd(stdio),
		newAPICmd(stdio),
		newFleetCmd(stdio),
		newIonosCmd(stdio),
		newCoordinatorCmd(stdio),
		newRoundtripCmd(),
		newScaleCmd(),
		newNodesCmd(stdio),
		newSandboxesCmd(),
		newTemplatesCmd(),
		newPoolsCmd(),
		newFlavorsCmd(),
		newSitesCmd(),
		newAgentCmd(stdio),
		newSchedulerCmd(stdio),
		newWebhooksCmd(),
		newVersionCmd(),
	)
	return root
}

// newVersionCmd builds `cubefleet version`: this binary's version, VCS revision, module and Go
// version (buildinfo.Read); `cubefleet --version` prints them on one line.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print cubefleet's version, VCS revision and Go version",
		Long: `Print the version of this binary as the Go toolchain recorded it: the module version (a tag,
or a pseudo-version such as v0.0.0-20261201164107-40ded9969514+dirty for a build from a clone),
the VCS revision and its commit time, the module and the Go version. A build without VCS
information (GOFLAGS=-buildvcs=false, a git worktree, a tree without .git) says "(devel)"
and why the revision is unknown. The control plane exports the same as the metric
cubefleet_build_info, and each agent reports its version to the node registry.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			return render(cmd, info, func(w io.Writer) error {
				for line := range strings.SplitSeq(info.Text(), "\n") {
					if _, err := linef(w, "%s\n", line); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

// isCobraUsage reports whether err is one of cobra's own usage errors (unknown command or
// sub-command); flag and argument errors are wrapped in usageError where they are made.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown shorthand flag", "unknown flag", "required flag(s)", "if any flags in the group", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// exactArgs is cobra.ExactArgs with a usage error; one that misses arguments names them, from
// the command's Use: `cubefleet fleet plan needs FILE (usage: cubefleet fleet plan FILE ...)`.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if names := argNames(cmd.Use); len(args) < n && len(names) >= n {
			return usagef("%s needs %s (usage: %s)", cmd.CommandPath(), strings.Join(names[len(args):n], " and "), cmd.UseLine())
		}
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// argNames returns the positional arguments a command's Use line names, in order: the words
// after the command's name written in capitals (FILE, NODE, ID, ID|NAME), flags' values left out.
func argNames(use string) []string {
	var names []string
	words := strings.Fields(use)
	for i, w := range words {
		if i == 0 || (i > 0 && strings.HasPrefix(words[i-1], "-")) || strings.ContainsAny(w, "[]-=") || strings.ToUpper(w) != w {
			continue
		}
		names = append(names, w)
	}
	return names
}

// noArgs is cobra.NoArgs with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return usageError{err}
	}
	return nil
}

// groupCmd returns a command that only holds sub-commands: alone it prints its help; with an
// unknown sub-command it is a usage error (cobra would print the help and exit 0).
func groupCmd(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
}

// runGroup runs a command that only holds sub-commands: alone it prints its help; otherwise
// args[0] is no sub-command of it, a usage error that names the closest ones (cobra's
// suggestions, on the same line): `unknown command "plna" for "cubefleet fleet" (did you mean
// plan?)`.
func runGroup(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	hint := ""
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only on its own path
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		hint = " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), hint)
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
