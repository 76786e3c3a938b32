package cli

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/client"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/events"
)

func newWebhooksCmd() *cobra.Command {
	cmd := groupCmd("webhooks", "Subscribe endpoints to events (fleet drift, node and sandbox lifecycle), signed the Standard Webhooks way", `A subscription POSTs each event of the types it names, in the tenant's event log, to its URL,
at least once: retried with exponential backoff and jitter for 24 hours, then dead-lettered
(webhooks deliveries --failed; webhooks redeliver queues one again). Every request carries
webhook-id (the same on every retry), webhook-timestamp and webhook-signature (HMAC-SHA256 with
the subscription's whsec_ secret, shown once). node.* events belong to the root tenant. See
docs/drift-webhooks.md for verifying a signature.`)
	cmd.AddCommand(newWebhooksCreateCmd(), newWebhooksListCmd(), newWebhooksDeleteCmd(), newWebhooksRotateCmd(), newWebhooksDeliveriesCmd(), newWebhooksRedeliverCmd())
	return cmd
}

func newWebhooksCreateCmd() *cobra.Command {
	var tenant, description string
	var types []string
	cmd := &cobra.Command{
		Use:   "create URL --tenant T --events TYPE[,TYPE...] [--description D]",
		Short: "Subscribe an endpoint; prints its signing secret once",
		Long: `Subscribe the endpoint URL (http or https; its host must resolve to public addresses unless
the server runs with --allow-private-webhook-targets) to event types, or to a family's wildcard
(sandbox.*: every sandbox event, also types added later). The endpoint is an argument because
--url names the control plane, on this command as on every other. The signing secret
(whsec_...) is printed once: store it where the receiver reads it.

` + eventTypesHelp(controlplane.EventTypes()),
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Webhooks.Create(cmd.Context(), api.WebhookCreateInput{TenantID: tenant, URL: args[0], Events: splitList(types), Description: description})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				_, err := linef(w, "Created webhook %s: %s -> %s\nSigning secret (shown only now): %s\n", out.ID, strings.Join(out.Events, ","), out.URL, out.Secret)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose events to deliver")
	cmd.Flags().StringSliceVar(&types, "events", nil, "event types, comma-separated or repeated")
	cmd.Flags().StringVar(&description, "description", "", "what the endpoint is (at most 200 characters)")
	cmd.MarkFlagRequired("tenant")
	cmd.MarkFlagRequired("events")
	return cmd
}

// eventTypesHelp lists every event type a subscription may name (types maps each to whether
// only the root tenant's log holds it) and the families' wildcards.
func eventTypesHelp(types map[string]bool) string {
	var tenant, root, wildcards []string
	rootFamily := map[string]bool{}
	for t, rootOnly := range types {
		if rootOnly {
			root = append(root, t)
		} else {
			tenant = append(tenant, t)
		}
		w := events.Wildcard(t)
		if _, seen := rootFamily[w]; !seen {
			rootFamily[w] = true
			wildcards = append(wildcards, w)
		}
		rootFamily[w] = rootFamily[w] && rootOnly
	}
	for i, w := range wildcards {
		if rootFamily[w] {
			wildcards[i] += " (root)"
		}
	}
	slices.Sort(tenant)
	slices.Sort(root)
	slices.Sort(wildcards)
	return "Event types, in every tenant's log:\n  " + strings.Join(tenant, ", ") +
		"\nin the root tenant's log only:\n  " + strings.Join(root, ", ") +
		"\nwildcards:\n  " + strings.Join(wildcards, ", ")
}

// splitList is the values of a repeatable, comma-separated flag, trimmed, without empty ones.
func splitList(values []string) []string {
	out := []string{}
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func newWebhooksListCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "list --tenant T",
		Short: "List a tenant's webhook subscriptions",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Webhooks.List(cmd.Context(), api.TenantInput{TenantID: tenant})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				rows := make([][]string, 0, len(out.Items))
				for _, s := range out.Items {
					rows = append(rows, []string{s.ID, s.URL, strings.Join(s.Events, ","), orDash(s.Description), formatTime(s.CreatedAt)})
				}
				return printTable(w, []string{"ID", "URL", "EVENTS", "DESCRIPTION", "CREATED"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose subscriptions to list")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func newWebhooksDeleteCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "delete ID --tenant T",
		Short: "Delete a subscription with its secrets and deliveries",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Webhooks.Delete(cmd.Context(), api.WebhookRef{TenantID: tenant, ID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				_, err := linef(w, "Deleted webhook %s (%s).\n", out.ID, out.URL)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the subscription belongs to")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func newWebhooksRotateCmd() *cobra.Command {
	var tenant string
	var overlap time.Duration
	cmd := &cobra.Command{
		Use:   "rotate-secret ID --tenant T [--overlap 24h|7d]",
		Short: "Give a subscription a new signing secret; the old one keeps signing for --overlap",
		Long: `Give a subscription a new signing secret, printed once. Until --overlap has passed (24h by
default, at most 168h), every delivery carries a signature under the old secret and one under
the new, so the receiver can switch to the new secret at any time in between. --overlap 0
rotates at once (a leaked secret): the old secret stops signing now, and deliveries fail
verification at the receiver until it has the new one (they are retried, nothing is lost).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if overlap < 0 || overlap > api.MaxSecretOverlapSeconds*time.Second || overlap%time.Second != 0 {
				return usagef("--overlap %s: give whole seconds from 0 (at once) to 168h (7d)", overlap)
			}
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			seconds := int64(overlap / time.Second)
			out, err := c.Webhooks.RotateSecret(cmd.Context(), api.WebhookRotateInput{TenantID: tenant, ID: args[0], OverlapSeconds: &seconds})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				if _, err := linef(w, "New signing secret of webhook %s (shown only now): %s\n", out.ID, out.Secret); err != nil {
					return err
				}
				if overlap == 0 {
					_, err := linef(w, "The previous secret no longer signs: give the receiver the new one now.\n")
					return err
				}
				_, err := linef(w, "The previous secret keeps signing until %s.\n", formatTime(out.PreviousSecretExpiresAt))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the subscription belongs to")
	durationVar(cmd.Flags(), &overlap, "overlap", api.DefaultSecretOverlapSeconds*time.Second, "how long the previous secret keeps signing: 0 (at once) to 7d, e.g. 24h or 2d")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func newWebhooksDeliveriesCmd() *cobra.Command {
	var tenant, webhook, state, cursor string
	var failed bool
	var limit int
	cmd := &cobra.Command{
		Use:   "deliveries --tenant T [--webhook ID] [--failed | --state S] [--limit N] [--cursor C]",
		Short: "List deliveries, newest first, with their outcome; --failed shows the dead letters",
		Long: `List a tenant's webhook deliveries, newest first, --limit at a time (default 100). When more
exist, the table ends with the --cursor that shows the next (older) ones; --output json prints
{"items": [...], "nextCursor": "whd_..."} (nextCursor absent on the last page). The STATE
column holds --state's words: pending (waiting for its first attempt, or retrying), delivered,
failed (dead-lettered); OUTCOME says why in plain words. No match prints "No deliveries.".`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if failed {
				if state != "" && state != api.DeliveryFailed {
					return usagef("use --failed or --state, not both")
				}
				state = api.DeliveryFailed
			}
			if state != "" && state != api.DeliveryPending && state != api.DeliveryDelivered && state != api.DeliveryFailed {
				return usagef("--state %q: want pending, delivered or failed, the words of the STATE column (a delivery waiting for its first attempt or retrying is pending)", state)
			}
			if limit < 1 {
				return usagef("--limit must be at least 1")
			}
			out, err := listPages(cmd, func(ctx context.Context, c *client.Client, limit int, cursor string) ([]api.WebhookDelivery, string, error) {
				p, err := c.Webhooks.Deliveries(ctx, api.WebhookDeliveriesInput{TenantID: tenant, SubscriptionID: webhook, State: state, Limit: limit, Cursor: cursor})
				return p.Items, p.NextCursor, err
			}, cursor, limit)
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				if len(out.Items) == 0 {
					_, err := linef(w, "No deliveries.\n")
					return err
				}
				rows := make([][]string, 0, len(out.Items))
				for _, d := range out.Items {
					rows = append(rows, []string{d.ID, d.SubscriptionID, d.EventType, d.EventID, d.State, d.Outcome(), strconv.Itoa(d.Attempts),
						formatTime(d.LastAttemptAt), nextAttempt(d)})
				}
				if err := printTable(w, []string{"DELIVERY", "WEBHOOK", "EVENT", "EVENT ID", "STATE", "OUTCOME", "ATTEMPTS", "LAST ATTEMPT", "NEXT ATTEMPT"}, rows); err != nil {
					return err
				}
				return moreNotice(w, len(out.Items), "deliveries", out.NextCursor, "narrow with --webhook or --state")
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant whose deliveries to list")
	cmd.Flags().StringVar(&webhook, "webhook", "", "only this subscription's deliveries")
	cmd.Flags().BoolVar(&failed, "failed", false, "only dead-lettered deliveries (retried for 24 hours without success)")
	cmd.Flags().StringVar(&state, "state", "", "only deliveries in this state: pending, delivered, failed")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after this delivery (the cursor a previous page named): older ones")
	cmd.MarkFlagRequired("tenant")
	return cmd
}

func nextAttempt(d api.WebhookDelivery) string {
	if d.State != api.DeliveryPending {
		return "-"
	}
	return formatTime(d.NextAttemptAt)
}

func newWebhooksRedeliverCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "redeliver DELIVERY --tenant T",
		Short: "Queue a delivery again now, with the same webhook-id and body",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := typed(cmd)
			if err != nil {
				return err
			}
			out, err := c.Webhooks.Redeliver(cmd.Context(), api.WebhookRef{TenantID: tenant, ID: args[0]})
			if err != nil {
				return err
			}
			return render(cmd, out, func(w io.Writer) error {
				_, err := linef(w, "Queued delivery %s of %s %s again; retried for 24 hours from now.\n", out.ID, out.EventType, out.EventID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the delivery belongs to")
	cmd.MarkFlagRequired("tenant")
	return cmd
}
