package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// modules are the migrations the method table's handlers read and write.
var modules = []store.Module{store.LeaseModule, iam.Module, audit.Module, compute.Module, secrets.Module, fleet.Module, events.Module, nodestore.Module}

// table is the API's method table over a real database, with the tenants root, acme and globex
// and the bootstrap administrator.
type table struct {
	t     *testing.T
	db    *store.DB
	r     *api.Registry
	admin *iam.Principal
}

func newTable(t *testing.T, db *store.DB) *table {
	t.Helper()
	ctx := context.Background()
	box, err := secrets.NewBox(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	st, err := nodestore.New(nodestore.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := nodes.New(ctx, nodes.Config{Store: st, JoinTokens: st})
	if err != nil {
		t.Fatal(err)
	}
	r := api.New(api.Config{DB: db, Compute: &compute.Service{Names: fleet.Names{}}, Secrets: box, Nodes: reg, NodeStore: st})
	_, token, err := iam.Bootstrap(ctx, db, r.Catalogue(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := iam.Authenticate(ctx, db, token, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tb := &table{t: t, db: db, r: r, admin: admin}
	for _, id := range []string{"acme", "globex"} {
		tb.must(admin, "iam.tenants.create", map[string]any{"id": id}, nil)
	}
	return tb
}

// call runs method as p with in (a JSON string, or a value to marshal) and decodes the result
// into out (when not nil).
func (tb *table) call(p *iam.Principal, method string, in, out any) error {
	tb.t.Helper()
	raw, ok := in.(string)
	if !ok {
		b, err := json.Marshal(in)
		if err != nil {
			tb.t.Fatal(err)
		}
		raw = string(b)
	}
	res, err := tb.r.Call(context.Background(), p, "req-"+method, method, json.RawMessage(raw))
	if err != nil || out == nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		tb.t.Fatal(err)
	}
	return json.Unmarshal(b, out)
}

func (tb *table) must(p *iam.Principal, method string, in, out any) {
	tb.t.Helper()
	if err := tb.call(p, method, in, out); err != nil {
		tb.t.Fatalf("%s %v: %v", method, in, err)
	}
}

func (tb *table) mustFail(p *iam.Principal, method string, in any, code cubefleet.Code) *cubefleet.Error {
	tb.t.Helper()
	err := tb.call(p, method, in, nil)
	var ce *cubefleet.Error
	if !errors.As(err, &ce) || ce.Code != code {
		tb.t.Fatalf("%s %v: got %v, want %s", method, in, err, code)
	}
	return ce
}

// key creates a service account in tenant holding grants (PERMISSION@SCOPE) and returns it as
// an authenticated principal.
func (tb *table) key(tenant, name string, grants ...string) *iam.Principal {
	tb.t.Helper()
	var out contract.KeyCreated
	tb.must(tb.admin, "iam.keys.create", map[string]any{"tenantId": tenant, "name": name, "grants": grants}, &out)
	p, err := iam.Authenticate(context.Background(), tb.db, out.Token, time.Now())
	if err != nil {
		tb.t.Fatal(err)
	}
	return p
}

// rows returns the audit rows of method.
func (tb *table) rows(method string) []audit.Entry {
	tb.t.Helper()
	rows, err := tb.db.Query(`SELECT tenant_id, principal_id, permission, scope, outcome, target, request_id FROM audit_log WHERE method = $1 ORDER BY id`, method)
	if err != nil {
		tb.t.Fatal(err)
	}
	defer rows.Close()
	var out []audit.Entry
	for rows.Next() {
		e := audit.Entry{Method: method}
		if err := rows.Scan(&e.TenantID, &e.PrincipalID, &e.Permission, &e.Scope, &e.Outcome, &e.Target, &e.RequestID); err != nil {
			tb.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// rowsOf returns the audit rows of method written for principal.
func (tb *table) rowsOf(method, principal string) []audit.Entry {
	tb.t.Helper()
	var out []audit.Entry
	for _, r := range tb.rows(method) {
		if r.PrincipalID == principal {
			out = append(out, r)
		}
	}
	return out
}

func (tb *table) count(query string, args ...any) int {
	tb.t.Helper()
	var n int
	if err := tb.db.QueryRow(query, args...).Scan(&n); err != nil {
		tb.t.Fatal(err)
	}
	return n
}

// TestMissingPermissionIsRefusedAndAudited checks every scope form, reads and writes: a caller
// without the permission gets FORBIDDEN naming it, one forbidden audit row records the refusal
// (method, permission, scope, tenant, caller, request id), and nothing else is written.
func TestMissingPermissionIsRefusedAndAudited(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		tb := newTable(t, db)
		other := tb.key(iam.RootTenant, "unrelated", "audit:read@tenant/globex")
		for _, c := range []struct {
			method, in, permission, scope, tenant string
		}{
			{"compute.sites.create", `{"tenantId":"acme","kind":"shared","region":"eu-central"}`, "compute:sites:create", "tenant/acme", "acme"},
			{"compute.sites.list", `{"tenantId":"acme"}`, "compute:sites:list", "tenant/acme", "acme"},
			{"fleet.export", `{"tenantId":"acme"}`, "compute:fleet:admin", "compute-fleet/global", "acme"},
			{"iam.tenants.create", `{"id":"initech"}`, "iam:tenants:create", "tenant/root", "root"},
		} {
			ce := tb.mustFail(other, c.method, c.in, cubefleet.CodeForbidden)
			if ce.Details["permission"] != c.permission || ce.Details["scope"] != c.scope {
				t.Errorf("%s: refusal details %v, want %s on %s", c.method, ce.Details, c.permission, c.scope)
			}
			rows := tb.rowsOf(c.method, other.ID)
			want := audit.Entry{Method: c.method, TenantID: c.tenant, PrincipalID: other.ID, Permission: c.permission, Scope: c.scope,
				Outcome: audit.OutcomeForbidden, RequestID: "req-" + c.method}
			if len(rows) != 1 || rows[0] != want {
				t.Errorf("%s: audit rows %+v, want %+v", c.method, rows, want)
			}
		}
		if n := tb.count(`SELECT count(*) FROM compute_objects`); n != 0 {
			t.Errorf("refused calls left %d objects", n)
		}
		if ok, _ := iam.TenantExists(context.Background(), db, "initech"); ok {
			t.Error("a refused iam.tenants.create made the tenant")
		}
	})
}

// TestWriteRunsInOneTransactionWithItsAuditRow checks that a write and its audit row commit
// together, and that a handler failing after it wrote leaves neither.
func TestWriteRunsInOneTransactionWithItsAuditRow(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		tb := newTable(t, db)
		var site struct {
			ID string `json:"id"`
		}
		tb.must(tb.admin, "compute.sites.create", map[string]any{"tenantId": "acme", "kind": "shared", "region": "eu-central"}, &site)
		rows := tb.rows("compute.sites.create")
		if len(rows) != 1 || rows[0].Outcome != audit.OutcomeOK || rows[0].Target != site.ID || rows[0].TenantID != "acme" ||
			rows[0].PrincipalID != tb.admin.ID || rows[0].RequestID != "req-compute.sites.create" {
			t.Fatalf("audit rows of a create: %+v (site %s)", rows, site.ID)
		}

		// A handler that writes, then fails: its write and its audit row roll back together.
		svc := &compute.Service{}
		for _, fail := range []error{
			cubefleet.Errorf(cubefleet.CodeConflict, "changed my mind"),
			errors.New("disk on fire"),
		} {
			name := "test.fail." + strings.ReplaceAll(fmt.Sprint(cubefleet.ErrorCode(fail)), "_", "")
			tb.r.Register(api.Method{Name: name, Permission: "compute:sites:create", Scope: api.OnTenant, Write: true,
				Handle: func(ctx context.Context, c *api.Call, in json.RawMessage) (any, error) {
					if _, err := svc.Create(ctx, c.Q, compute.KindSite, c.Principal.ID, in); err != nil {
						return nil, err
					}
					return nil, fail
				}})
			before := tb.count(`SELECT count(*) FROM compute_objects`)
			err := tb.call(tb.admin, name, map[string]any{"tenantId": "acme", "kind": "dedicated", "region": "eu-west"}, nil)
			if cubefleet.ErrorCode(err) != cubefleet.ErrorCode(fail) {
				t.Fatalf("%s = %v, want %v", name, err, fail)
			}
			if after := tb.count(`SELECT count(*) FROM compute_objects`); after != before {
				t.Errorf("%s: a failed write left %d objects behind", name, after-before)
			}
			if rows := tb.rows(name); len(rows) != 0 {
				t.Errorf("%s: a failed write left audit rows %+v", name, rows)
			}
		}
	})
}

// TestUnauthenticatedCallsAreRefused checks every method: a call without a principal is
// UNAUTHENTICATED before anything runs, and costs no audit row.
func TestUnauthenticatedCallsAreRefused(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		tb := newTable(t, db)
		before := tb.count(`SELECT count(*) FROM audit_log`)
		for _, m := range tb.r.Methods() {
			tb.mustFail(nil, m.Name, `{"tenantId":"acme"}`, cubefleet.CodeUnauthenticated)
		}
		if after := tb.count(`SELECT count(*) FROM audit_log`); after != before {
			t.Errorf("unauthenticated calls wrote %d audit rows", after-before)
		}
	})
}

// TestUnknownTenantIsNotFoundOnlyForAllowedCallers checks that a caller allowed on every tenant
// learns that a tenant does not exist, and one that is not allowed on it learns nothing but
// FORBIDDEN.
func TestUnknownTenantIsNotFoundOnlyForAllowedCallers(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		tb := newTable(t, db)
		for _, m := range []string{"compute.sites.list", "secrets.list", "fleet.export", "audit.list"} {
			tb.mustFail(tb.admin, m, `{"tenantId":"nobody"}`, cubefleet.CodeNotFound)
		}
		acme := tb.key("acme", "acme-ops", "compute:sites:*@tenant/acme", "compute:secrets:*@tenant/acme")
		for _, m := range []string{"compute.sites.list", "secrets.list"} {
			tb.mustFail(acme, m, `{"tenantId":"nobody"}`, cubefleet.CodeForbidden)
		}
		// A missing tenantId is INVALID_INPUT naming the field, for allowed and refused callers.
		for _, p := range []*iam.Principal{tb.admin, acme} {
			if ce := tb.mustFail(p, "compute.sites.list", `{}`, cubefleet.CodeInvalidInput); ce.Details["path"] != "tenantId" {
				t.Errorf("no tenantId: path %v", ce.Details["path"])
			}
		}
	})
}

