package client

import (
	"context"
	"iter"

	"github.com/cubefleet/cubefleet/api"
)

// AuditService is audit.* (audit:read on tenant/<tenantId>).
type AuditService struct{ c *Client }

// List runs audit.list: one page of the tenant's audit rows, oldest first.
func (s *AuditService) List(ctx context.Context, in api.AuditListInput) (api.AuditList, error) {
	return call[api.AuditList](ctx, s.c, "audit.list", in)
}

// All iterates over every audit row List finds from in (in.Cursor is ignored; in.Newest must be
// false, it reads one page).
func (s *AuditService) All(ctx context.Context, in api.AuditListInput) iter.Seq2[api.AuditEntry, error] {
	return pages(ctx, func(ctx context.Context, cursor string) ([]api.AuditEntry, string, error) {
		in.Cursor = cursor
		p, err := s.List(ctx, in)
		return p.Items, p.NextCursor, err
	})
}

// EventsService is events.* (events:read on tenant/root).
type EventsService struct{ c *Client }

// List runs events.list: one page of the event log, oldest first.
func (s *EventsService) List(ctx context.Context, in api.EventListInput) (api.EventList, error) {
	return call[api.EventList](ctx, s.c, "events.list", in)
}

// All iterates over every event List finds from in (in.Cursor is ignored; in.Newest must be
// false, it reads one page).
func (s *EventsService) All(ctx context.Context, in api.EventListInput) iter.Seq2[api.Event, error] {
	return pages(ctx, func(ctx context.Context, cursor string) ([]api.Event, string, error) {
		in.Cursor = cursor
		p, err := s.List(ctx, in)
		return p.Items, p.NextCursor, err
	})
}

// FleetService is fleet.* (compute:fleet:admin on compute-fleet/global; root-tenant keys).
type FleetService struct{ c *Client }

// Export runs fleet.export: the tenant's fleet as a document.
func (s *FleetService) Export(ctx context.Context, in api.TenantInput) (api.FleetExport, error) {
	return call[api.FleetExport](ctx, s.c, "fleet.export", in)
}

// Plan runs fleet.plan: what applying in.Config would change (it changes nothing).
func (s *FleetService) Plan(ctx context.Context, in api.FleetInput) (api.FleetPlan, error) {
	return call[api.FleetPlan](ctx, s.c, "fleet.plan", in)
}

// Apply runs fleet.apply: every call of the plan in one transaction (PLAN_BLOCKED for a plan
// with a blocked change, CONFIG_DRIFT when in.PlanHash is not the plan's).
func (s *FleetService) Apply(ctx context.Context, in api.FleetInput) (api.FleetApplyResult, error) {
	return call[api.FleetApplyResult](ctx, s.c, "fleet.apply", in)
}

// Status runs fleet.status: the last applied document and the drift found since.
func (s *FleetService) Status(ctx context.Context, in api.FleetStatusInput) (api.FleetStatus, error) {
	return call[api.FleetStatus](ctx, s.c, "fleet.status", in)
}

// IAMService is iam.*: tenants, API keys and the permission catalogue.
type IAMService struct {
	Tenants     *TenantsService
	Keys        *KeysService
	Permissions *PermissionsService
}

// TenantsService is iam.tenants.* (iam:tenants:<verb> on tenant/root).
type TenantsService struct{ c *Client }

// Create runs iam.tenants.create.
func (s *TenantsService) Create(ctx context.Context, in api.TenantCreateInput) (api.Tenant, error) {
	return call[api.Tenant](ctx, s.c, "iam.tenants.create", in)
}

// List runs iam.tenants.list.
func (s *TenantsService) List(ctx context.Context) (api.TenantList, error) {
	return call[api.TenantList](ctx, s.c, "iam.tenants.list", nil)
}

// KeysService is iam.keys.* (iam:keys:<verb> on tenant/<tenantId>).
type KeysService struct{ c *Client }

// Create runs iam.keys.create: a service account with its grants and an API key, whose token
// is in the answer only.
func (s *KeysService) Create(ctx context.Context, in api.KeyCreateInput) (api.KeyCreated, error) {
	return call[api.KeyCreated](ctx, s.c, "iam.keys.create", in)
}

