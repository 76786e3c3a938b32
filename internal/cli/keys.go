package cli

import (
	"fmt"
	"github.com/cubefleet/cubefleet/api"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newKeysCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("keys", "Create, list and revoke API keys; print the permission catalogue", `API keys belong to service accounts. A key holds grants, each a permission on a scope
(PERMISSION@SCOPE, e.g. compute:fleet:admin@compute-fleet/global or
compute:pools:create@tenant/root); "cubefleet keys permissions" lists them. You can grant only
what you hold. Keys are stored hashed and shown once, at creation.`)
	cmd.AddCommand(newKeysCreateCmd(stdio), newKeysListCmd(), newKeysRevokeCmd(), newKeysPermissionsCmd())
	return cmd
}

func newKeysCreateCmd(stdio IO) *cobra.Command {
	var tenant, name, expires string
	var grants []string
	cmd := &cobra.Command{
		Use:   "create --tenant T --name N --grant PERMISSION@SCOPE ... [--expires 90d]",
		Short: "Create a service account with grants and print its API key once",
		Long: `Create a service account in --tenant holding the --grant permissions and print its API key
on stdout. The key is shown only this once; store it (e.g. in a file with mode 0600, or your CI's
secret store). --expires takes a duration: 90d, 12h, 30m (default: never).

A CI key that may plan and apply fleet documents holds compute:fleet:admin@compute-fleet/global
and the compute permissions of the calls its plans make, and nothing else.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ttl time.Duration
			if expires != "" {
				var err error
				if ttl, err = parseDuration(expires); err != nil || ttl <= 0 {
					return usagef("--expires %q: want a positive duration such as 90d, 12h or 30m", expires)
				}
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.IAM.Keys.Create(cmd.Context(), api.KeyCreateInput{TenantID: tenant, Name: name, Grants: grants, TTLSeconds: int64(ttl / time.Second)})
			if err != nil {
				return err
			}
			linef(stdio.Err, "warning: API key %s (%s) is shown only this once; store it now.\n", out.Key.ID, out.Key.PrincipalName)
			return render(cmd, out, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, out.Token)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant of the service account")
	f.StringVar(&name, "name", "", "service account name")
	f.StringArrayVar(&grants, "grant", nil, "a grant PERMISSION@SCOPE (repeat for more)")
	f.StringVar(&expires, "expires", "", "lifetime, e.g. 90d, 12h (default: never expires)")
	cmd.MarkFlagRequired("tenant")
	cmd.MarkFlagRequired("name")
	cmd.MarkFlagRequired("grant")
	return cmd
}

func newKeysListCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "list --tenant T",
		Short: "List a tenant's API keys (never the keys themselves)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.IAM.Keys.List(cmd.Context(), api.TenantInput{TenantID: tenant})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, k := range out.Items {
					gs := make([]string, len(k.Grants))
					for i, g := range k.Grants {
						gs[i] = g.String()
					}
					state := "active"
					if k.RevokedAt != nil {
						state = "revoked"
					} else if k.ExpiresAt != nil && *k.ExpiresAt <= time.Now().UnixMilli() {
						state = "expired"
					}
					rows = append(rows, []string{k.ID, k.PrincipalName, k.Prefix + "...", state, formatTime(k.CreatedAt), formatTimePtr(k.ExpiresAt), grantSummary(gs)})
				}
				return printTable(w, []string{"KEY", "NAME", "PREFIX", "STATE", "CREATED", "EXPIRES", "GRANTS"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose keys to list")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

// grantSummary shows up to three grants and the count of the rest.
func grantSummary(gs []string) string {
	if len(gs) <= 3 {
		return orDash(strings.Join(gs, ", "))
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(gs[:3], ", "), len(gs)-3)
}

func newKeysRevokeCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "revoke KEY_ID --tenant T",
		Short: "Revoke an API key",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.IAM.Keys.Revoke(cmd.Context(), api.KeyRevokeInput{TenantID: tenant, ID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				_, err := linef(w, "Revoked key %s.\n", out.ID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the key belongs to")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func newKeysPermissionsCmd() *cobra.Command {
	tenant := api.RootTenant
	cmd := &cobra.Command{
		Use:   "permissions [--tenant T]",
		Short: "Print the permission catalogue: every permission, its scope and the methods that decide it",
		Long: `Print every permission a key of --tenant (default root) can be granted, the scope it is
granted on (tenant/<id> means the tenant's own id, or tenant/* for every tenant from the root
tenant), and the API methods that decide it. Grant one with --grant PERMISSION@SCOPE.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.IAM.Permissions.List(cmd.Context(), api.TenantInput{TenantID: tenant})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, p := range out.Items {
					heldBy := "any tenant"
					if p.RootOnly {
						heldBy = "root only"
					}
					rows = append(rows, []string{p.Permission, p.Scope, heldBy, strings.Join(p.Methods, ", ")})
				}
				return printTable(w, []string{"PERMISSION", "SCOPE", "HELD BY", "METHODS"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", api.RootTenant, "tenant whose grantable permissions to list")
	return cmd
}