// TestTypedInputErrorsNameTheField checks that strict decoding of a method's input names the
// field that is wrong (wrong type, unknown field) in details.path.
func TestTypedInputErrorsNameTheField(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		tb := newTable(t, db)
		for _, c := range []struct{ method, in, path string }{
			{"iam.keys.create", `{"tenantId":"acme","name":7,"grants":[]}`, "name"},
			{"iam.keys.create", `{"tenantId":"acme","name":"ci","grants":"compute:sites:get@tenant/acme"}`, "grants"},
			{"audit.list", `{"tenantId":"acme","limit":"ten"}`, "limit"},
			{"secrets.list", `{"tenantId":"acme","nmae":"db"}`, "nmae"},
			{"compute.sites.get", `{"tenantId":"acme","id":"site_01JAAAAAAAAAAAAAAAAAAAAAAA","revision":"2"}`, "revision"},
			{"compute.pools.create", `{"tenantId":"acme","siteId":5,"class":"vps-host"}`, "siteId"},
			{"fleet.plan", `{"tenantId":"acme","config":{},"prune":"yes"}`, "prune"},
			{"nodes.list", `{"state":["Ready"]}`, "state"},
		} {
			ce := tb.mustFail(tb.admin, c.method, c.in, cubefleet.CodeInvalidInput)
			if ce.Details["path"] != c.path || !strings.Contains(ce.Message, c.path) {
				t.Errorf("%s %s: %v (path %v), want the path %s", c.method, c.in, ce.Message, ce.Details["path"], c.path)
			}
		}
	})
}

