package api

import (
	"context"
	"database/sql"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/events"
)

// registerWebhooksMethods registers webhooks.* (permission webhooks:<verb> on tenant/<id>;
// webhooks.deliveries decides webhooks:list).
func registerWebhooksMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "webhooks.create", Handle: Typed(d.webhooksCreate)})
	r.Register(Method{Name: "webhooks.list", Handle: Typed(d.webhooksList)})
	r.Register(Method{Name: "webhooks.delete", Handle: Typed(d.webhooksDelete)})
	r.Register(Method{Name: "webhooks.rotateSecret", Handle: Typed(d.webhooksRotateSecret)})
	r.Register(Method{Name: "webhooks.deliveries", Handle: Typed(d.webhooksDeliveries)})
	r.Register(Method{Name: "webhooks.redeliver", Handle: Typed(d.webhooksRedeliver)})
}

// withSecretAnswer is a subscription with its new signing secret, naming it in the audit row.
func withSecretAnswer(w *events.WithSecret, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return audited{out: webhookWithSecretFrom(*w), target: w.ID}, nil
}

func needWebhook(id string) error {
	if id == "" {
		return cubefleet.Invalid("id", "id is required: the subscription's id (whk_...)")
	}
	return nil
}

// webhooksCreate is the handler of webhooks.create.
func (d *deps) webhooksCreate(ctx context.Context, c *Call, in contract.WebhookCreateInput) (any, error) {
	if d.webhooks == nil {
		return nil, cubefleet.Errorf(cubefleet.CodeUnsupported, "this server does not deliver webhooks")
	}
	return withSecretAnswer(d.webhooks.Create(ctx, c.Q.(*sql.Tx), events.NewSubscription{TenantID: in.TenantID, URL: in.URL, Events: in.Events,
		Description: in.Description, CreatedBy: c.Principal.ID}))
}

// webhooksList is the handler of webhooks.list.
func (d *deps) webhooksList(ctx context.Context, c *Call, in TenantInput) (any, error) {
	items, err := events.ListSubscriptions(ctx, c.Q, in.TenantID)
	return contract.WebhookList{Items: sliceOf(items, webhookFrom)}, err
}

// webhooksDelete is the handler of webhooks.delete.
func (d *deps) webhooksDelete(ctx context.Context, c *Call, in contract.WebhookRef) (any, error) {
	if err := needWebhook(in.ID); err != nil {
		return nil, err
	}
	sub, err := events.DeleteSubscription(ctx, c.Q, in.TenantID, in.ID)
	if err != nil {
		return nil, err
	}
	return audited{out: webhookFrom(*sub), target: sub.ID}, nil
}

// webhooksRotateSecret is the handler of webhooks.rotateSecret.
func (d *deps) webhooksRotateSecret(ctx context.Context, c *Call, in contract.WebhookRotateInput) (any, error) {
	if d.webhooks == nil {
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
	return withSecretAnswer(d.webhooks.RotateSecret(ctx, c.Q, in.TenantID, in.ID, overlap))
}

// webhooksDeliveries is the handler of webhooks.deliveries.
func (d *deps) webhooksDeliveries(ctx context.Context, c *Call, in contract.WebhookDeliveriesInput) (any, error) {
	if in.Limit < 0 || in.Limit > 1000 {
		return nil, cubefleet.Invalid("limit", "limit is 1 to 1000")
	}
	if in.Cursor != "" && !cubefleet.IsID(in.Cursor, "whd") {
		return nil, cubefleet.Invalid("cursor", "cursor %q is not a page's nextCursor (a delivery id, whd_...)", in.Cursor)
	}
	items, next, err := events.ListDeliveries(ctx, c.Q, events.DeliveryFilter{TenantID: in.TenantID, SubscriptionID: in.SubscriptionID,
		State: in.State, Limit: in.Limit, Cursor: in.Cursor})
	return contract.WebhookDeliveryList{Items: sliceOf(items, webhookDeliveryFrom), NextCursor: next}, err
}

// webhooksRedeliver is the handler of webhooks.redeliver.
func (d *deps) webhooksRedeliver(ctx context.Context, c *Call, in contract.WebhookRef) (any, error) {
	if in.ID == "" {
		return nil, cubefleet.Invalid("id", "id is required: the delivery's id (whd_...)")
	}
	dl, err := events.Redeliver(ctx, c.Q, in.TenantID, in.ID, d.now())
	if err != nil {
		return nil, err
	}
	return audited{out: webhookDeliveryFrom(*dl), target: dl.ID}, nil
}
