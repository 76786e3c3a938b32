package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

func newNodesJoinTokenCmd(stdio IO) *cobra.Command {
	cmd := groupCmd("join-token", "Make, list and revoke join tokens for cubefleet agent", "")
	cmd.AddCommand(newNodesJoinTokenCreateCmd(stdio), newNodesJoinTokenListCmd(), newNodesJoinTokenRevokeCmd())
	return cmd
}

func newNodesJoinTokenListCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list [--all]",
		Short: "List join tokens: id, prefix, pool, state, uses left, address, expiry (never the token)",
		Long: `List the join tokens, oldest first: id, the token's first characters (PREFIX, to recognise
it), pool, state (usable, used, expired, revoked), uses left of the uses it allowed, the
address it is bound to ("any" for --any-ip, "first use" while unbound), when it expires and who
made it. Without --all only usable tokens are listed. The token itself is never shown again.
--output json prints the API's answer.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Nodes.JoinTokens.List(cmd.Context(), api.JoinTokenListInput{All: all})
			if err != nil {
				return err
			}
			if out.Items == nil {
				out.Items = []api.JoinToken{}
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, t := range out.Items {
					rows = append(rows, []string{t.ID, t.Prefix + "...", poolName(t), string(t.State), fmt.Sprintf("%d/%d", t.UsesLeft, t.Uses),
						joinTokenAddr(t), formatTime(t.ExpiresAt), t.CreatedBy})
				}
				return printTable(w, []string{"ID", "PREFIX", "POOL", "STATE", "USES LEFT", "IP", "EXPIRES", "CREATED BY"}, rows)
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also list used, expired and revoked tokens")
	return cmd
}

// joinTokenAddr is where a token is accepted from: its address, "any", or "first use".
func joinTokenAddr(t api.JoinToken) string {
	switch {
	case t.AnyIP:
		return "any"
	case t.IP != "":
		return t.IP
	}
	return "first use"
}

func newNodesJoinTokenRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a join token: no node can join with it from then on (idempotent)",
		Long: `Revoke a join token by its id (jtk_..., as join-token list shows it): every control plane
replica refuses it from then on. Revoking a revoked token changes nothing. Nodes that already
joined with it keep their own credentials (delete them to remove them).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Nodes.JoinTokens.Revoke(cmd.Context(), api.JoinTokenRef{ID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Revoked join token %s (%s..., pool %s).\n", out.JoinToken.ID, out.JoinToken.Prefix, poolName(out.JoinToken))
				return err
			})
		},
	}
}

func newNodesJoinTokenCreateCmd(stdio IO) *cobra.Command {
	var pool, ip string
	var uses int
	var ttl time.Duration
	var anyIP bool
	cmd := &cobra.Command{
		Use:   "create --pool P [--uses 1] [--ttl 1h] [--ip A.B.C.D | --any-ip]",
		Short: "Create a join token and print it once",
		Long: `Create a join token for "cubefleet agent" and print it on stdout, shown only this once. The
node that registers with it joins --pool (a pool id or fleet name) and receives its own node
credential. The token allows --uses registrations (default 1, at most 10000), expires after
--ttl (1s to 168h, default 1h), and is accepted only from --ip and registers only that address
(the node's node_id and host_ip); without --ip it binds itself to the address of its first
successful registration, unless --any-ip. --ip is a node's address: not 0.0.0.0, ::, a
multicast or the broadcast address. A join token never takes over a registered node.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if uses < 1 || uses > api.MaxJoinTokenUses {
				return usagef("--uses %d: a join token allows 1 to %d registrations", uses, api.MaxJoinTokenUses)
			}
			if ttl < time.Second || ttl > api.MaxJoinTokenTTLSeconds*time.Second {
				return usagef("--ttl %s: a join token lives 1s to 168h", ttl)
			}
			if ip != "" {
				if _, err := nodeapi.ParseJoinTokenIP(ip); err != nil {
					return usagef("--ip %v", err)
				}
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Nodes.JoinTokens.Create(cmd.Context(), api.JoinTokenCreateInput{Pool: pool, Uses: &uses, TTLSeconds: int64(ttl / time.Second), IP: ip, AnyIP: anyIP})
			if err != nil {
				return err
			}
			bound := "bound to the address of its first use"
			switch {
			case out.JoinToken.IP != "":
				bound = "accepted only from " + out.JoinToken.IP
			case out.JoinToken.AnyIP:
				bound = "accepted from any address"
			}
			fmt.Fprintf(stdio.Err, "warning: join token %s for pool %s (%d use(s), %s, expires %s) is shown only this once.\n",
				out.JoinToken.ID, poolName(out.JoinToken), out.JoinToken.Uses, bound, formatTime(out.JoinToken.ExpiresAt))
			return render(cmd, out, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, out.Token)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&pool, "pool", "", "pool the node joins (id or fleet name)")
	f.IntVar(&uses, "uses", 1, "how many registrations the token allows")
	durationVar(f, &ttl, "ttl", time.Hour, "how long the token is valid")
	f.StringVar(&ip, "ip", "", "the only address the token is accepted from")
	f.BoolVar(&anyIP, "any-ip", false, "accept the token from any address (for --uses > 1 across hosts)")
	cmd.MarkFlagRequired("pool")
	cmd.MarkFlagsMutuallyExclusive("ip", "any-ip")
	return cmd
}

func poolName(t api.JoinToken) string {
	if t.Pool != "" {
		return t.Pool
	}
	return t.PoolID
}