// TestEveryMethodDeclaresAPermission walks the method table, so a method added later is covered
// without touching this test: every method declares a permission and a scope form, the
// catalogue lists it under that permission, a caller without it is refused FORBIDDEN (and
// audited), and a caller holding exactly it gets past the decision.
func TestEveryMethodDeclaresAPermission(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		tb := newTable(t, db)
		methods := tb.r.Methods()
		if len(methods) < 40 {
			t.Fatalf("only %d methods registered", len(methods))
		}
		catalogue := map[string]iam.PermissionInfo{}
		for _, p := range tb.r.Catalogue() {
			catalogue[p.Permission] = p
		}
		other := tb.key(iam.RootTenant, "unrelated", "audit:read@tenant/globex")
		in := `{"tenantId":"acme"}`
		for _, m := range methods {
			if m.Permission == "" || m.Scope == 0 {
				t.Errorf("%s declares no permission", m.Name)
				continue
			}
			if p, ok := catalogue[m.Permission]; !ok || !slices.Contains(p.Methods, m.Name) {
				t.Errorf("the catalogue does not list %s under %s", m.Name, m.Permission)
			}
			tb.mustFail(other, m.Name, in, cubefleet.CodeForbidden)
			if rows := tb.rowsOf(m.Name, other.ID); len(rows) != 1 || rows[0].Outcome != audit.OutcomeForbidden {
				t.Errorf("%s: audit rows after a refusal %+v", m.Name, rows)
			}
			d, err := m.Decide(json.RawMessage(in))
			if err != nil {
				t.Fatalf("%s: Decide: %v", m.Name, err)
			}
			if d.Permission != m.Permission {
				t.Errorf("%s decides %s, declares %s", m.Name, d.Permission, m.Permission)
			}
			right := tb.key(iam.RootTenant, "right", d.Permission+"@"+d.Scope)
			if err := tb.call(right, m.Name, in, nil); cubefleet.IsCode(err, cubefleet.CodeForbidden) || cubefleet.IsCode(err, cubefleet.CodeUnauthenticated) {
				t.Errorf("%s as a key holding %s@%s: %v", m.Name, d.Permission, d.Scope, err)
			}
		}
	})
}

