package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/controlplane"
)

// kindCase is what the CRUD test needs to know about one kind.
type kindCase struct {
	create   func(i int) map[string]any // a valid create input (without tenantId), distinct per i
	update   map[string]any             // a valid change of updatable fields
	fixed    string                     // a fixed field, changed in fixedTo
	fixedTo  any
	referrer func(target obj) (method string, in map[string]any) // an object that uses target; nil: none can
}

type fixture struct {
	site, account, pool, flavor obj
}

func (e *testEnv) fixture() fixture {
	e.t.Helper()
	var f fixture
	for _, name := range []string{"hz", "tok"} { // the secrets the objects below reference
		e.must(e.admin, "secrets.create", map[string]any{"tenantId": "root", "name": name, "value": "v-" + name}, nil)
	}
	e.must(e.admin, "compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}, &f.site)
	e.must(e.admin, "compute.providerAccounts.create", map[string]any{"tenantId": "root", "name": "pa-base", "provider": "hetzner-cloud", "config": map[string]any{"token": "secret://hz"}}, &f.account)
	e.must(e.admin, "compute.pools.create", map[string]any{"tenantId": "root", "siteId": f.site.id(), "class": "vps-host"}, &f.pool)
	e.must(e.admin, "compute.flavors.create", map[string]any{"tenantId": "root", "poolId": f.pool.id(), "name": "f-base", "vcpu": 1, "memoryGiB": 1, "diskGiB": 10}, &f.flavor)
	for _, t := range []string{"initech", "umbrella"} {
		e.must(e.admin, "iam.tenants.create", map[string]any{"id": t}, nil)
	}
	return f
}

func kindCases(f fixture) map[string]kindCase {
	offerTenants := []string{"acme", "globex", "initech", "umbrella"}
	quotaResources := []string{"gpu", "vcpu", "memoryGiB", "sandboxes"}
	return map[string]kindCase{
		compute.KindSite: {
			create: func(i int) map[string]any {
				return map[string]any{"kind": "dedicated", "region": fmt.Sprintf("r%d", i)}
			},
			referrer: func(target obj) (string, map[string]any) {
				return "compute.pools.create", map[string]any{"siteId": target.id(), "class": "vps-host"}
			},
		},
		compute.KindProviderAccount: {
			create: func(i int) map[string]any {
				return map[string]any{"name": fmt.Sprintf("pa-%d", i), "provider": "ionos-cloud", "config": map[string]any{"password": "secret://hz", "location": "de/fra"}}
			},
			update:  map[string]any{"config": map[string]any{"password": "secret://tok", "location": "de/txl"}},
			fixed:   "provider",
			fixedTo: "hetzner-cloud",
			referrer: func(target obj) (string, map[string]any) {
				return "compute.pools.create", map[string]any{"siteId": f.site.id(), "class": "provider", "providerAccountId": target.id()}
			},
		},
		compute.KindPool: {
			create: func(i int) map[string]any {
				return map[string]any{"siteId": f.site.id(), "class": "vps-host", "gpuModel": "L40S", "policy": map[string]any{"disruptionBudget": 0.1}}
			},
			update:  map[string]any{"gpuModel": "H100", "policy": map[string]any{"disruptionBudget": 0.25}},
			fixed:   "class",
			fixedTo: "provider",
			referrer: func(target obj) (string, map[string]any) {
				return "compute.flavors.create", map[string]any{"poolId": target.id(), "name": "ref", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}
			},
		},
		compute.KindOwnerQuota: {
			create: func(i int) map[string]any {
				return map[string]any{"poolId": f.pool.id(), "resource": quotaResources[i], "max": 8}
			},
			update:  map[string]any{"max": 16},
			fixed:   "resource",
			fixedTo: "diskGiB",
		},
		compute.KindOffer: {
			create: func(i int) map[string]any {
				return map[string]any{"poolId": f.pool.id(), "toTenantId": offerTenants[i], "quota": map[string]any{"vcpu": 64, "gpu": 2}, "priority": 5}
			},
			update:  map[string]any{"priority": 9, "quota": map[string]any{"vcpu": 32}},
			fixed:   "toTenantId",
			fixedTo: "umbrella",
		},
		compute.KindFlavor: {
			create: func(i int) map[string]any {
				return map[string]any{"poolId": f.pool.id(), "name": fmt.Sprintf("g1.s%d", i), "vcpu": 2, "memoryGiB": 4, "diskGiB": 40}
			},
			update:  map[string]any{"vcpu": 4, "memoryGiB": 8},
			fixed:   "gpu",
			fixedTo: 1,
			referrer: func(target obj) (string, map[string]any) {
				return "compute.sandboxTemplates.create", map[string]any{"name": "ref", "poolId": f.pool.id(), "flavorId": target.id(), "imageId": "ubuntu-24.04", "network": "private"}
			},
		},
		compute.KindSandboxTemplate: {
			create: func(i int) map[string]any {
				return map[string]any{"name": fmt.Sprintf("py-%d", i), "poolId": f.pool.id(), "flavorId": f.flavor.id(), "imageId": "ubuntu-24.04",
					"env": map[string]any{"API_TOKEN": "secret://tok", "MODE": "fast"}, "network": "private", "warm": map[string]any{"min": 1, "max": 2}}
			},
			update:  map[string]any{"imageId": "debian-12", "network": "public"},
			fixed:   "poolId",
			fixedTo: f.pool.id(),
		},
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// TestComputeCRUDEveryKind runs create, get, list with cursors, update (a fixed-field refusal
// and a stale-revision CONFLICT included), delete or archive (refused while referenced) and
// idempotent create for every kind in compute.Kinds, through HTTP.
func TestComputeCRUDEveryKind(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		f := e.fixture()
		cases := kindCases(f)
		for _, info := range compute.Kinds {
			c, ok := cases[info.Kind]
			if !ok {
				t.Fatalf("no test case for kind %s: add one to kindCases", info.Kind)
			}
			t.Run(info.Kind, func(t *testing.T) {
				e := e.sub(t)
				method := func(verb string) string { return "compute." + info.API + "." + verb }
				tenant := map[string]any{"tenantId": "root"}
				// create
				var made []obj
				for i := range 3 {
					var o obj
					e.must(e.admin, method("create"), with(c.create(i), "tenantId", "root"), &o)
					if !cubefleet.IsID(o.id(), info.Prefix) || o.rev() != 1 || o["tenantId"] != "root" {
						t.Fatalf("created %v", o)
					}
					made = append(made, o)
				}
				// get
				var got obj
				e.must(e.admin, method("get"), with(tenant, "id", made[0].id()), &got)
				if got.id() != made[0].id() || (info.Named && got["name"] != c.create(0)["name"]) {
					t.Errorf("get = %v, want %v", got, made[0])
				}
				e.mustFail(e.admin, method("get"), with(tenant, "id", info.Prefix+"_00000000000000000000000000"), cubefleet.CodeNotFound)
				// list, two at a time
				var all []string
				cursor := ""
				pages := 0
				for {
					var page struct {
						Items      []obj  `json:"items"`
						NextCursor string `json:"nextCursor"`
					}
					e.must(e.admin, method("list"), with(tenant, "limit", 2, "cursor", cursor), &page)
					pages++
					if len(page.Items) > 2 {
						t.Fatalf("page of %d items with limit 2", len(page.Items))
					}
					for _, o := range page.Items {
						all = append(all, o.id())
					}
					if page.NextCursor == "" {
						break
					}
					cursor = page.NextCursor
				}
				if pages < 2 || !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
					t.Errorf("pages = %d, ids = %v: want >= 2 pages of sorted, distinct ids", pages, all)
				}
				for _, o := range made {
					if !slices.Contains(all, o.id()) {
						t.Errorf("list misses %s", o.id())
					}
				}
				// update
				if len(info.Updatable) == 0 {
					status, body := e.post(e.admin, method("update"), with(tenant, "id", made[0].id()))
					if status != http.StatusNotFound {
						t.Errorf("%s: %d %s, want 404 (no such method)", method("update"), status, body)
					}
				} else {
					var up obj
					e.must(e.admin, method("update"), with(c.update, "tenantId", "root", "id", made[0].id(), "revision", 1), &up)
					if up.rev() != 2 {
						t.Errorf("revision after update = %d, want 2", up.rev())
					}
					for k, v := range c.update {
						if fmt.Sprint(up[k]) != fmt.Sprint(v) {
							t.Errorf("after update %s = %v, want %v", k, up[k], v)
						}
					}
					ce := e.mustFail(e.admin, method("update"), with(c.update, "tenantId", "root", "id", made[0].id(), "revision", 1), cubefleet.CodeConflict)
					if !strings.Contains(ce.Message, "revision") {
						t.Errorf("stale revision message %q", ce.Message)
					}
					ce = e.mustFail(e.admin, method("update"), with(tenant, "id", made[0].id(), c.fixed, c.fixedTo), cubefleet.CodeInvalidInput)
					if ce.Details["path"] != c.fixed || !strings.Contains(ce.Message, "cannot change") {
						t.Errorf("fixed field %s: %v %v", c.fixed, ce.Message, ce.Details)
					}
				}
				// idempotent create
				key := "test:" + info.Kind
				var first, again obj
				in := with(c.create(3), "tenantId", "root", "idempotencyKey", key)
				e.must(e.admin, method("create"), in, &first)
				e.must(e.admin, method("create"), in, &again)
				if first.id() != again.id() || again.rev() != 1 || first["idempotencyKey"] != key {
					t.Errorf("retried create: %v then %v, want the same object", first, again)
				}
				// delete or archive: refused while referenced
				remove := method(info.RemoveVerb)
				if c.referrer != nil {
					m, rin := c.referrer(made[1])
					var user obj
					e.must(e.admin, m, with(rin, "tenantId", "root"), &user)
					ce := e.mustFail(e.admin, remove, with(tenant, "id", made[1].id()), cubefleet.CodeConflict)
					if !strings.Contains(ce.Message, user.id()) {
						t.Errorf("refusal %q does not name the user %s", ce.Message, user.id())
					}
				}
				var removed obj
				e.must(e.admin, remove, with(tenant, "id", made[2].id(), "revision", made[2].rev()), &removed)
				if info.RemoveVerb == "archive" {
					var after obj
					e.must(e.admin, method("get"), with(tenant, "id", made[2].id()), &after)
					if after["archivedAt"] == nil {
						t.Errorf("archived %s has no archivedAt: %v", made[2].id(), after)
					}
					e.mustFail(e.admin, remove, with(tenant, "id", made[2].id()), cubefleet.CodeConflict)
				} else {
					e.mustFail(e.admin, method("get"), with(tenant, "id", made[2].id()), cubefleet.CodeNotFound)
				}
				var page struct{ Items []obj }
				e.must(e.admin, method("list"), with(tenant, "limit", 1000), &page)
				if slices.ContainsFunc(page.Items, func(o obj) bool { return o.id() == made[2].id() }) {
					t.Errorf("list still shows removed %s", made[2].id())
				}
			})
		}
	})
}

