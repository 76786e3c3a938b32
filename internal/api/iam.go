package api

import (
	"context"
	"fmt"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// TenantCreateInput is the input of iam.tenants.create.
type TenantCreateInput struct {
	ID string `json:"id"` // 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit
}

// TenantOutput is a tenant as iam.tenants.create returns it.
type TenantOutput struct{ iam.Tenant }

// AuditTarget names the tenant in the audit row.
func (t TenantOutput) AuditTarget() string { return t.ID }

// TenantList is the output of iam.tenants.list.
type TenantList struct {
	Items []iam.Tenant `json:"items"`
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
	Key   iam.Key `json:"key"`
	Token string  `json:"token"`
}

// AuditTarget names the key (never the token) in the audit row.
func (k KeyCreated) AuditTarget() string { return k.Key.ID }

// KeyList is the output of iam.keys.list, newest first.
type KeyList struct {
	Items []iam.Key `json:"items"`
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

// AuditTarget names the key in the audit row.
func (k KeyRevoked) AuditTarget() string { return k.ID }

// PermissionList is the output of iam.permissions.list: the catalogue entries a principal of
// the input's tenant can be granted.
type PermissionList struct {
	Items []iam.PermissionInfo `json:"items"`
}

// maxKeyTTL bounds ttlSeconds (ten years).
const maxKeyTTL = 10 * 365 * 24 * time.Hour

func registerIAMMethods(r *Registry, d *deps) {
	r.Register(Method{
		Name: "iam.tenants.create", Summary: "Create a tenant", Write: true,
		Permission: "iam:tenants:create", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, in TenantCreateInput) (any, error) {
			t, err := iam.CreateTenant(ctx, c.Q, in.ID, d.now())
			return TenantOutput{t}, err
		}),
		Input: TenantCreateInput{}, Output: iam.Tenant{},
	})
	r.Register(Method{
		Name: "iam.tenants.list", Summary: "List every tenant",
		Permission: "iam:tenants:list", Scope: OnRoot,
		Handle: Typed(func(ctx context.Context, c *Call, _ struct{}) (any, error) {
			ts, err := iam.ListTenants(ctx, c.Q)
			return TenantList{Items: ts}, err
		}),
		Input: struct{}{}, Output: TenantList{},
	})
	r.Register(Method{
		Name: "iam.keys.create", Summary: "Create a service account with grants and an API key (the token is shown once)", Write: true,
		Permission: "iam:keys:create", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in KeyCreateInput) (any, error) {
			if in.TTLSeconds < 0 || time.Duration(in.TTLSeconds)*time.Second > maxKeyTTL {
				return nil, cubefleet.Invalid("ttlSeconds", "ttlSeconds is 0 (no expiry) to %d (ten years)", int64(maxKeyTTL/time.Second))
			}
			grants := make([]iam.Grant, 0, len(in.Grants))
			for i, s := range in.Grants {
				g, err := iam.ParseGrant(s)
				if err != nil {
					return nil, cubefleet.Invalid(fmt.Sprintf("grants[%d]", i), "grant %q is not PERMISSION@SCOPE (e.g. compute:pools:create@tenant/acme)", s)
				}
				grants = append(grants, g)
			}
			k, token, err := iam.CreateServiceKey(ctx, c.Q, r.Catalogue(), c.Principal, iam.NewServiceKey{
				TenantID: in.TenantID, Name: in.Name, Grants: grants, TTL: time.Duration(in.TTLSeconds) * time.Second,
			}, d.now())
			if err != nil {
				return nil, err
			}
			return KeyCreated{Key: k, Token: token}, nil
		}),
		Input: KeyCreateInput{}, Output: KeyCreated{},
	})
	r.Register(Method{
		Name: "iam.keys.list", Summary: "List a tenant's API keys (never their tokens)",
		Permission: "iam:keys:list", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in TenantInput) (any, error) {
			ks, err := iam.ListKeys(ctx, c.Q, in.TenantID)
			return KeyList{Items: ks}, err
		}),
		Input: TenantInput{}, Output: KeyList{},
	})
	r.Register(Method{
		Name: "iam.keys.revoke", Summary: "Revoke an API key", Write: true,
		Permission: "iam:keys:revoke", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in KeyRevokeInput) (any, error) {
			if in.ID == "" {
				return nil, cubefleet.Invalid("id", "id (the key's id, key_...) is required")
			}
			if err := iam.RevokeKey(ctx, c.Q, in.TenantID, in.ID, d.now()); err != nil {
				return nil, err
			}
			return KeyRevoked{ID: in.ID, Revoked: true}, nil
		}),
		Input: KeyRevokeInput{}, Output: KeyRevoked{},
	})
	r.Register(Method{
		Name: "iam.permissions.list", Summary: "List the permissions a key of the tenant can be granted, with their scopes and methods",
		// Whoever may create keys in a tenant may read what they can grant.
		Permission: "iam:keys:create", Scope: OnTenant,
		Handle: Typed(func(ctx context.Context, c *Call, in TenantInput) (any, error) {
			return PermissionList{Items: r.Catalogue().Grantable(in.TenantID)}, nil
		}),
		Input: TenantInput{}, Output: PermissionList{},
	})
}
