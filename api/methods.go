package api

import (
	"slices"
	"strings"
)

// Method is one method of the public API, as the contract declares it: POST /api/v1/<Name> with
// Input as the JSON body answers Output, or an error body (ErrorBody) with the code's HTTP
// status. The control plane serves exactly the methods Methods lists (a test holds the two to
// one list), and its OpenAPI document is rendered from this table (OpenAPI).
type Method struct {
	// Name is the method's name, e.g. "compute.pools.create": a dotted domain, object and verb.
	Name string
	// Summary is one line for the OpenAPI document and `cubefleet keys permissions`.
	Summary string
	// Permission is the permission the method decides before it reads or writes anything, e.g.
	// "compute:pools:create"; Scope is the form of the scope it decides it on. A caller without
	// a grant of it on that scope gets FORBIDDEN (and an audit row).
	Permission string
	Scope      ScopeForm
	// Write says the method changes state (and writes an audit row when it succeeds).
	Write bool
	// MaxBody is the largest request body the method takes, in bytes; a larger one is
	// PAYLOAD_TOO_LARGE (413). Zero means DefaultMaxBody.
	MaxBody int64
	// Input and Output are zero values of the method's input and output types.
	Input, Output any
}

// ScopeForm is the form of the scope a method decides its permission on.
type ScopeForm int

// The scope forms. The zero ScopeForm is none: no method has it.
const (
	// OnTenant decides on tenant/<tenantId>, the input's tenantId (required).
	OnTenant ScopeForm = iota + 1
	// OnFleet decides on compute-fleet/global (root-tenant principals only); the input's
	// tenantId (required) names the tenant acted on.
	OnFleet
	// OnRoot decides on tenant/root (root-tenant principals only): platform-wide methods such
	// as tenants, nodes, events and the scheduler. The input names no tenant.
	OnRoot
)

// String returns the scope as a permission catalogue shows it: tenant/{tenantId},
// compute-fleet/global or tenant/root ("" for the zero form).
func (f ScopeForm) String() string {
	switch f {
	case OnTenant:
		return "tenant/{tenantId}"
	case OnFleet:
		return "compute-fleet/global"
	case OnRoot:
		return "tenant/root"
	}
	return ""
}

// Request body caps (Method.MaxBody), in bytes.
const (
	// DefaultMaxBody is the cap of a method that declares none (64 KiB): ids, names, grants,
	// labels, filters.
	DefaultMaxBody = 64 << 10
	// MaxSecretBody is the cap of secrets.create and secrets.update (1 MiB): a value of up to
	// 64 KiB, escaped.
	MaxSecretBody = 1 << 20
	// MaxDocumentBody is the cap of fleet.plan, fleet.apply and the compute creates and
	// updates (8 MiB): a fleet document, or a config or env of up to 256 values of up to 4096
	// characters, escaped.
	MaxDocumentBody = 8 << 20
)

