package api

import (
	"context"
	"database/sql"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/events"
)

// WebhookCreateInput is the input of webhooks.create: the endpoint (an http or https URL whose
// host is a public address unless the server allows private targets), the event types it
// receives (node.* types only in the root tenant), and an optional description (at most 200
// characters).
type WebhookCreateInput struct {
	TenantID    string   `json:"tenantId"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
}

// WebhookRef names one of a tenant's subscriptions (whk_...).
type WebhookRef struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
}

// WebhookRotateInput is the input of webhooks.rotateSecret: OverlapSeconds is how long the
// secrets the subscription had keep signing beside the new one, 0 (at once: they stop signing
// now) to 604800 (7 days); absent means 86400 (24 hours).
type WebhookRotateInput struct {
	TenantID       string `json:"tenantId"`
	ID             string `json:"id"`
	OverlapSeconds *int64 `json:"overlapSeconds,omitempty"`
}

// WebhookList is the output of webhooks.list, oldest first.
type WebhookList struct {
	Items []events.Subscription `json:"items"`
}

// WebhookDeliveriesInput is the input of webhooks.deliveries: SubscriptionID narrows to one
// subscription, State to pending, delivered or failed (dead-lettered); Limit 1-1000 (default
// 100); Cursor the previous page's nextCursor.
type WebhookDeliveriesInput struct {
	TenantID       string `json:"tenantId"`
	SubscriptionID string `json:"subscriptionId,omitempty"`
	State          string `json:"state,omitempty"`
	Limit          int    `json:"limit,omitempty"`
	Cursor         string `json:"cursor,omitempty"`
}

// WebhookDeliveryList is a page of deliveries, newest first; NextCursor (absent on the last
// page) asks for older ones.
type WebhookDeliveryList struct {
	Items      []events.Delivery `json:"items"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// registerWebhooksMethods registers webhooks.* (permission webhooks:<verb> on tenant/<id>;
// webhooks.deliveries decides webhooks:list).
func registerWebhooksMethods(r *Registry, d *deps) {
	hooks := d.webhooks
	r.Register(Method{
		Name: "webhooks.create", Summary: "Subscribe an endpoint to event types; the answer holds its signing secret (whsec_...), shown only here", Write: true,
		Permission: "webhooks:create", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in WebhookCreateInput) (any, error) {
			if hooks == nil {
				return nil, cubefleet.Errorf(cubefleet.CodeUnsupported, "this server does not deliver webhooks")
			}
			return hooks.Create(ctx, c.Q.(*sql.Tx), events.NewSubscription{TenantID: in.TenantID, URL: in.URL, Events: in.Events,
				Description: in.Description, CreatedBy: c.Principal.ID})
		}),
		Input: WebhookCreateInput{}, Output: events.WithSecret{},
	})
	r.Register(Method{
		Name: "webhooks.list", Summary: "List a tenant's webhook subscriptions (never their secrets)",
		Permission: "webhooks:list", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in TenantInput) (any, error) {
			items, err := events.ListSubscriptions(ctx, c.Q, in.TenantID)
			return WebhookList{Items: items}, err
		}),
		Input: TenantInput{}, Output: WebhookList{},
	})
	r.Register(Method{
		Name: "webhooks.delete", Summary: "Delete a webhook subscription with its secrets and deliveries", Write: true,
		Permission: "webhooks:delete", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in WebhookRef) (any, error) {
			if err := needWebhook(in.ID); err != nil {
				return nil, err
			}
			return events.DeleteSubscription(ctx, c.Q, in.TenantID, in.ID)
		}),
		Input: WebhookRef{}, Output: events.Subscription{},
	})
	r.Register(Method{
		Name: "webhooks.rotateSecret", Summary: "Give a subscription a new signing secret (shown only here); the old one keeps signing for the overlap", Write: true,
		Permission: "webhooks:rotate-secret", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in WebhookRotateInput) (any, error) {
			if hooks == nil {
				return nil, cubefleet.Errorf(cubefleet.CodeUnsupported, "this server does not deliver webhooks")
			}
			if err := needWebhook(in.ID); err != nil {
				return nil, err
			}
			overlap := events.DefaultSecretOverlap
			if o := in.OverlapSeconds; o != nil {
				if *o < 0 || *o > int64(events.MaxSecretOverlap/time.Second) {
					return nil, cubefleet.Invalid("overlapSeconds", "overlapSeconds is 0 (the old secret stops signing at once) to %d (7 days); leave it out for 24 hours", int64(events.MaxSecretOverlap/time.Second))
				}
				overlap = time.Duration(*o) * time.Second
			}
			return hooks.RotateSecret(ctx, c.Q, in.TenantID, in.ID, overlap)
		}),
		Input: WebhookRotateInput{}, Output: events.WithSecret{},
	})
	r.Register(Method{
		Name: "webhooks.deliveries", Summary: "List a tenant's webhook deliveries, newest first, with their outcome (state failed: dead-lettered)",
		Permission: "webhooks:list", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in WebhookDeliveriesInput) (any, error) {
			if in.Limit < 0 || in.Limit > 1000 {
				return nil, cubefleet.Invalid("limit", "limit is 1 to 1000")
			}
			if in.Cursor != "" && !cubefleet.IsID(in.Cursor, "whd") {
				return nil, cubefleet.Invalid("cursor", "cursor %q is not a page's nextCursor (a delivery id, whd_...)", in.Cursor)
			}
			items, next, err := events.ListDeliveries(ctx, c.Q, events.DeliveryFilter{TenantID: in.TenantID, SubscriptionID: in.SubscriptionID,
				State: in.State, Limit: in.Limit, Cursor: in.Cursor})
			return WebhookDeliveryList{Items: items, NextCursor: next}, err
		}),
		Input: WebhookDeliveriesInput{}, Output: WebhookDeliveryList{},
	})
	r.Register(Method{
		Name: "webhooks.redeliver", Summary: "Queue a delivery again now (a dead letter, or one the receiver lost), with the same webhook-id and body", Write: true,
		Permission: "webhooks:redeliver", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in WebhookRef) (any, error) {
			if in.ID == "" {
				return nil, cubefleet.Invalid("id", "id is required: the delivery's id (whd_...)")
			}
			return events.Redeliver(ctx, c.Q, in.TenantID, in.ID, d.now())
		}),
		Input: WebhookRef{}, Output: events.Delivery{},
	})
}

func needWebhook(id string) error {
	if id == "" {
		return cubefleet.Invalid("id", "id is required: the subscription's id (whk_...)")
	}
	return nil
}