// List runs iam.keys.list (never a token).
func (s *KeysService) List(ctx context.Context, in api.TenantInput) (api.KeyList, error) {
	return call[api.KeyList](ctx, s.c, "iam.keys.list", in)
}

// Revoke runs iam.keys.revoke.
func (s *KeysService) Revoke(ctx context.Context, in api.KeyRevokeInput) (api.KeyRevoked, error) {
	return call[api.KeyRevoked](ctx, s.c, "iam.keys.revoke", in)
}

// PermissionsService is iam.permissions.* (iam:keys:create on tenant/<tenantId>).
type PermissionsService struct{ c *Client }

// List runs iam.permissions.list: what a key of the tenant can be granted.
func (s *PermissionsService) List(ctx context.Context, in api.TenantInput) (api.PermissionList, error) {
	return call[api.PermissionList](ctx, s.c, "iam.permissions.list", in)
}

// NodesService is nodes.* (nodes:<verb> on tenant/root).
type NodesService struct {
	c          *Client
	JoinTokens *JoinTokensService
}

// List runs nodes.list.
func (s *NodesService) List(ctx context.Context, in api.NodeListInput) (api.NodeList, error) {
	return call[api.NodeList](ctx, s.c, "nodes.list", in)
}

// Get runs nodes.get: the node with the sandboxes it runs.
func (s *NodesService) Get(ctx context.Context, in api.NodeRef) (api.NodeOutput, error) {
	return call[api.NodeOutput](ctx, s.c, "nodes.get", in)
}

// Cordon runs nodes.cordon (idempotent; Changed is false when the node already was cordoned so).
func (s *NodesService) Cordon(ctx context.Context, in api.NodeCordonInput) (api.NodeCordonOutput, error) {
	return call[api.NodeCordonOutput](ctx, s.c, "nodes.cordon", in)
}

// Uncordon runs nodes.uncordon (idempotent; it ends a drain; Changed is false when the node
// already was uncordoned).
func (s *NodesService) Uncordon(ctx context.Context, in api.NodeRef) (api.NodeCordonOutput, error) {
	return call[api.NodeCordonOutput](ctx, s.c, "nodes.uncordon", in)
}

// Drain runs nodes.drain (CONFLICT past the pool's disruption budget unless in.Force).
func (s *NodesService) Drain(ctx context.Context, in api.NodeDrainInput) (api.NodeOutput, error) {
	return call[api.NodeOutput](ctx, s.c, "nodes.drain", in)
}

// Label runs nodes.label.
func (s *NodesService) Label(ctx context.Context, in api.NodeLabelInput) (api.NodeLabelOutput, error) {
	return call[api.NodeLabelOutput](ctx, s.c, "nodes.label", in)
}

// Delete runs nodes.delete (the node must be cordoned).
func (s *NodesService) Delete(ctx context.Context, in api.NodeDeleteInput) (api.NodeOutput, error) {
	return call[api.NodeOutput](ctx, s.c, "nodes.delete", in)
}

// JoinTokensService is nodes.joinTokens.* (nodes:join-token on tenant/root).
type JoinTokensService struct{ c *Client }

// Create runs nodes.joinTokens.create: the token is in the answer only.
func (s *JoinTokensService) Create(ctx context.Context, in api.JoinTokenCreateInput) (api.JoinTokenCreated, error) {
	return call[api.JoinTokenCreated](ctx, s.c, "nodes.joinTokens.create", in)
}

// List runs nodes.joinTokens.list (never a token or its hash).
func (s *JoinTokensService) List(ctx context.Context, in api.JoinTokenListInput) (api.JoinTokenList, error) {
	return call[api.JoinTokenList](ctx, s.c, "nodes.joinTokens.list", in)
}

// Revoke runs nodes.joinTokens.revoke (idempotent).
func (s *JoinTokensService) Revoke(ctx context.Context, in api.JoinTokenRef) (api.JoinTokenOutput, error) {
	return call[api.JoinTokenOutput](ctx, s.c, "nodes.joinTokens.revoke", in)
}

// SchedulerService is scheduler.* (scheduler:<verb> on tenant/root).
type SchedulerService struct{ c *Client }

