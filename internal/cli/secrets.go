package cli

import (
	"fmt"
	"github.com/cubefleet/cubefleet/api"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/internal/privatefile"
)

func newSecretsCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("secrets", "Store, list and delete a tenant's secrets (values are never shown)", `A tenant's secrets are sealed at rest with the control plane's key file and never returned by
any command or API. Fleet documents refer to them as secret://NAME.`)
	cmd.AddCommand(newSecretsValueCmd("create"), newSecretsValueCmd("update"), newSecretsListCmd(), newSecretsDeleteCmd())
	return cmd
}

// newSecretsValueCmd builds `secrets create` (store a new secret) or `secrets update` (replace
// a secret's value: rotation).
func newSecretsValueCmd(verb string) *cobra.Command {
	var tenant, fromFile string
	short, long, done := "Store a secret value read from a private file or from stdin",
		"Store a secret: its value comes from --from-file (a regular file owned by you with mode 0600)\n"+
			"or, without it, from stdin. One trailing newline is dropped. The value is never printed.",
		"Stored secret %s (%s) in tenant %s; refer to it as secret://%s.\n"
	if verb == "update" {
		short, long, done = "Replace a secret's value (rotation), read from a private file or from stdin",
			"Replace a secret's value: objects that refer to it keep their reference and get the new value\n"+
				"where it is used. The value comes from --from-file (mode 0600) or stdin, and is never printed.",
			"Replaced the value of secret %s (%s) in tenant %s (secret://%s).\n"
	}
	cmd := &cobra.Command{
		Use:   verb + " NAME --tenant T [--from-file F]",
		Short: short,
		Long:  long,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var value []byte
			var err error
			if fromFile != "" {
				if value, err = privatefile.Read(fromFile); err != nil {
					return fmt.Errorf("--from-file: %w", err)
				}
			} else {
				if value, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), api.MaxSecretValueBytes+2)); err != nil {
					return fmt.Errorf("read the value from stdin: %w", err)
				}
			}
			v := strings.TrimSuffix(strings.TrimSuffix(string(value), "\n"), "\r")
			if v == "" {
				return usagef("the secret value is empty: pipe it on stdin or name a non-empty --from-file")
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			write := c.Secrets.Create
			if verb == "update" {
				write = c.Secrets.Update
			}
			s, err := write(cmd.Context(), api.SecretCreateInput{TenantID: tenant, Name: args[0], Value: v})
			if err != nil {
				return err
			}
			return render(cmd, s, func(w io.Writer) error {
				_, err := linef(w, done, s.Name, s.ID, s.TenantID, s.Name)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the secret belongs to")
	cmd.Flags().StringVar(&fromFile, "from-file", "", "read the value from this private file (mode 0600) instead of stdin")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func newSecretsListCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "list --tenant T",
		Short: "List a tenant's secrets (names only)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Secrets.List(cmd.Context(), api.TenantInput{TenantID: tenant})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, s := range out.Items {
					rows = append(rows, []string{s.Name, s.ID, s.CreatedBy, formatTime(s.CreatedAt)})
				}
				return printTable(w, []string{"NAME", "ID", "CREATED BY", "CREATED"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose secrets to list")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func newSecretsDeleteCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "delete NAME --tenant T",
		Short: "Delete a secret (by name or id)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			s, err := c.Secrets.Delete(cmd.Context(), api.SecretDeleteInput{TenantID: tenant, Name: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, s, func(w io.Writer) error {
				_, err := linef(w, "Deleted secret %s (%s).\n", s.Name, s.ID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the secret belongs to")
	cmd.MarkFlagRequired("tenant")
	return cmd
}
