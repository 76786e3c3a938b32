package iam

import (
	"sort"
	"strings"
)

// Scope forms. A tenant scope is "tenant/<id>"; "tenant/*" (root-tenant principals only) covers
// every tenant.
const (
	ScopeFleet      = "compute-fleet/global"
	ScopeAnyTenant  = "tenant/*"
	scopeTenantPfx  = "tenant/"
	PermFleetAdmin  = "compute:fleet:admin"
	RootTenant      = "root"
	scopeKindTenant = "tenant/<id>"
)

// TenantScope returns the scope "tenant/<id>".
func TenantScope(tenantID string) string { return scopeTenantPfx + tenantID }

// PermissionInfo is one entry of the permission catalogue: the permission, the form of the
// scope it is granted on, whether only root-tenant principals may hold it, and the API methods
// that decide it.
type PermissionInfo struct {
	Permission string   `json:"permission"`
	Scope      string   `json:"scope"`
	RootOnly   bool     `json:"rootOnly,omitempty"`
	Methods    []string `json:"methods"`
}

// ComputeKinds are the compute object kinds as the API names them, in the fleet document's
// order.
var computeKinds = []string{"sites", "providerAccounts", "pools", "ownerQuotas", "offers", "flavors", "sandboxTemplates"}

// Catalogue returns every permission the API decides, sorted by permission (../shared/DESIGN.md,
// "Permission catalogue"). `cubefleet keys permissions` prints it.
func Catalogue() []PermissionInfo {
	out := []PermissionInfo{
		{Permission: PermFleetAdmin, Scope: ScopeFleet, RootOnly: true, Methods: []string{"fleet.export", "fleet.plan", "fleet.apply", "fleet.status"}},
		{Permission: "iam:tenants:create", Scope: TenantScope(RootTenant), RootOnly: true, Methods: []string{"iam.tenants.create"}},
		{Permission: "iam:tenants:list", Scope: TenantScope(RootTenant), RootOnly: true, Methods: []string{"iam.tenants.list"}},
		{Permission: "iam:keys:create", Scope: scopeKindTenant, Methods: []string{"iam.keys.create", "iam.permissions.list"}},
		{Permission: "iam:keys:list", Scope: scopeKindTenant, Methods: []string{"iam.keys.list"}},
		{Permission: "iam:keys:revoke", Scope: scopeKindTenant, Methods: []string{"iam.keys.revoke"}},
		{Permission: "audit:read", Scope: scopeKindTenant, Methods: []string{"audit.list"}},
		{Permission: "compute:secrets:create", Scope: scopeKindTenant, Methods: []string{"secrets.create"}},
		{Permission: "compute:secrets:update", Scope: scopeKindTenant, Methods: []string{"secrets.update"}},
		{Permission: "compute:secrets:list", Scope: scopeKindTenant, Methods: []string{"secrets.list"}},
		{Permission: "compute:secrets:delete", Scope: scopeKindTenant, Methods: []string{"secrets.delete"}},
		{Permission: "events:read", Scope: TenantScope(RootTenant), RootOnly: true, Methods: []string{"events.list"}},
	}
	// The node registry's permissions (nodes:<verb> on tenant/root): platform operators only.
	// The internal nodes routes decide the same permissions for API keys (GET list/one,
	// isolation, labels, delete).
	// nodes:join-token covers every join token method: who may make tokens may see and revoke
	// them.
	for _, n := range []struct {
		verb    string
		methods []string
	}{
		{"list", []string{"nodes.list"}}, {"get", []string{"nodes.get"}}, {"cordon", []string{"nodes.cordon"}},
		{"uncordon", []string{"nodes.uncordon"}}, {"label", []string{"nodes.label"}}, {"drain", []string{"nodes.drain"}},
		{"delete", []string{"nodes.delete"}},
		{"join-token", []string{"nodes.joinTokens.create", "nodes.joinTokens.list", "nodes.joinTokens.revoke"}},
	} {
		out = append(out, PermissionInfo{Permission: "nodes:" + n.verb, Scope: TenantScope(RootTenant), RootOnly: true, Methods: n.methods})
	}
	for _, kind := range computeKinds {
		last := "delete"
		if kind == "pools" {
			last = "archive"
		}
		for _, verb := range []string{"create", "get", "list", "update", last} {
			if kind == "sites" && verb == "update" {
				continue // a site has nothing to change (kind and region are fixed)
			}
			out = append(out, PermissionInfo{
				Permission: "compute:" + kind + ":" + verb,
				Scope:      scopeKindTenant,
				Methods:    []string{"compute." + kind + "." + verb},
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Permission < out[j].Permission })
	return out
}

// lookup returns the catalogue entry of permission, or of any permission a wildcard ("x:y:*")
// covers.
func lookup(permission string) (PermissionInfo, bool) {
	for _, p := range Catalogue() {
		if p.Permission == permission || permMatches(permission, p.Permission) {
			return p, true
		}
	}
	return PermissionInfo{}, false
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