// TestCatalogueFollowsTheDeclarations checks how the catalogue is derived: one entry per
// permission, its methods in registration order, the scope form and root-only flag of the
// scope form the methods declare.
func TestCatalogueFollowsTheDeclarations(t *testing.T) {
	handle := func(context.Context, *api.Call, json.RawMessage) (any, error) { return nil, nil }
	r := api.NewRegistry(nil, nil, nil)
	r.Register(api.Method{Name: "b.two", Permission: "x:b", Scope: api.OnTenant, Handle: handle})
	r.Register(api.Method{Name: "a.one", Permission: "x:a", Scope: api.OnFleet, Handle: handle})
	r.Register(api.Method{Name: "b.one", Permission: "x:b", Scope: api.OnTenant, Handle: handle})
	r.Register(api.Method{Name: "c.one", Permission: "x:c", Scope: api.OnRoot, Handle: handle})
	want := iam.Catalogue{
		{Permission: "x:a", Scope: "compute-fleet/global", RootOnly: true, Methods: []string{"a.one"}},
		{Permission: "x:b", Scope: "tenant/<id>", Methods: []string{"b.two", "b.one"}},
		{Permission: "x:c", Scope: "tenant/root", RootOnly: true, Methods: []string{"c.one"}},
	}
	if got := r.Catalogue(); !reflect.DeepEqual(got, want) {
		t.Errorf("catalogue\n%+v\nwant\n%+v", got, want)
	}
}

// TestFleetApplyAuditsEveryCallAndItself applies the example document through the method
// table: one ok row per call (the call's own permission on the tenant, the object it made) and
// one for fleet.apply, all with the request id; a caller holding only compute:fleet:admin is
// refused at the first call, audited for that call and for fleet.apply, and nothing is written.
func TestFleetApplyAuditsEveryCallAndItself(t *testing.T) {
	doc := `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu-central"}],
		"pools":[{"name":"vps-fra","site":"fra","class":"vps-host","ownerQuota":{"gpu":8},"offers":[{"tenant":"acme","quota":{"vcpu":64}}]}],
		"flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":2,"memoryGiB":4,"diskGiB":40}]}`
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		tb := newTable(t, db)
		ci := tb.key(iam.RootTenant, "ci", "compute:fleet:admin@compute-fleet/global")
		in := fmt.Sprintf(`{"tenantId":"root","config":%s}`, doc)
		tb.mustFail(ci, "fleet.apply", in, cubefleet.CodeForbidden)
		if rows := tb.rowsOf("compute.sites.create", ci.ID); len(rows) != 1 || rows[0].Outcome != audit.OutcomeForbidden {
			t.Errorf("the refused call's audit rows: %+v", rows)
		}
		if rows := tb.rowsOf("fleet.apply", ci.ID); len(rows) != 1 || rows[0].Outcome != audit.OutcomeForbidden || rows[0].Permission != iam.PermFleetAdmin {
			t.Errorf("the refused apply's audit rows: %+v", rows)
		}
		if n := tb.count(`SELECT count(*) FROM compute_objects`); n != 0 {
			t.Fatalf("a refused apply left %d objects", n)
		}

		var res fleet.ApplyResult
		tb.must(tb.admin, "fleet.apply", in, &res)
		if res.Applied != 5 {
			t.Fatalf("applied %d calls, want 5", res.Applied)
		}
		for _, c := range res.Plan.Calls {
			info, verb, _ := compute.ParseMethod(c.Method)
			rows := tb.rows(c.Method)
			found := false
			for _, r := range rows {
				if r.Outcome == audit.OutcomeOK && r.PrincipalID == tb.admin.ID && r.Permission == info.Permission(verb) && r.Scope == "tenant/root" &&
					r.TenantID == "root" && r.RequestID == "req-fleet.apply" && r.Target != "" {
					found = true
				}
			}
			if !found {
				t.Errorf("no ok audit row for %s %s: %+v", c.Method, c.Name, rows)
			}
		}
		rows := tb.rows("fleet.apply")
		last := rows[len(rows)-1]
		if last.Outcome != audit.OutcomeOK || last.Target != "root" || last.Scope != iam.ScopeFleet || last.RequestID != "req-fleet.apply" {
			t.Errorf("fleet.apply's own row: %+v", last)
		}
	})
}