// TestKeyReferencesAndLiteralSecrets covers `key:` references to objects created with an
// idempotency key, and the refusal of literal credentials.
func TestKeyReferencesAndLiteralSecrets(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		var site, pool, flavor obj
		e.must(e.admin, "compute.sites.create", map[string]any{"tenantId": "root", "idempotencyKey": "k-site", "kind": "shared", "region": "eu"}, &site)
		e.must(e.admin, "compute.pools.create", map[string]any{"tenantId": "root", "idempotencyKey": "k-pool", "siteId": "key:k-site", "class": "vps-host"}, &pool)
		if pool["siteId"] != site.id() {
			t.Errorf("pool.siteId = %v, want %s", pool["siteId"], site.id())
		}
		e.must(e.admin, "compute.flavors.create", map[string]any{"tenantId": "root", "poolId": "key:k-pool", "name": "small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}, &flavor)
		if flavor["poolId"] != pool.id() {
			t.Errorf("flavor.poolId = %v, want %s", flavor["poolId"], pool.id())
		}
		// Another caller's key: names a different (missing) object.
		other, _ := e.key("root", "other", "compute:pools:create@tenant/root")
		ce := e.mustFail(other, "compute.pools.create", map[string]any{"tenantId": "root", "siteId": "key:k-site", "class": "vps-host"}, cubefleet.CodeInvalidInput)
		if ce.Details["path"] != "siteId" {
			t.Errorf("path = %v", ce.Details["path"])
		}
		// Literal credentials are refused, every problem reported.
		ce = e.mustFail(e.admin, "compute.providerAccounts.create", map[string]any{"tenantId": "root", "name": "bad", "provider": "aws",
			"config": map[string]any{"token": "hunter2"}}, cubefleet.CodeInvalidInput)
		errs, _ := ce.Details["errors"].([]cubefleet.FieldError)
		if len(errs) != 2 || strings.Contains(ce.Message+fmt.Sprint(errs), "hunter2") {
			t.Errorf("errors = %v (message %q), want provider and config.token, without the value", errs, ce.Message)
		}
	})
}

// TestModulesOff runs a server without the vps module: its kinds answer UNSUPPORTED.
func TestModulesOff(t *testing.T) {
	disabled, err := controlplane.ParseModules("core")
	if err != nil {
		t.Fatal(err)
	}
	e := mustStart(t, nil, func(c *Config) { c.Disabled = disabled })
	e.mustFail(e.admin, "compute.flavors.list", map[string]any{"tenantId": "root"}, cubefleet.CodeUnsupported)
	e.mustFail(e.admin, "compute.sandboxTemplates.list", map[string]any{"tenantId": "root"}, cubefleet.CodeUnsupported)
	e.must(e.admin, "compute.sites.list", map[string]any{"tenantId": "root"}, nil)
	status, _ := e.post(e.admin, "compute.providerAccounts.list", map[string]any{"tenantId": "root"})
	if status != http.StatusNotImplemented {
		t.Errorf("status %d, want 501", status)
	}
}
