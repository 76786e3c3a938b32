package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/api/fleettext"
	"github.com/cubefleet/cubefleet/api/nodetext"
	"github.com/cubefleet/cubefleet/client"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
)

func newFleetCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("fleet", "Fleet as code: export, plan, apply and watch the fleet document", "")
	cmd.AddCommand(newFleetExportCmd(stdio), newFleetValidateCmd(stdio), newFleetPlanCmd(stdio), newFleetApplyCmd(stdio), newFleetStatusCmd(stdio), newFleetSchemaCmd(stdio))
	return cmd
}

// validation is what `fleet validate --output json` prints for a valid document.
type validation struct {
	File    string `json:"file"`
	Valid   bool   `json:"valid"`
	Objects int    `json:"objects"` // list items, owner quota keys and offers
	// External lists the references to objects the document does not define (path and
	// message), which must exist on the server; --strict refuses the document for them.
	External []cubefleet.FieldError `json:"external,omitempty"`
}

func newFleetValidateCmd(stdio IO) *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a fleet document offline, with the control plane's own rules",
		Long: `Check a fleet document without a control plane: the same decoder and rules fleet plan and
fleet apply run on the server, so a document validate accepts is refused by them only for what
the control plane alone knows (references to objects, tenants and secrets that do not exist,
fixed fields that would change). Every problem is reported at once, as INVALID_INPUT (exit 1).
Every reference to an object the document could define but does not (a pool's site or provider
account, a flavor's pool, a template's pool or flavor) gets a warning on stderr with its path:
"not in this document: must exist on the server"; with --strict those are errors. An offer's
tenant is neither: tenants are never in a document, so fleet plan alone checks that it exists.
FILE may be - for standard input.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readDocument(stdio, args[0])
			if err != nil {
				return err
			}
			doc, err := document.Decode(data)
			if err != nil {
				return err
			}
			external := doc.External()
			if strict && len(external) > 0 {
				return cubefleet.InvalidAll(external)
			}
			for _, e := range external {
				linef(cmd.ErrOrStderr(), "warning: %s: %s\n", e.Path, e.Message)
			}
			v := validation{File: args[0], Valid: true, Objects: doc.Objects(), External: external}
			return render(cmd, v, func(w io.Writer) error {
				name := args[0]
				if name == "-" {
					name = "standard input"
				}
				_, err := linef(w, "%s is a valid fleet document: %s (%s).\n", name, documentContents(doc), cubefleet.Count(v.Objects, "object", "objects"))
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "refuse references to objects the document does not define (INVALID_INPUT) instead of warning")
	return cmd
}

// documentContents counts what a document lists: "1 site, 2 pools, 1 owner quota, 1 offer".
func documentContents(d *document.Document) string {
	quotas, offers := 0, 0
	for _, p := range d.Pools {
		quotas += len(p.OwnerQuota)
		offers += len(p.Offers)
	}
	var parts []string
	for _, c := range []struct {
		n         int
		one, many string
	}{
		{len(d.Sites), "site", "sites"}, {len(d.ProviderAccounts), "provider account", "provider accounts"},
		{len(d.Pools), "pool", "pools"}, {quotas, "owner quota", "owner quotas"}, {offers, "offer", "offers"},
		{len(d.Flavors), "flavor", "flavors"}, {len(d.SandboxTemplates), "sandbox template", "sandbox templates"},
	} {
		if c.n > 0 {
			parts = append(parts, cubefleet.Count(c.n, c.one, c.many))
		}
	}
	if len(parts) == 0 {
		return "no objects"
	}
	return strings.Join(parts, ", ")
}

func newFleetSchemaCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the fleet document",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := stdio.Out.Write(document.Schema())
			return err
		},
	}
}

func newFleetExportCmd(stdio IO) *cobra.Command {
	var tenant, out string
	cmd := &cobra.Command{
		Use:   "export --tenant T [--out FILE]",
		Short: "Export a tenant's fleet as a document (refuses to overwrite FILE)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			res, err := c.Fleet.Export(cmd.Context(), api.TenantInput{TenantID: tenant})
			if err != nil {
				return err
			}
			doc, err := json.MarshalIndent(res.Config, "", "  ")
			if err != nil {
				return err
			}
			doc = append(doc, '\n')
			for _, m := range res.Missing {
				linef(stdio.Err, "left out: %s %s (%s)\n", m.Kind, m.Name, m.Reason)
			}
			if out == "" || out == "-" {
				if wantJSON(cmd) {
					return emitJSON(cmd, res)
				}
				_, err := stdio.Out.Write(doc)
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, os.ErrExist) {
				return cubefleet.Errorf(cubefleet.CodeConflict, "%s exists; fleet export never overwrites a file: choose another --out", out)
			}
			if err != nil {
				return err
			}
			if _, err := f.Write(doc); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			linef(stdio.Err, "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose fleet to export (required)")
	cmd.Flags().StringVar(&out, "out", "", "file to write (default: standard output)")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// readDocument reads a document file ("-" is standard input) as raw JSON for the server to
// validate.
func readDocument(stdio IO, path string) (json.RawMessage, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(stdio.In, 64<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usagef("read %s: %v", path, err)
	}
	if !json.Valid(data) {
		// Let the validator report where: it gives the line, column and byte offset.
		if _, derr := document.Decode(data); derr != nil {
			return nil, derr
		}
	}
	return json.RawMessage(data), nil
}

type planFlags struct {
	tenant      string
	prune       bool
	calls       bool
	failOnDrift bool
}

func (f *planFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.tenant, "tenant", "", "tenant whose fleet the document describes (required)")
	cmd.Flags().BoolVar(&f.prune, "prune", false, "also delete (archive, for pools) objects the document leaves out")
	cmd.Flags().BoolVar(&f.calls, "calls", false, "also print the API calls the plan would make")
	cmd.MarkFlagRequired("tenant")
}

func newFleetPlanCmd(stdio IO) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan FILE --tenant T [--prune] [--calls] [--fail-on-drift]",
		Short: "Show what applying a document would change",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			pl, _, err := planDocument(cmd.Context(), c, stdio, args[0], f)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				if err := emitJSON(cmd, pl); err != nil {
					return err
				}
			} else {
				printFleetPlan(stdio.Out, pl, f.calls)
			}
			if pl.Summary.Blocked {
				return blockedPlanError(pl)
			}
			if !wantJSON(cmd) {
				printHowToApply(stdio.Out, pl, applyCommand(cmd, args[0], f, false, pl.PlanHash))
			}
			if f.failOnDrift && len(pl.Calls) > 0 {
				return cubefleet.Errorf(cubefleet.CodeFleetDrifted, "the fleet does not match %s: %s would run", args[0], cubefleet.Count(len(pl.Calls), "call", "calls"))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.failOnDrift, "fail-on-drift", false, "exit FLEET_DRIFTED (1) when any call would run")
	return cmd
}

// planDocument reads the document at path once ("-": standard input) and plans it; it returns
// the plan and the document as read, so an apply sends exactly what was planned.
func planDocument(ctx context.Context, c *client.Client, stdio IO, path string, f planFlags) (*api.FleetPlan, json.RawMessage, error) {
	doc, err := readDocument(stdio, path)
	if err != nil {
		return nil, nil, err
	}
	pl, err := c.Fleet.Plan(ctx, api.FleetInput{TenantID: f.tenant, Config: doc, Prune: f.prune})
	return &pl, doc, err
}

// blockedPlanError returns PLAN_BLOCKED for a blocked plan, else nil.
func blockedPlanError(pl *api.FleetPlan) error {
	if !pl.Summary.Blocked {
		return nil
	}
	n := 0
	for _, c := range pl.Changes {
		if c.Blocked {
			n++
		}
	}
	return cubefleet.Errorf(cubefleet.CodePlanBlocked, "%s blocked; fix the document (each blocked line says why)", cubefleet.Count(n, "change is", "changes are"))
}

// applyCommand returns the command line that applies exactly the plan with hash planHash of
// the document file: `cubefleet fleet apply FILE --tenant T`, the flags that change what is
// applied or where (--prune, --deny-delete, --url, --token-file, --ca-file, as given), and
// --plan-hash, each argument quoted for the shell.
func applyCommand(cmd *cobra.Command, file string, f planFlags, denyDelete bool, planHash string) string {
	args := []string{"cubefleet", "fleet", "apply", file, "--tenant", f.tenant}
	if f.prune {
		args = append(args, "--prune")
	}
	if denyDelete {
		args = append(args, "--deny-delete")
	}
	for _, name := range []string{flagURL, flagTokenFile, flagCAFile} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			args = append(args, "--"+name, fl.Value.String())
		}
	}
	args = append(args, "--plan-hash", planHash)
	return shellLine(args)
}

// printHowToApply ends a text plan that is not blocked with the command that applies exactly
// it; a plan without calls applies nothing, and its command only records the document as the
// applied one (the drift baseline).
func printHowToApply(w io.Writer, pl *api.FleetPlan, command string) {
	if len(pl.Calls) == 0 {
		linef(w, "\nNothing to apply. To record this document as the applied one anyway (the drift baseline):\n  %s\n", command)
		return
	}
	linef(w, "\nTo apply exactly this plan (%s):\n  %s\n", cubefleet.Count(len(pl.Calls), "call", "calls"), command)
}

// printFleetPlan prints one line per change that does something (an update followed by one
// indented `field: from -> to` line per field), then the counts (docs/plan-apply.md).
func printFleetPlan(w io.Writer, pl *api.FleetPlan, calls bool) {
	for _, c := range pl.Changes {
		var line string
		switch {
		case c.Action == api.FleetActionCreate:
			line = fmt.Sprintf("+ %s %s", c.Kind, c.Name)
		case c.Action == api.FleetActionUpdate:
			line = fmt.Sprintf("~ %s %s", c.Kind, c.Name)
			if len(c.Fields) > 0 {
				line += " (" + strings.Join(c.Fields, ", ") + ")"
			}
		case c.Action == api.FleetActionDelete:
			line = fmt.Sprintf("- %s %s", c.Kind, c.Name)
		case c.Blocked:
			line = fmt.Sprintf("= %s %s", c.Kind, c.Name)
		default:
			continue
		}
		if c.Blocked {
			line = "! " + line[2:] + ": blocked: " + c.Note
		} else if c.Note != "" {
			line += "  # " + c.Note
		}
		linef(w, "%s\n", line)
		for _, d := range c.Diffs {
			linef(w, "    %s: %s -> %s\n", d.Field, fleettext.ShortValue(d.From), fleettext.ShortValue(d.To))
		}
	}
	s := pl.Summary
	blocked := ""
	if s.BlockedChanges > 0 {
		blocked = fmt.Sprintf(", %d blocked", s.BlockedChanges)
	}
	linef(w, "%d to create, %d to update, %d to delete, %d unchanged%s.\n", s.Create, s.Update, s.Delete, s.Unchanged, blocked)
	for _, c := range pl.Changes {
		if c.Action == api.FleetActionUnchanged && c.Note != "" && !c.Blocked {
			linef(w, "# %s %s: %s\n", c.Kind, c.Name, c.Note)
		}
	}
	if n := len(pl.NotInDocument); n > 0 {
		them := "them"
		if n == 1 {
			them = "it"
		}
		linef(w, "%s not in the document (kept; --prune would delete %s)\n", cubefleet.Count(n, "object", "objects"), them)
		if calls {
			for _, o := range pl.NotInDocument {
				linef(w, "  %s %s\n", o.Kind, o.Name)
			}
		}
	}
	if calls {
		for i, c := range pl.Calls {
			var in bytes.Buffer
			enc := json.NewEncoder(&in)
			enc.SetEscapeHTML(false)
			enc.Encode(c.Input) // inputs are plain data decoded from JSON
			linef(w, "%3d %s %s\n", i+1, c.Method, strings.TrimSuffix(in.String(), "\n"))
		}
	}
}

// notApplied is what fleet apply prints with --output json when it applied nothing (a refused,
// unconfirmed or empty plan): fleet.apply's answer with applied 0.
type notApplied struct {
	Applied int            `json:"applied"`
	Plan    *api.FleetPlan `json:"plan"`
}

func newFleetApplyCmd(stdio IO) *cobra.Command {
	var f planFlags
	var yes, denyDelete bool
	var planHash string
	cmd := &cobra.Command{
		Use:   "apply FILE --tenant T [--prune] [--yes | --plan-hash H] [--deny-delete]",
		Short: "Apply a document in one transaction",
		Long: "Plans the document and prints the plan. Without --yes it stops there and prints the --plan-hash\n" +
			"that applies exactly that plan later. With --yes it applies what it printed; with --plan-hash it\n" +
			"applies a plan reviewed earlier. Either fails CONFIG_DRIFT if the fleet moved in between.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if yes && planHash != "" {
				return usagef("use --yes or --plan-hash, not both")
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			pl, doc, err := planDocument(cmd.Context(), c, stdio, args[0], f)
			if err != nil {
				return err
			}
			human := !wantJSON(cmd)
			if human {
				printFleetPlan(stdio.Out, pl, f.calls)
			}
			refusal := blockedPlanError(pl)
			if !pl.Summary.Blocked && denyDelete {
				refusal = cubefleet.DenyDeleteRefusal(pl.Summary.Delete)
			}
			if refusal != nil {
				if !human {
					emitJSON(cmd, notApplied{Plan: pl})
				}
				return refusal
			}
			if !yes && planHash == "" {
				if human {
					printHowToApply(stdio.Out, pl, applyCommand(cmd, args[0], f, denyDelete, pl.PlanHash))
					return nil
				}
				return emitJSON(cmd, notApplied{Plan: pl})
			}
			if yes && len(pl.Calls) == 0 {
				if human {
					fmt.Fprintln(stdio.Out, "Nothing to apply.")
					return nil
				}
				return emitJSON(cmd, notApplied{Plan: pl})
			}
			hash := planHash
			if yes {
				hash = pl.PlanHash
			}
			res, err := c.Fleet.Apply(cmd.Context(), api.FleetInput{TenantID: f.tenant, Config: doc, Prune: f.prune, PlanHash: hash, DenyDelete: denyDelete})
			if e := (*cubefleet.Error)(nil); err != nil && !errors.As(err, &e) {
				return fmt.Errorf("the apply's outcome is unknown (%w): run `cubefleet fleet plan %s --tenant %s` to see whether it landed", err, args[0], f.tenant)
			}
			if err != nil {
				return err
			}
			if !human {
				return emitJSON(cmd, res)
			}
			linef(stdio.Out, "Applied %s (plan %s).\n", cubefleet.Count(res.Applied, "call", "calls"), res.Plan.PlanHash)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "apply the plan just printed without asking")
	cmd.Flags().StringVar(&planHash, "plan-hash", "", "apply only if the plan still has this hash (from an earlier plan)")
	cmd.Flags().BoolVar(&denyDelete, "deny-delete", false, "refuse a plan that deletes or archives anything")
	return cmd
}

func newFleetStatusCmd(stdio IO) *cobra.Command {
	var tenant string
	var failOnDrift, check bool
	cmd := &cobra.Command{
		Use:   "status --tenant T [--check] [--fail-on-drift]",
		Short: "Show the last applied document and the drift found since",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			st, err := c.Fleet.Status(cmd.Context(), api.FleetStatusInput{TenantID: tenant, Check: check})
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				if err := emitJSON(cmd, st); err != nil {
					return err
				}
			} else {
				printStatus(stdio.Out, &st, check)
			}
			if failOnDrift && st.Drift != nil {
				return cubefleet.Errorf(cubefleet.CodeFleetDrifted, "tenant %s has drifted from its applied document", tenant)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant (required)")
	cmd.Flags().BoolVar(&failOnDrift, "fail-on-drift", false, "exit FLEET_DRIFTED (1) while drift is recorded")
	cmd.Flags().BoolVar(&check, "check", false, "check for drift now instead of showing the reconciler's last check")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// printStatus prints who applied the tenant's document and when, when it was last checked (and
// how long ago, by the server's clock; checked says this command ran the check), the drift
// ignore rules in force, and the recorded drift: its counts, then its changes grouped by kind
// in the plan notation (fleettext.ChangeLine, as the console shows them).
func printStatus(w io.Writer, st *api.FleetStatus, checked bool) {
	if st.Applied == nil {
		linef(w, "Tenant %s has never applied a fleet document.\n", st.TenantID)
		return
	}
	a := st.Applied
	linef(w, "Tenant:     %s\n", st.TenantID)
	linef(w, "Applied:    %s by %s (plan %s, prune %v)\n", formatTime(a.AppliedAt), a.AppliedBy, a.PlanHash, a.Prune)
	switch {
	case checked:
		linef(w, "Checked:    %s (just now, by --check)\n", formatTimePtr(a.CheckedAt))
	case a.CheckedAt != nil && st.Now != 0:
		linef(w, "Checked:    %s (%s; --check checks now)\n", formatTimePtr(a.CheckedAt), nodetext.Ago(st.Now, *a.CheckedAt))
	default:
		linef(w, "Checked:    %s (--check checks now)\n", formatTimePtr(a.CheckedAt))
	}
	if len(st.DriftIgnore) > 0 {
		linef(w, "Ignoring:   %s (drift only; plan and apply still compare them)\n", strings.Join(st.DriftIgnore, ", "))
	}
	d := st.Drift
	if d == nil {
		fmt.Fprintln(w, "Drift:      none")
		return
	}
	s := d.Summary
	blocked := ""
	if d.Blocked {
		blocked = fmt.Sprintf(", %d blocked", s.BlockedChanges)
	}
	linef(w, "Drift:      %d to create, %d to update, %d to delete%s (drift plan %s)\n", s.Create, s.Update, s.Delete, blocked, d.PlanHash)
	shown := 0
	for _, k := range fleettext.ByKind(d.Changes) {
		linef(w, "%s:\n", k.Kind)
		for _, line := range k.Lines {
			linef(w, "  %s\n", line)
			shown++
		}
	}
	if total := s.Create + s.Update + s.Delete + s.BlockedChanges; total > shown {
		linef(w, "(%d more changes; fleet plan with the applied document lists them all)\n", total-shown)
	}
}

// wantJSON reports whether --output json was given (the root's PersistentPreRunE has already
// refused other values).
func wantJSON(cmd *cobra.Command) bool {
	f, _ := outputFormat(cmd)
	return f == "json"
}
