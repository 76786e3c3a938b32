package api

import (
	"context"
	"fmt"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// maxKeyTTL bounds ttlSeconds (ten years).
const maxKeyTTL = 10 * 365 * 24 * time.Hour

// registerIAMMethods registers iam.tenants.*, iam.keys.* and iam.permissions.list.
func registerIAMMethods(r *Registry, d *deps) {
	r.Register(Method{Name: "iam.tenants.create", Handle: Typed(d.iamTenantsCreate)})
	r.Register(Method{Name: "iam.tenants.list", Handle: Typed(d.iamTenantsList)})
	r.Register(Method{Name: "iam.keys.create", Handle: Typed(d.iamKeysCreate)})
	r.Register(Method{Name: "iam.keys.list", Handle: Typed(d.iamKeysList)})
	r.Register(Method{Name: "iam.keys.revoke", Handle: Typed(d.iamKeysRevoke)})
	r.Register(Method{Name: "iam.permissions.list", Handle: Typed(d.iamPermissionsList)})
}

// iamTenantsCreate is the handler of iam.tenants.create.
func (d *deps) iamTenantsCreate(ctx context.Context, c *Call, in contract.TenantCreateInput) (any, error) {
	t, err := iam.CreateTenant(ctx, c.Q, in.ID, d.now())
	if err != nil {
		return nil, err
	}
	return audited{out: tenantFrom(t), target: t.ID}, nil
}

// iamTenantsList is the handler of iam.tenants.list.
func (d *deps) iamTenantsList(ctx context.Context, c *Call, _ struct{}) (any, error) {
	ts, err := iam.ListTenants(ctx, c.Q)
	return contract.TenantList{Items: sliceOf(ts, tenantFrom)}, err
}

// iamKeysCreate is the handler of iam.keys.create.
func (d *deps) iamKeysCreate(ctx context.Context, c *Call, in contract.KeyCreateInput) (any, error) {
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
	k, token, err := iam.CreateServiceKey(ctx, c.Q, d.registry.Catalogue(), c.Principal, iam.NewServiceKey{
		TenantID: in.TenantID, Name: in.Name, Grants: grants, TTL: time.Duration(in.TTLSeconds) * time.Second,
	}, d.now())
	if err != nil {
		return nil, err
	}
	return audited{out: contract.KeyCreated{Key: keyFrom(k), Token: token}, target: k.ID}, nil
}

// iamKeysList is the handler of iam.keys.list.
func (d *deps) iamKeysList(ctx context.Context, c *Call, in TenantInput) (any, error) {
	ks, err := iam.ListKeys(ctx, c.Q, in.TenantID)
	return contract.KeyList{Items: sliceOf(ks, keyFrom)}, err
}

// iamKeysRevoke is the handler of iam.keys.revoke.
func (d *deps) iamKeysRevoke(ctx context.Context, c *Call, in contract.KeyRevokeInput) (any, error) {
	if in.ID == "" {
		return nil, cubefleet.Invalid("id", "id (the key's id, key_...) is required")
	}
	if err := iam.RevokeKey(ctx, c.Q, in.TenantID, in.ID, d.now()); err != nil {
		return nil, err
	}
	return audited{out: contract.KeyRevoked{ID: in.ID, Revoked: true}, target: in.ID}, nil
}

// iamPermissionsList is the handler of iam.permissions.list. Whoever may create keys in a
// tenant may read what they can grant (it decides iam:keys:create).
func (d *deps) iamPermissionsList(ctx context.Context, c *Call, in TenantInput) (any, error) {
	return contract.PermissionList{Items: sliceOf(d.registry.Catalogue().Grantable(in.TenantID), permissionFrom)}, nil
}
