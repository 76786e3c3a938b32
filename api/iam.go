package api

// RootTenant is the platform's own tenant: it always exists, owns the pools and the nodes, and
// only its principals may hold permissions on compute-fleet/global and tenant/root.
const RootTenant = "root"

// TenantInput is the part of every tenant-scoped input that names the tenant, and the whole
// input of methods that act on a whole tenant (iam.keys.list, secrets.list, fleet.export, ...).
type TenantInput struct {
	TenantID string `json:"tenantId"`
}

// KeyCreateInput is the input of iam.keys.create: a service account Name in TenantID holding
// Grants (each "PERMISSION@SCOPE"), and its key's lifetime in seconds (0 or absent: no expiry).
type KeyCreateInput struct {
	TenantID   string   `json:"tenantId"`
	Name       string   `json:"name"`
	Grants     []string `json:"grants"`
	TTLSeconds int64    `json:"ttlSeconds,omitempty"`
}

// KeyCreated is the output of iam.keys.create: the key and its token, which is shown only here.
type KeyCreated struct {
	Key   Key    `json:"key"`
	Token string `json:"token"`
}

// Key is an API key as listings show it; the token itself is shown only once, at creation.
type Key struct {
	ID            string `json:"id"`
	PrincipalID   string `json:"principalId"`
	PrincipalName string `json:"principalName"`
	TenantID      string `json:"tenantId"`
	// the token's first characters, to recognise it
	Prefix string  `json:"prefix"`
	Grants []Grant `json:"grants"`
	// Unix ms
	CreatedAt int64 `json:"createdAt"`
	// principal id
	CreatedBy string `json:"createdBy"`
	// Unix ms
	ExpiresAt *int64 `json:"expiresAt,omitempty"`
	// Unix ms
	RevokedAt *int64 `json:"revokedAt,omitempty"`
}

// Grant is one permission on one scope, e.g. {compute:pools:create, tenant/acme}.
type Grant struct {
	Permission string `json:"permission"`
	Scope      string `json:"scope"`
}

// String returns the grant as iam.keys.create takes it: PERMISSION@SCOPE.
func (g Grant) String() string { return g.Permission + "@" + g.Scope }

// KeyList is the output of iam.keys.list, newest first.
type KeyList struct {
	Items []Key `json:"items"`
}

// KeyRevokeInput is the input of iam.keys.revoke.
type KeyRevokeInput struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
}

// KeyRevoked is the output of iam.keys.revoke.
type KeyRevoked struct {
	ID      string `json:"id"`
	Revoked bool   `json:"revoked"`
}

// PermissionList is the output of iam.permissions.list: the catalogue entries a principal of
// the input's tenant can be granted.
type PermissionList struct {
	Items []Permission `json:"items"`
}

// Permission is one entry of the permission catalogue: the permission, the form of the
// scope it is granted on (ScopeFormTenant, or one exact scope such as ScopeFleet or
// tenant/root), whether only root-tenant principals may hold it, and the API methods that
// decide it.
type Permission struct {
	Permission string   `json:"permission"`
	Scope      string   `json:"scope"`
	RootOnly   bool     `json:"rootOnly,omitempty"`
	Methods    []string `json:"methods"`
}

// TenantCreateInput is the input of iam.tenants.create.
type TenantCreateInput struct {
	// 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit
	ID string `json:"id"`
}

// Tenant is a customer (or the platform itself: "root").
type Tenant struct {
	ID string `json:"id"`
	// Unix ms
	CreatedAt int64 `json:"createdAt"`
}

// TenantList is the output of iam.tenants.list.
type TenantList struct {
	Items []Tenant `json:"items"`
}

// TenantSandboxRef names one of a tenant's sandboxes (sbx_...).
type TenantSandboxRef struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
}
