package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/iam"
)

func newTenantsCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("tenants", "Create and list tenants (root-tenant administrators)", `Create and list tenants. The root tenant always exists; "cubefleet server --dev" also seeds
the example tenants acme and globex (dev only).`)
	cmd.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t iam.Tenant
			if err := call(cmd, "iam.tenants.create", map[string]any{"id": args[0]}, &t); err != nil {
				return err
			}
			return render(cmd, t, func(w io.Writer) error {
				_, err := linef(w, "Created tenant %s.\n", t.ID)
				return err
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every tenant",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Items []iam.Tenant `json:"items"`
			}
			if err := call(cmd, "iam.tenants.list", nil, &out); err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, t := range out.Items {
					rows = append(rows, []string{t.ID, formatTime(t.CreatedAt)})
				}
				return printTable(w, []string{"TENANT", "CREATED"}, rows)
			})
		},
	})
	return cmd
}
