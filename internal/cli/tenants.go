package cli

import (
	"github.com/cubefleet/cubefleet/api"
	"io"

	"github.com/spf13/cobra"
)

func newTenantsCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("tenants", "Create and list tenants (root-tenant administrators)", `Create and list tenants. The root tenant always exists; "cubefleet server --dev" also seeds
the example tenants acme and globex (dev only).`)
	cmd.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			t, err := c.IAM.Tenants.Create(cmd.Context(), api.TenantCreateInput{ID: args[0]})
			if err != nil {
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
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.IAM.Tenants.List(cmd.Context())
			if err != nil {
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