// Methods returns every method of the public API, sorted by name. The slice is the caller's.
//
// Adding a method: add its Input and Output types to the file of its domain in this package
// (documented field by field: units, limits, zero values), a row here, a golden file
// (testdata/methods/<name>.json, written by go test ./api -update), the handler in
// internal/api (registered under the same name) and its method in the client package.
func Methods() []Method {
	out := slices.Clone(methods)
	for i := range out {
		if out[i].MaxBody == 0 {
			out[i].MaxBody = DefaultMaxBody
		}
	}
	slices.SortFunc(out, func(a, b Method) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the method called name; ok is false for a name the API does not have.
func Lookup(name string) (m Method, ok bool) {
	i := slices.IndexFunc(methods, func(m Method) bool { return m.Name == name })
	if i < 0 {
		return Method{}, false
	}
	m = methods[i]
	if m.MaxBody == 0 {
		m.MaxBody = DefaultMaxBody
	}
	return m, true
}

// methods is the table: every method but the compute ones, then those (computeMethods).
var methods = append([]Method{
	{Name: "audit.list", Summary: "Read a tenant's audit log, oldest first",
		Permission: "audit:read", Scope: OnTenant,
		Input: AuditListInput{}, Output: AuditList{}},
	{Name: "events.list", Summary: "Read the event log (node lifecycle: joined, suspect, down, lost, recovered, cordoned, uncordoned, draining, drained, deleted), oldest first",
		Permission: "events:read", Scope: OnRoot,
		Input: EventListInput{}, Output: EventList{}},
	{Name: "fleet.apply", Summary: "Apply a document in one transaction (refuses a stale planHash)",
		Permission: "compute:fleet:admin", Scope: OnFleet, Write: true, MaxBody: MaxDocumentBody,
		Input: FleetInput{}, Output: FleetApplyResult{}},
	{Name: "fleet.export", Summary: "Export a tenant's fleet as a document",
		Permission: "compute:fleet:admin", Scope: OnFleet,
		Input: TenantInput{}, Output: FleetExport{}},
	{Name: "fleet.plan", Summary: "Diff a document against a tenant's fleet (changes nothing)",
		Permission: "compute:fleet:admin", Scope: OnFleet, MaxBody: MaxDocumentBody,
		Input: FleetInput{}, Output: FleetPlan{}},
	{Name: "fleet.status", Summary: "The last applied document and the drift found since",
		Permission: "compute:fleet:admin", Scope: OnFleet,
		Input: FleetStatusInput{}, Output: FleetStatus{}},
	{Name: "iam.keys.create", Summary: "Create a service account with grants and an API key (the token is shown once)",
		Permission: "iam:keys:create", Scope: OnTenant, Write: true,
		Input: KeyCreateInput{}, Output: KeyCreated{}},
	{Name: "iam.keys.list", Summary: "List a tenant's API keys (never their tokens)",
		Permission: "iam:keys:list", Scope: OnTenant,
		Input: TenantInput{}, Output: KeyList{}},
	{Name: "iam.keys.revoke", Summary: "Revoke an API key",
		Permission: "iam:keys:revoke", Scope: OnTenant, Write: true,
		Input: KeyRevokeInput{}, Output: KeyRevoked{}},
	{Name: "iam.permissions.list", Summary: "List the permissions a key of the tenant can be granted, with their scopes and methods",
		Permission: "iam:keys:create", Scope: OnTenant,
		Input: TenantInput{}, Output: PermissionList{}},
	{Name: "iam.tenants.create", Summary: "Create a tenant",
		Permission: "iam:tenants:create", Scope: OnRoot, Write: true,
		Input: TenantCreateInput{}, Output: Tenant{}},
	{Name: "iam.tenants.list", Summary: "List every tenant",
		Permission: "iam:tenants:list", Scope: OnRoot,
		Input: struct{}{}, Output: TenantList{}},
	{Name: "nodes.cordon", Summary: "Cordon a node: it keeps running what it has but receives no new work (idempotent)",
		Permission: "nodes:cordon", Scope: OnRoot, Write: true,
		Input: NodeCordonInput{}, Output: NodeCordonOutput{}},
	{Name: "nodes.delete", Summary: "Delete a cordoned node and revoke its credential (force: even while it is not Ready or runs sandboxes)",
		Permission: "nodes:delete", Scope: OnRoot, Write: true,
		Input: NodeDeleteInput{}, Output: NodeOutput{}},
	{Name: "nodes.drain", Summary: "Drain a node: cordon it and mark it draining until its agent reports no sandboxes running (idempotent; uncordon ends it; force: past the pool's disruption budget)",
		Permission: "nodes:drain", Scope: OnRoot, Write: true,
		Input: NodeDrainInput{}, Output: NodeOutput{}},
	{Name: "nodes.get", Summary: "Get one compute node, with the sandboxes it runs",
		Permission: "nodes:get", Scope: OnRoot,
		Input: NodeRef{}, Output: NodeOutput{}},
	{Name: "nodes.joinTokens.create", Summary: "Create a join token for `cubefleet agent` (single-use, short-lived, bound to an address by default; shown once)",
		Permission: "nodes:join-token", Scope: OnRoot, Write: true,
		Input: JoinTokenCreateInput{}, Output: JoinTokenCreated{}},
	{Name: "nodes.joinTokens.list", Summary: "List join tokens (never the token or its hash): the usable ones, or with all every one (used, expired, revoked)",
		Permission: "nodes:join-token", Scope: OnRoot,
		Input: JoinTokenListInput{}, Output: JoinTokenList{}},
	{Name: "nodes.joinTokens.revoke", Summary: "Revoke a join token: every replica refuses it from then on (idempotent; nodes that joined with it stay)",
		Permission: "nodes:join-token", Scope: OnRoot, Write: true,
		Input: JoinTokenRef{}, Output: JoinTokenOutput{}},
	{Name: "nodes.label", Summary: "Set (merge) and remove a node's labels",
		Permission: "nodes:label", Scope: OnRoot, Write: true,
		Input: NodeLabelInput{}, Output: NodeLabelOutput{}},
	{Name: "nodes.list", Summary: "List the registered compute nodes with their health, pool and usage",
		Permission: "nodes:list", Scope: OnRoot,
		Input: NodeListInput{}, Output: NodeList{}},
	{Name: "nodes.uncordon", Summary: "Uncordon a node (idempotent)",
		Permission: "nodes:uncordon", Scope: OnRoot, Write: true,
		Input: NodeRef{}, Output: NodeCordonOutput{}},
	{Name: "sandboxes.create", Summary: "Create a sandbox of a template: placed on a node and run by its agent (async: answer at once; else wait until it runs or ends, up to waitSeconds)",
		Permission: "sandboxes:create", Scope: OnTenant, Write: true,
		Input: SandboxCreateInput{}, Output: Sandbox{}},
	{Name: "sandboxes.delete", Summary: "Delete a sandbox: stop it if it runs (SIGTERM, then SIGKILL after its grace) and forget it, with its result",
		Permission: "sandboxes:delete", Scope: OnTenant, Write: true,
		Input: TenantSandboxRef{}, Output: Sandbox{}},
	{Name: "sandboxes.get", Summary: "Get a sandbox: its state, every state it reached with when and why, and its result once it ended",
		Permission: "sandboxes:get", Scope: OnTenant,
		Input: TenantSandboxRef{}, Output: Sandbox{}},
	{Name: "sandboxes.list", Summary: "List a tenant's sandboxes, newest first (by state, node, template; warm: the idle sandboxes of its warm pools)",
		Permission: "sandboxes:list", Scope: OnTenant,
		Input: SandboxListInput{}, Output: SandboxList{}},
	{Name: "sandboxes.logs", Summary: "Get a sandbox's output (stdout and stderr, each cut at --result-max-bytes with a marker), from byte offsets; follow waits for more while it runs",
		Permission: "sandboxes:logs", Scope: OnTenant,
		Input: SandboxLogsInput{}, Output: SandboxLogs{}},
	{Name: "sandboxes.wait", Summary: "Wait until a sandbox has ended (or, with until running, runs), up to timeoutSeconds; answers it as it is then, with done",
		Permission: "sandboxes:get", Scope: OnTenant,
		Input: SandboxWaitInput{}, Output: SandboxWaitOutput{}},
	{Name: "scheduler.place", Summary: "Place a sandbox: choose its node and reserve the room there (released by sandbox id)",
		Permission: "scheduler:place", Scope: OnRoot, Write: true,
		Input: PlaceInput{}, Output: PlaceOutput{}},
	{Name: "scheduler.release", Summary: "Release a sandbox's reservation (its create failed or was given up)",
		Permission: "scheduler:release", Scope: OnRoot, Write: true,
		Input: SandboxRef{}, Output: ReleaseOutput{}},
	{Name: "scheduler.status", Summary: "The scheduler's configuration in force, lease holder and reservations",
		Permission: "scheduler:read", Scope: OnRoot,
		Input: struct{}{}, Output: SchedulerStatus{}},
	{Name: "secrets.create", Summary: "Store a secret value (sealed at rest, never returned); documents refer to it as secret://NAME",
		Permission: "compute:secrets:create", Scope: OnTenant, Write: true, MaxBody: MaxSecretBody,
		Input: SecretCreateInput{}, Output: Secret{}},
	{Name: "secrets.delete", Summary: "Delete a secret by name or id (refused while an object refers to it)",
		Permission: "compute:secrets:delete", Scope: OnTenant, Write: true,
		Input: SecretDeleteInput{}, Output: Secret{}},
	{Name: "secrets.list", Summary: "List a tenant's secrets (names and metadata, never values)",
		Permission: "compute:secrets:list", Scope: OnTenant,
		Input: TenantInput{}, Output: SecretList{}},
	{Name: "secrets.update", Summary: "Replace a secret's value (rotation); objects referring to it keep their reference",
		Permission: "compute:secrets:update", Scope: OnTenant, Write: true, MaxBody: MaxSecretBody,
		Input: SecretCreateInput{}, Output: Secret{}},
	{Name: "webhooks.create", Summary: "Subscribe an endpoint to event types; the answer holds its signing secret (whsec_...), shown only here",
		Permission: "webhooks:create", Scope: OnTenant, Write: true,
		Input: WebhookCreateInput{}, Output: WebhookWithSecret{}},
	{Name: "webhooks.delete", Summary: "Delete a webhook subscription with its secrets and deliveries",
		Permission: "webhooks:delete", Scope: OnTenant, Write: true,
		Input: WebhookRef{}, Output: Webhook{}},
	{Name: "webhooks.deliveries", Summary: "List a tenant's webhook deliveries, newest first, with their outcome (state failed: dead-lettered)",
		Permission: "webhooks:list", Scope: OnTenant,
		Input: WebhookDeliveriesInput{}, Output: WebhookDeliveryList{}},
	{Name: "webhooks.list", Summary: "List a tenant's webhook subscriptions (never their secrets)",
		Permission: "webhooks:list", Scope: OnTenant,
		Input: TenantInput{}, Output: WebhookList{}},
	{Name: "webhooks.redeliver", Summary: "Queue a delivery again now (a dead letter, or one the receiver lost), with the same webhook-id and body",
		Permission: "webhooks:redeliver", Scope: OnTenant, Write: true,
		Input: WebhookRef{}, Output: WebhookDelivery{}},
	{Name: "webhooks.rotateSecret", Summary: "Give a subscription a new signing secret (shown only here); the old one keeps signing for the overlap",
		Permission: "webhooks:rotate-secret", Scope: OnTenant, Write: true,
		Input: WebhookRotateInput{}, Output: WebhookWithSecret{}},
}, computeMethods()...)
