package iam

import (
	"strings"
)

// Scope forms. A tenant scope is "tenant/<id>"; "tenant/*" (root-tenant principals only) covers
// every tenant.
const (
	ScopeFleet     = "compute-fleet/global"
	ScopeAnyTenant = "tenant/*"
	// ScopeFormTenant is the catalogue's scope form of a tenant-scoped permission: it is granted
	// on tenant/<id> (a tenant's own id, or tenant/* from the root tenant).
	ScopeFormTenant = "tenant/<id>"
	scopeTenantPfx  = "tenant/"
	PermFleetAdmin  = "compute:fleet:admin"
	RootTenant      = "root"
)

// TenantScope returns the scope "tenant/<id>".
func TenantScope(tenantID string) string { return scopeTenantPfx + tenantID }

// PermissionInfo is one entry of the permission catalogue: the permission, the form of the
// scope it is granted on (ScopeFormTenant, or one exact scope such as ScopeFleet or
// tenant/root), whether only root-tenant principals may hold it, and the API methods that
// decide it.
type PermissionInfo struct {
	Permission string   `json:"permission"`
	Scope      string   `json:"scope"`
	RootOnly   bool     `json:"rootOnly,omitempty"`
	Methods    []string `json:"methods"`
}

// Catalogue is the permission catalogue: every permission the API decides, sorted by
// permission (docs/iam.md, "Keys and grants"). The API's method table builds it
// from what each method declares (api.Catalogue); iam reads it where it checks grants
// (CreateServiceKey, Bootstrap), and `cubefleet keys permissions` prints it.
type Catalogue []PermissionInfo

// Lookup returns the entry of permission, or, for a wildcard ("x:y:*"), of the first
// permission it covers.
func (c Catalogue) Lookup(permission string) (PermissionInfo, bool) {
	for _, p := range c {
		if p.Permission == permission || permMatches(permission, p.Permission) {
			return p, true
		}
	}
	return PermissionInfo{}, false
}

// Grantable returns the entries a principal of tenantID can be granted: all of them in the root
// tenant, the ones that are not RootOnly elsewhere.
func (c Catalogue) Grantable(tenantID string) Catalogue {
	out := Catalogue{}
	for _, p := range c {
		if p.RootOnly && tenantID != RootTenant {
			continue
		}
		out = append(out, p)
	}
	return out
}

// AdminGrants are the grants of the bootstrap administrator: every catalogued permission, on
// every tenant (tenant/*) where the permission is tenant-scoped.
func (c Catalogue) AdminGrants() []Grant {
	var out []Grant
	for _, p := range c {
		scope := p.Scope
		if scope == ScopeFormTenant {
			scope = ScopeAnyTenant
		}
		out = append(out, Grant{Permission: p.Permission, Scope: scope})
	}
	return out
}

// permMatches reports whether a granted permission (possibly ending in the "*" verb) covers
// the permission asked for.
func permMatches(granted, asked string) bool {
	if granted == asked {
		return true
	}
	if prefix, ok := strings.CutSuffix(granted, ":*"); ok {
		rest, ok := strings.CutPrefix(asked, prefix+":")
		return ok && rest != "" && !strings.Contains(rest, ":")
	}
	return false
}

// scopeMatches reports whether a granted scope covers the scope asked for.
func scopeMatches(granted, asked string) bool {
	if granted == asked {
		return true
	}
	return granted == ScopeAnyTenant && strings.HasPrefix(asked, scopeTenantPfx)
}