// Place runs scheduler.place: the node chosen and the room reserved there
// (RESOURCE_EXHAUSTED when no node can take it).
func (s *SchedulerService) Place(ctx context.Context, in api.PlaceInput) (api.PlaceOutput, error) {
	return call[api.PlaceOutput](ctx, s.c, "scheduler.place", in)
}

// Release runs scheduler.release.
func (s *SchedulerService) Release(ctx context.Context, in api.SandboxRef) (api.ReleaseOutput, error) {
	return call[api.ReleaseOutput](ctx, s.c, "scheduler.release", in)
}

// Status runs scheduler.status.
func (s *SchedulerService) Status(ctx context.Context) (api.SchedulerStatus, error) {
	return call[api.SchedulerStatus](ctx, s.c, "scheduler.status", nil)
}

// SecretsService is secrets.* (compute:secrets:<verb> on tenant/<tenantId>). Values go in
// and never come back.
type SecretsService struct{ c *Client }

// Create runs secrets.create.
func (s *SecretsService) Create(ctx context.Context, in api.SecretCreateInput) (api.Secret, error) {
	return call[api.Secret](ctx, s.c, "secrets.create", in)
}

// Update runs secrets.update: a new value for the secret in.Name names.
func (s *SecretsService) Update(ctx context.Context, in api.SecretCreateInput) (api.Secret, error) {
	return call[api.Secret](ctx, s.c, "secrets.update", in)
}

// List runs secrets.list.
func (s *SecretsService) List(ctx context.Context, in api.TenantInput) (api.SecretList, error) {
	return call[api.SecretList](ctx, s.c, "secrets.list", in)
}

// Delete runs secrets.delete (CONFLICT while an object refers to it).
func (s *SecretsService) Delete(ctx context.Context, in api.SecretDeleteInput) (api.Secret, error) {
	return call[api.Secret](ctx, s.c, "secrets.delete", in)
}

// WebhooksService is webhooks.* (webhooks:<verb> on tenant/<tenantId>).
type WebhooksService struct{ c *Client }

// Create runs webhooks.create: the answer holds the signing secret, shown only there.
func (s *WebhooksService) Create(ctx context.Context, in api.WebhookCreateInput) (api.WebhookWithSecret, error) {
	return call[api.WebhookWithSecret](ctx, s.c, "webhooks.create", in)
}

// List runs webhooks.list (never a secret).
func (s *WebhooksService) List(ctx context.Context, in api.TenantInput) (api.WebhookList, error) {
	return call[api.WebhookList](ctx, s.c, "webhooks.list", in)
}

// Delete runs webhooks.delete.
func (s *WebhooksService) Delete(ctx context.Context, in api.WebhookRef) (api.Webhook, error) {
	return call[api.Webhook](ctx, s.c, "webhooks.delete", in)
}

// RotateSecret runs webhooks.rotateSecret: the new secret, shown only there.
func (s *WebhooksService) RotateSecret(ctx context.Context, in api.WebhookRotateInput) (api.WebhookWithSecret, error) {
	return call[api.WebhookWithSecret](ctx, s.c, "webhooks.rotateSecret", in)
}

// Deliveries runs webhooks.deliveries: one page, newest first.
func (s *WebhooksService) Deliveries(ctx context.Context, in api.WebhookDeliveriesInput) (api.WebhookDeliveryList, error) {
	return call[api.WebhookDeliveryList](ctx, s.c, "webhooks.deliveries", in)
}

// AllDeliveries iterates over every delivery Deliveries finds from in (in.Cursor is ignored).
func (s *WebhooksService) AllDeliveries(ctx context.Context, in api.WebhookDeliveriesInput) iter.Seq2[api.WebhookDelivery, error] {
	return pages(ctx, func(ctx context.Context, cursor string) ([]api.WebhookDelivery, string, error) {
		in.Cursor = cursor
		p, err := s.Deliveries(ctx, in)
		return p.Items, p.NextCursor, err
	})
}

// Redeliver runs webhooks.redeliver.
func (s *WebhooksService) Redeliver(ctx context.Context, in api.WebhookRef) (api.WebhookDelivery, error) {
	return call[api.WebhookDelivery](ctx, s.c, "webhooks.redeliver", in)
}
