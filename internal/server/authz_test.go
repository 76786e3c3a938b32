package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// TestEveryMethodDecidesItsPermission walks the method table, so a method added later is
// covered without touching this test: no key is 401, a key without the permission is 403 and
// leaves a "forbidden" audit row, and a key holding exactly the permission gets past the
// decision. It also checks that the catalogue lists every method under the permission it
// decides.
func TestEveryMethodDecidesItsPermission(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		methods := e.srv.api.Methods()
		if len(methods) < 40 {
			t.Fatalf("only %d methods registered", len(methods))
		}
		catalogue := e.srv.api.Catalogue()
		// A key that holds one unrelated permission: every method must refuse it.
		other, otherPrincipal := e.key(iam.RootTenant, "unrelated", "audit:read@tenant/globex")
		input := json.RawMessage(`{"tenantId":"acme"}`)
		for _, m := range methods {
			t.Run(m.Name, func(t *testing.T) {
				e := e.sub(t)
				status, body := e.post("", m.Name, input)
				if status != http.StatusUnauthorized || errCode(t, body) != cubefleet.CodeUnauthenticated {
					t.Errorf("no key: %d %s, want 401 UNAUTHENTICATED", status, body)
				}
				status, body = e.post("not-a-key", m.Name, input)
				if status != http.StatusUnauthorized {
					t.Errorf("bad key: %d %s, want 401", status, body)
				}

				status, body = e.post(other, m.Name, input)
				if status != http.StatusForbidden || errCode(t, body) != cubefleet.CodeForbidden {
					t.Fatalf("key without the permission: %d %s, want 403 FORBIDDEN", status, body)
				}
				var n int
				if err := e.db.QueryRow(`SELECT count(*) FROM audit_log WHERE method = $1 AND outcome = 'forbidden' AND principal_id = $2`,
					m.Name, otherPrincipal).Scan(&n); err != nil || n != 1 {
					t.Errorf("forbidden audit rows = %d (%v), want 1", n, err)
				}

				d, err := m.Decide(input)
				if err != nil {
					t.Fatalf("Decide: %v", err)
				}
				if !slices.ContainsFunc(catalogue, func(p iam.PermissionInfo) bool {
					return p.Permission == d.Permission && slices.Contains(p.Methods, m.Name)
				}) {
					t.Errorf("the catalogue does not list %s under %s", m.Name, d.Permission)
				}
				right, _ := e.key(iam.RootTenant, "right", d.Permission+"@"+d.Scope)
				status, body = e.post(right, m.Name, input)
				if status == http.StatusUnauthorized || status == http.StatusForbidden {
					t.Errorf("key holding %s@%s: %d %s", d.Permission, d.Scope, status, body)
				}
			})
		}
		// And every catalogued method exists.
		for _, p := range catalogue {
			for _, name := range p.Methods {
				if _, ok := e.srv.api.Lookup(name); !ok {
					t.Errorf("catalogue lists %s under %s, but no such method is registered", name, p.Permission)
				}
			}
		}
	})
}

func errCode(t *testing.T, body []byte) cubefleet.Code {
	t.Helper()
	var b struct {
		Error struct {
			Code    cubefleet.Code `json:"code"`
			Message string         `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return b.Error.Code
}

// TestTenantKeyStaysInItsTenant proves that a customer's key can neither read nor change
// another tenant's objects, secrets, keys or audit log.
func TestTenantKeyStaysInItsTenant(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		var site obj
		e.must(e.admin, "compute.sites.create", map[string]any{"tenantId": "globex", "kind": "shared", "region": "eu-central"}, &site)
		e.must(e.admin, "secrets.create", map[string]any{"tenantId": "globex", "name": "db", "value": "globex-password"}, nil)
		var mine obj
		e.must(e.admin, "compute.sites.create", map[string]any{"tenantId": "acme", "kind": "shared", "region": "eu-west"}, &mine)

		acme, _ := e.key("acme", "acme-ops", "compute:sites:*@tenant/acme", "compute:pools:*@tenant/acme",
			"compute:secrets:*@tenant/acme", "iam:keys:*@tenant/acme", "audit:read@tenant/acme")

		// Naming the other tenant is refused by the permission check.
		for _, c := range []struct {
			method string
			in     map[string]any
		}{
			{"compute.sites.get", map[string]any{"tenantId": "globex", "id": site.id()}},
			{"compute.sites.list", map[string]any{"tenantId": "globex"}},
			{"compute.sites.delete", map[string]any{"tenantId": "globex", "id": site.id()}},
			{"compute.pools.create", map[string]any{"tenantId": "globex", "siteId": site.id(), "class": "vps-host"}},
			{"secrets.list", map[string]any{"tenantId": "globex"}},
			{"secrets.delete", map[string]any{"tenantId": "globex", "name": "db"}},
			{"iam.keys.list", map[string]any{"tenantId": "globex"}},
			{"audit.list", map[string]any{"tenantId": "globex"}},
		} {
			e.mustFail(acme, c.method, c.in, cubefleet.CodeForbidden)
		}
		// Naming its own tenant with the other tenant's object finds nothing.
		e.mustFail(acme, "compute.sites.get", map[string]any{"tenantId": "acme", "id": site.id()}, cubefleet.CodeNotFound)
		e.mustFail(acme, "compute.sites.delete", map[string]any{"tenantId": "acme", "id": site.id()}, cubefleet.CodeNotFound)
		e.mustFail(acme, "secrets.delete", map[string]any{"tenantId": "acme", "name": "db"}, cubefleet.CodeNotFound)
		// Referencing the other tenant's site from its own pool is refused.
		ce := e.mustFail(acme, "compute.pools.create", map[string]any{"tenantId": "acme", "siteId": site.id(), "class": "vps-host"}, cubefleet.CodeInvalidInput)
		if ce.Details["path"] != "siteId" {
			t.Errorf("path = %v, want siteId", ce.Details["path"])
		}
		// Its listing shows only its own objects.
		var list struct{ Items []obj }
		e.must(acme, "compute.sites.list", map[string]any{"tenantId": "acme"}, &list)
		if len(list.Items) != 1 || list.Items[0].id() != mine.id() {
			t.Errorf("acme's sites = %v, want only %s", list.Items, mine.id())
		}
		// It cannot give a key a grant on another tenant.
		e.mustFail(acme, "iam.keys.create", map[string]any{"tenantId": "acme", "name": "x", "grants": []string{"compute:sites:get@tenant/globex"}}, cubefleet.CodeInvalidInput)
		// globex's site is still there.
		e.must(e.admin, "compute.sites.get", map[string]any{"tenantId": "globex", "id": site.id()}, nil)
	})
}
