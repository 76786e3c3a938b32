package compute_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var modules = []store.Module{iam.Module, secrets.Module, compute.Module}

const caller = "usr_test"

// env is a database with the tenants root, acme and globex, root's secret hetzner, and a
// compute service on it.
type env struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
	svc *compute.Service
}

func newEnv(t *testing.T, db *store.DB) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), db: db, svc: &compute.Service{}}
	now := time.Now()
	for _, id := range []string{"root", "acme", "globex"} {
		if _, err := iam.CreateTenant(e.ctx, db, id, now); err != nil {
			t.Fatal(err)
		}
	}
	box, err := secrets.NewBox(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := box.Create(e.ctx, db, "root", "hetzner", "value", caller, now); err != nil {
		t.Fatal(err)
	}
	return e
}

func raw(t testing.TB, in map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// with returns a copy of m with the pairs k, v, ... set (a nil v removes k).
func with(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func (e *env) create(kind string, in map[string]any) (compute.Object, error) {
	return e.svc.Create(e.ctx, e.db, kind, caller, raw(e.t, in))
}

func (e *env) mustCreate(kind string, in map[string]any) compute.Object {
	e.t.Helper()
	o, err := e.create(kind, in)
	if err != nil {
		e.t.Fatalf("create %s %v: %v", kind, in, err)
	}
	return o
}

func (e *env) update(kind string, in map[string]any) (compute.Object, error) {
	return e.svc.Update(e.ctx, e.db, kind, caller, raw(e.t, in))
}

func (e *env) remove(o compute.Object) error {
	_, err := e.svc.Remove(e.ctx, e.db, o.Kind, compute.Ref{TenantID: o.TenantID, ID: o.ID})
	return err
}

// wantCode fails unless err is a *cubefleet.Error with code, and (for INVALID_INPUT) path as its
// details.path; contains, when set, must be in the message.
func wantCode(t *testing.T, what string, err error, code cubefleet.Code, path, contains string) {
	t.Helper()
	var ce *cubefleet.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	if code == cubefleet.CodeInvalidInput && ce.Details["path"] != path {
		t.Errorf("%s: path %v, want %q (%v)", what, ce.Details["path"], path, err)
	}
	if !strings.Contains(ce.Message, contains) {
		t.Errorf("%s: %q does not say %q", what, ce.Message, contains)
	}
}

// base is a tenant's site, provider account, pool and flavor.
type base struct {
	site, account, pool, flavor compute.Object
}

func (e *env) base(tenant string) base {
	e.t.Helper()
	var b base
	b.site = e.mustCreate(compute.KindSite, map[string]any{"tenantId": tenant, "kind": "shared", "region": "eu-central"})
	b.account = e.mustCreate(compute.KindProviderAccount, map[string]any{"tenantId": tenant, "name": "cloud", "provider": "ionos-cloud",
		"config": map[string]any{"location": "de/fra"}})
	b.pool = e.mustCreate(compute.KindPool, map[string]any{"tenantId": tenant, "siteId": b.site.ID, "class": "vps-host",
		"policy": map[string]any{"egressAllow": []any{"10.0.0.0/8", "fd12::/16"}}})
	b.flavor = e.mustCreate(compute.KindFlavor, map[string]any{"tenantId": tenant, "poolId": b.pool.ID, "name": "g1.small", "vcpu": 2, "memoryGiB": 4, "diskGiB": 40})
	return b
}

// TestValidationRules runs each kind's field rules through the service: a valid input of the
// kind with one field changed is accepted or refused at that field's path.
func TestValidationRules(t *testing.T) {
	type rule struct {
		name string
		kind string
		set  []any  // field, value pairs changed in the kind's valid input (nil removes)
		path string // "" when the input is valid
	}
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	manyKeys := func(n int, value string) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = value
		}
		return m
	}
	rules := []rule{
		{"site valid", compute.KindSite, nil, ""},
		{"site kind", compute.KindSite, []any{"kind", "private"}, "kind"},
		{"site kind missing", compute.KindSite, []any{"kind", nil}, "kind"},
		{"site region upper case", compute.KindSite, []any{"region", "EU"}, "region"},
		{"site region 63", compute.KindSite, []any{"region", long("r", 63)}, ""},
		{"site region 64", compute.KindSite, []any{"region", long("r", 64)}, "region"},
		{"site region dot", compute.KindSite, []any{"region", "eu.central"}, "region"},

		{"account valid", compute.KindProviderAccount, nil, ""},
		{"account name", compute.KindProviderAccount, []any{"name", "Cloud"}, "name"},
		{"account name 64", compute.KindProviderAccount, []any{"name", long("a", 64)}, "name"},
		{"account provider", compute.KindProviderAccount, []any{"provider", "aws"}, "provider"},
		{"account config key", compute.KindProviderAccount, []any{"config", map[string]any{"bad key": "x"}}, "config.bad key"},
		{"account literal token", compute.KindProviderAccount, []any{"config", map[string]any{"token": "hunter2"}}, "config.token"},
		{"account malformed reference", compute.KindProviderAccount, []any{"config", map[string]any{"apiKey": "secret:/hetzner"}}, "config.apiKey"},
		{"account value of 4096 characters", compute.KindProviderAccount, []any{"config", map[string]any{"location": long("é", 4096)}}, ""},
		{"account value of 4097 characters", compute.KindProviderAccount, []any{"config", map[string]any{"location": long("a", 4097)}}, "config.location"},
		{"account 256 keys", compute.KindProviderAccount, []any{"config", manyKeys(256, "x")}, ""},
		{"account 257 keys", compute.KindProviderAccount, []any{"config", manyKeys(257, "x")}, "config"},

		{"pool valid", compute.KindPool, nil, ""},
		{"pool class", compute.KindPool, []any{"class", "bare-metal"}, "class"},
		{"pool provider without account", compute.KindPool, []any{"class", "provider"}, "providerAccountId"},
		{"pool gpu model", compute.KindPool, []any{"gpuModel", "L40S GPU"}, "gpuModel"},
		{"pool gpu model ok", compute.KindPool, []any{"gpuModel", "L40S"}, ""},
		{"pool budget above 1", compute.KindPool, []any{"policy", map[string]any{"disruptionBudget": 1.5}}, "policy.disruptionBudget"},
		{"pool budget negative", compute.KindPool, []any{"policy", map[string]any{"disruptionBudget": -0.1}}, "policy.disruptionBudget"},
		{"pool budget 1", compute.KindPool, []any{"policy", map[string]any{"disruptionBudget": 1}}, ""},
		{"pool egressAllow", compute.KindPool, []any{"policy", map[string]any{"egressAllow": []any{"10.20.0.0/16", "fd12::/32"}}}, ""},
		{"pool egressAllow public range", compute.KindPool, []any{"policy", map[string]any{"egressAllow": []any{"10.20.0.0/16", "198.51.100.0/24"}}}, "policy.egressAllow[1]"},
		{"pool egressAllow metadata", compute.KindPool, []any{"policy", map[string]any{"egressAllow": []any{"100.64.0.0/10"}}}, "policy.egressAllow[0]"},
		{"pool egressAllow twice", compute.KindPool, []any{"policy", map[string]any{"egressAllow": []any{"10.20.0.0/16", "10.20.0.0/16"}}}, "policy.egressAllow[1]"},
		{"pool unknown field", compute.KindPool, []any{"colour", "red"}, "colour"},

		{"owner quota valid", compute.KindOwnerQuota, nil, ""},
		{"owner quota resource", compute.KindOwnerQuota, []any{"resource", "1gpu"}, "resource"},
		{"owner quota max 2^53", compute.KindOwnerQuota, []any{"max", int64(1) << 53}, ""},
		{"owner quota max 2^53+1", compute.KindOwnerQuota, []any{"max", int64(1)<<53 + 1}, "max"},
		{"owner quota max negative", compute.KindOwnerQuota, []any{"max", -1}, "max"},

		{"offer valid", compute.KindOffer, nil, ""},
		{"offer priority 1001", compute.KindOffer, []any{"priority", 1001}, "priority"},
		{"offer quota key", compute.KindOffer, []any{"quota", map[string]any{"v cpu": 1}}, "quota.v cpu"},
		{"offer quota 2^53+1", compute.KindOffer, []any{"quota", map[string]any{"vcpu": int64(1)<<53 + 1}}, "quota.vcpu"},
		{"offer to its owner", compute.KindOffer, []any{"toTenantId", "root"}, "toTenantId"},
		{"offer to nobody", compute.KindOffer, []any{"toTenantId", "nobody"}, "toTenantId"},

		{"flavor valid", compute.KindFlavor, nil, ""},
		{"flavor vcpu 0", compute.KindFlavor, []any{"vcpu", 0}, "vcpu"},
		{"flavor vcpu 4096", compute.KindFlavor, []any{"vcpu", 4096}, ""},
		{"flavor vcpu 4097", compute.KindFlavor, []any{"vcpu", 4097}, "vcpu"},
		{"flavor memory 65537", compute.KindFlavor, []any{"memoryGiB", 65537}, "memoryGiB"},
		{"flavor disk 1048577", compute.KindFlavor, []any{"diskGiB", 1048577}, "diskGiB"},
		{"flavor gpu 65", compute.KindFlavor, []any{"gpu", 65}, "gpu"},
		{"flavor name with slash", compute.KindFlavor, []any{"name", "g1/small"}, "name"},

		{"template valid", compute.KindSandboxTemplate, nil, ""},
		{"template image with registry and unicode", compute.KindSandboxTemplate, []any{"imageId", "registry.example.com/bild-ä:24.04@sha256:abc"}, ""},
		{"template image of 255", compute.KindSandboxTemplate, []any{"imageId", long("i", 255)}, ""},
		{"template image of 256", compute.KindSandboxTemplate, []any{"imageId", long("i", 256)}, "imageId"},
		{"template image empty", compute.KindSandboxTemplate, []any{"imageId", ""}, "imageId"},
		{"template image with space", compute.KindSandboxTemplate, []any{"imageId", "img x"}, "imageId"},
		{"template image with no-break space", compute.KindSandboxTemplate, []any{"imageId", "img\u00a0x"}, "imageId"},
		{"template image with NUL", compute.KindSandboxTemplate, []any{"imageId", "img\x00x"}, "imageId"},
		{"template image with line separator", compute.KindSandboxTemplate, []any{"imageId", "img\u2028x"}, "imageId"},
		{"template image with ideographic space", compute.KindSandboxTemplate, []any{"imageId", "img\u3000x"}, "imageId"},
		{"template image with vertical tab", compute.KindSandboxTemplate, []any{"imageId", "img\vx"}, "imageId"},
		{"template image with NEL", compute.KindSandboxTemplate, []any{"imageId", "img\u0085x"}, "imageId"},
		{"template env name", compute.KindSandboxTemplate, []any{"env", map[string]any{"1X": "y"}}, "env.1X"},
		{"template env literal password", compute.KindSandboxTemplate, []any{"env", map[string]any{"DB_PASSWORD": "hunter2"}}, "env.DB_PASSWORD"},
		{"template network", compute.KindSandboxTemplate, []any{"network", "dmz"}, "network"},
		{"template warm min above max", compute.KindSandboxTemplate, []any{"warm", map[string]any{"min": 3, "max": 2}}, "warm.min"},
		{"template warm max 1001", compute.KindSandboxTemplate, []any{"warm", map[string]any{"min": 0, "max": 1001}}, "warm.max"},
		{"template warm 0 0", compute.KindSandboxTemplate, []any{"warm", map[string]any{"min": 0, "max": 0}}, ""},
		{"template runtime microvm", compute.KindSandboxTemplate, []any{"runtime", "microvm"}, ""},
		{"template runtime process", compute.KindSandboxTemplate, []any{"runtime", "process"}, ""},
		{"template runtime kvm", compute.KindSandboxTemplate, []any{"runtime", "kvm"}, "runtime"},
		{"template egressAllow public", compute.KindSandboxTemplate, []any{"network", "public", "egressAllow", []any{"10.20.0.0/16", "fd12::/32"}}, ""},
		{"template egressAllow private", compute.KindSandboxTemplate, []any{"egressAllow", []any{"10.20.0.0/16"}}, "egressAllow"},
		{"template egressAllow metadata", compute.KindSandboxTemplate, []any{"network", "public", "egressAllow", []any{"10.20.0.0/16", "100.64.0.0/10"}}, "egressAllow[1]"},
		{"template egressAllow public range", compute.KindSandboxTemplate, []any{"network", "public", "egressAllow", []any{"198.51.100.0/24"}}, "egressAllow[0]"},
		{"template egressAllow outside the pool's policy", compute.KindSandboxTemplate, []any{"network", "public", "egressAllow", []any{"10.20.0.0/16", "192.168.7.0/24"}}, "egressAllow[1]"},
	}
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		b := e.base("root")
		valid := map[string]map[string]any{
			compute.KindSite:            {"kind": "shared", "region": "eu-central"},
			compute.KindProviderAccount: {"provider": "hetzner-cloud", "config": map[string]any{"token": "secret://hetzner", "location": "fsn1"}},
			compute.KindPool:            {"siteId": b.site.ID, "class": "vps-host"},
			compute.KindOwnerQuota:      {"poolId": b.pool.ID, "resource": "gpu", "max": 8},
			compute.KindOffer:           {"poolId": b.pool.ID, "toTenantId": "acme", "quota": map[string]any{"vcpu": 64}, "priority": 5},
			compute.KindFlavor:          {"poolId": b.pool.ID, "vcpu": 2, "memoryGiB": 4, "diskGiB": 40},
			compute.KindSandboxTemplate: {"poolId": b.pool.ID, "flavorId": b.flavor.ID, "imageId": "ubuntu-24.04", "network": "private",
				"env": map[string]any{"API_TOKEN": "secret://hetzner", "LANG": "C.UTF-8"}, "warm": map[string]any{"min": 1, "max": 2}},
		}
		for i, r := range rules {
			t.Run(r.name, func(t *testing.T) {
				info, _ := compute.Info(r.kind)
				in := with(valid[r.kind], "tenantId", "root")
				if info.Named {
					in["name"] = fmt.Sprintf("n%d", i)
				}
				in = with(in, r.set...)
				if r.kind == compute.KindOwnerQuota || r.kind == compute.KindOffer {
					// one per pool and resource, or pool and tenant: each case on a pool of its own
					in["poolId"] = e.mustCreate(compute.KindPool, map[string]any{"tenantId": "root", "siteId": b.site.ID, "class": "vps-host"}).ID
				}
				o, err := e.create(r.kind, in)
				if r.path == "" {
					if err != nil {
						t.Fatalf("valid input refused: %v", err)
					}
					if o.Revision != 1 || o.TenantID != "root" || !cubefleet.IsID(o.ID, info.Prefix) {
						t.Errorf("created %+v", o)
					}
					return
				}
				wantCode(t, r.name, err, cubefleet.CodeInvalidInput, r.path, "")
			})
		}
	})
}

// TestInvalidInputListsEveryProblemWithoutSecrets: one create with several bad fields reports each
// at its path, and never repeats a literal secret.
func TestInvalidInputListsEveryProblemWithoutSecrets(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t, modules...))
	_, err := e.create(compute.KindProviderAccount, map[string]any{"tenantId": "root", "name": "bad", "provider": "aws",
		"config": map[string]any{"token": "hunter2", "password": "p@ss", "location": "fsn1"}})
	var ce *cubefleet.Error
	if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput {
		t.Fatalf("create = %v", err)
	}
	errs, _ := ce.Details["errors"].([]cubefleet.FieldError)
	var paths []string
	for _, fe := range errs {
		paths = append(paths, fe.Path)
	}
	if strings.Join(paths, " ") != "provider config.password config.token" {
		t.Errorf("paths = %v, want provider, config.password, config.token in order", paths)
	}
	if s := fmt.Sprint(ce.Message, errs); strings.Contains(s, "hunter2") || strings.Contains(s, "p@ss") {
		t.Errorf("the error repeats a secret: %s", s)
	}
}

// TestReferences: references name live objects of the right kind in the caller's tenant, or (for
// templates) a pool another tenant offers and a flavor sold on it; key: references name the
// caller's own idempotency keys.
func TestReferences(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		root, acme := e.base("root"), e.base("acme")
		tpl := func(tenant, pool, flavor string) map[string]any {
			return map[string]any{"tenantId": tenant, "name": "t-" + tenant, "poolId": pool, "flavorId": flavor, "imageId": "ubuntu-24.04", "network": "private"}
		}
		_, err := e.create(compute.KindPool, map[string]any{"tenantId": "root", "siteId": acme.site.ID, "class": "vps-host"})
		wantCode(t, "a pool on another tenant's site", err, cubefleet.CodeInvalidInput, "siteId", "in tenant root")
		_, err = e.create(compute.KindPool, map[string]any{"tenantId": "root", "siteId": root.pool.ID, "class": "vps-host"})
		wantCode(t, "a pool id as siteId", err, cubefleet.CodeInvalidInput, "siteId", "site id")
		_, err = e.create(compute.KindPool, map[string]any{"tenantId": "root", "siteId": "site_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", "class": "vps-host"})
		wantCode(t, "an unknown site", err, cubefleet.CodeInvalidInput, "siteId", "no site")
		_, err = e.create(compute.KindPool, map[string]any{"tenantId": "root", "siteId": root.site.ID, "class": "provider", "providerAccountId": acme.account.ID})
		wantCode(t, "another tenant's provider account", err, cubefleet.CodeInvalidInput, "providerAccountId", "")
		_, err = e.create(compute.KindFlavor, map[string]any{"tenantId": "root", "poolId": acme.pool.ID, "name": "f", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1})
		wantCode(t, "a flavor on another tenant's pool", err, cubefleet.CodeInvalidInput, "poolId", "")

		// A template on acme's pool: refused until acme offers the pool to root.
		_, err = e.create(compute.KindSandboxTemplate, tpl("root", acme.pool.ID, acme.flavor.ID))
		wantCode(t, "a template on a pool not offered", err, cubefleet.CodeInvalidInput, "poolId", "in tenant root")
		offer := e.mustCreate(compute.KindOffer, map[string]any{"tenantId": "acme", "poolId": acme.pool.ID, "toTenantId": "root"})
		used := e.mustCreate(compute.KindSandboxTemplate, tpl("root", acme.pool.ID, acme.flavor.ID))
		_, err = e.create(compute.KindSandboxTemplate, with(tpl("root", acme.pool.ID, root.flavor.ID), "name", "t-mixed"))
		wantCode(t, "a flavor of another pool", err, cubefleet.CodeInvalidInput, "flavorId", "not sold on pool")

		// Withdrawing the offer, deleting the flavor or archiving the pool under root's template
		// is refused; once the template is gone, the offer goes.
		wantCode(t, "withdraw an offer in use", e.remove(offer), cubefleet.CodeConflict, "", used.ID)
		wantCode(t, "delete a flavor in use", e.remove(acme.flavor), cubefleet.CodeConflict, "", used.ID)
		wantCode(t, "archive a pool in use", e.remove(acme.pool), cubefleet.CodeConflict, "", "")
		if err := e.remove(used); err != nil {
			t.Fatal(err)
		}
		if err := e.remove(offer); err != nil {
			t.Fatalf("withdraw an unused offer: %v", err)
		}

		// key: references resolve to the object the caller's key made.
		site := e.mustCreate(compute.KindSite, map[string]any{"tenantId": "root", "idempotencyKey": "k-site", "kind": "shared", "region": "eu"})
		pool := e.mustCreate(compute.KindPool, map[string]any{"tenantId": "root", "siteId": compute.KeyRef("k-site"), "class": "vps-host"})
		var spec compute.PoolSpec
		if err := pool.DecodeSpec(&spec); err != nil || spec.SiteID != site.ID {
			t.Errorf("pool.siteId = %q (%v), want %s", spec.SiteID, err, site.ID)
		}
		_, err = e.svc.Create(e.ctx, e.db, compute.KindPool, "usr_other", raw(t, map[string]any{"tenantId": "root", "siteId": compute.KeyRef("k-site"), "class": "vps-host"}))
		wantCode(t, "another caller's key", err, cubefleet.CodeInvalidInput, "siteId", "no site")

		// An archived pool takes no new objects.
		empty := e.mustCreate(compute.KindPool, map[string]any{"tenantId": "root", "siteId": root.site.ID, "class": "vps-host"})
		if err := e.remove(empty); err != nil {
			t.Fatal(err)
		}
		_, err = e.create(compute.KindFlavor, map[string]any{"tenantId": "root", "poolId": empty.ID, "name": "f", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1})
		wantCode(t, "a flavor on an archived pool", err, cubefleet.CodeInvalidInput, "poolId", "archived")
		wantCode(t, "archive twice", e.remove(empty), cubefleet.CodeConflict, "", "already archived")
	})
}

// TestSecretReferences: a secret:// reference names a secret of the object's own tenant that
// exists; vault:// needs a Vault; env:// is the root tenant's, for the variables the operator
// allows.
func TestSecretReferences(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		account := func(name, value string) map[string]any {
			return map[string]any{"tenantId": "root", "name": name, "provider": "hetzner-cloud", "config": map[string]any{"token": value, "region": value}}
		}
		e.svc.EnvRefs = fieldrules.EnvRefs{Allow: []string{"HCLOUD_"}}
		for i, ok := range []string{"secret://hetzner", "secret://root/hetzner", "env://HCLOUD_TOKEN"} {
			if _, err := e.create(compute.KindProviderAccount, account(fmt.Sprintf("ok%d", i), ok)); err != nil {
				t.Errorf("%s: %v", ok, err)
			}
		}
		_, err := e.create(compute.KindProviderAccount, account("missing", "secret://nope"))
		wantCode(t, "a missing secret", err, cubefleet.CodeInvalidInput, "config.region", "has no secret nope")
		_, err = e.create(compute.KindProviderAccount, account("foreign", "secret://acme/hetzner"))
		wantCode(t, "another tenant's secret", err, cubefleet.CodeInvalidInput, "config.region", "own tenant")
		_, err = e.create(compute.KindProviderAccount, account("vault", "vault://kv/hetzner#token"))
		wantCode(t, "Vault without a Vault", err, cubefleet.CodeInvalidInput, "config.region", "--vault-addr")
		e.svc.VaultConfigured = true
		if _, err := e.create(compute.KindProviderAccount, account("vault", "vault://kv/hetzner#token")); err != nil {
			t.Errorf("Vault with a Vault: %v", err)
		}
		// env:// beyond what the operator allows, or in another tenant, names the rule.
		_, err = e.create(compute.KindProviderAccount, account("home", "env://HOME"))
		wantCode(t, "env://HOME on root", err, cubefleet.CodeInvalidInput, "config.region", "--env-ref-allow")
		_, err = e.create(compute.KindProviderAccount, with(account("acme", "env://HCLOUD_TOKEN"), "tenantId", "acme"))
		wantCode(t, "env:// in tenant acme", err, cubefleet.CodeInvalidInput, "config.region", "only the root tenant")
		tpl := e.base("root")
		_, err = e.create(compute.KindSandboxTemplate, map[string]any{"tenantId": "root", "name": "t", "poolId": tpl.pool.ID, "flavorId": tpl.flavor.ID,
			"imageId": "i", "network": "private", "env": map[string]any{"PATH_TOKEN": "env://PATH"}})
		wantCode(t, "a template's env://PATH", err, cubefleet.CodeInvalidInput, "env.PATH_TOKEN", "--env-ref-allow")
		// An update is held to the rule as it stands now.
		ok := e.mustCreate(compute.KindProviderAccount, account("later", "env://HCLOUD_TOKEN"))
		e.svc.EnvRefs = fieldrules.EnvRefs{}
		_, err = e.update(compute.KindProviderAccount, map[string]any{"tenantId": "root", "id": ok.ID, "config": map[string]any{"token": "env://HCLOUD_TOKEN"}})
		wantCode(t, "an update once the operator allows none", err, cubefleet.CodeInvalidInput, "config.token", "allows none")
	})
}

// TestNamesAreUnique: names are unique per tenant (flavors per pool); owner quotas per pool and
// resource, offers per pool and tenant.
func TestNamesAreUnique(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		root, acme := e.base("root"), e.base("acme")
		_, err := e.create(compute.KindProviderAccount, map[string]any{"tenantId": "root", "name": "cloud", "provider": "ionos-cloud"})
		wantCode(t, "a second account named cloud", err, cubefleet.CodeConflict, "", "already exists")
		_, err = e.create(compute.KindFlavor, map[string]any{"tenantId": "root", "poolId": root.pool.ID, "name": "g1.small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1})
		wantCode(t, "a second flavor g1.small on the pool", err, cubefleet.CodeConflict, "", "already exists")
		other := e.mustCreate(compute.KindPool, map[string]any{"tenantId": "root", "siteId": root.site.ID, "class": "vps-host"})
		e.mustCreate(compute.KindFlavor, map[string]any{"tenantId": "root", "poolId": other.ID, "name": "g1.small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1})
		tpl := map[string]any{"tenantId": "root", "name": "py", "poolId": root.pool.ID, "flavorId": root.flavor.ID, "imageId": "i", "network": "public"}
		e.mustCreate(compute.KindSandboxTemplate, tpl)
		_, err = e.create(compute.KindSandboxTemplate, tpl)
		wantCode(t, "a second template py", err, cubefleet.CodeConflict, "", "already exists")
		e.mustCreate(compute.KindSandboxTemplate, with(tpl, "tenantId", "acme", "poolId", acme.pool.ID, "flavorId", acme.flavor.ID))
		quota := map[string]any{"tenantId": "root", "poolId": root.pool.ID, "resource": "gpu", "max": 1}
		e.mustCreate(compute.KindOwnerQuota, quota)
		_, err = e.create(compute.KindOwnerQuota, with(quota, "max", 2))
		wantCode(t, "a second gpu quota", err, cubefleet.CodeConflict, "", "already exists")
		offer := map[string]any{"tenantId": "root", "poolId": root.pool.ID, "toTenantId": "acme"}
		e.mustCreate(compute.KindOffer, offer)
		_, err = e.create(compute.KindOffer, offer)
		wantCode(t, "a second offer to acme", err, cubefleet.CodeConflict, "", "already exists")

		// An idempotency key returns what it made, whatever the input says on the retry.
		first := e.mustCreate(compute.KindSite, map[string]any{"tenantId": "root", "idempotencyKey": "k", "kind": "shared", "region": "eu"})
		again := e.mustCreate(compute.KindSite, map[string]any{"tenantId": "root", "idempotencyKey": "k", "kind": "shared", "region": "eu"})
		if first.ID != again.ID || again.Revision != 1 {
			t.Errorf("a retried create made %s then %s", first.ID, again.ID)
		}
		_, err = e.create(compute.KindPool, map[string]any{"tenantId": "root", "idempotencyKey": "k", "siteId": root.site.ID, "class": "vps-host"})
		if err != nil {
			t.Errorf("the same key for another kind: %v (ids carry the kind's prefix)", err)
		}
		_, err = e.create(compute.KindSite, map[string]any{"tenantId": "root", "idempotencyKey": strings.Repeat("k", 256), "kind": "shared", "region": "eu"})
		wantCode(t, "a key of 256 characters", err, cubefleet.CodeInvalidInput, "idempotencyKey", "")
	})
}

// TestUpdate: updates change updatable fields only, bump the revision, check the same rules as
// a create, and refuse a stale revision.
func TestUpdate(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		b := e.base("root")
		tpl := e.mustCreate(compute.KindSandboxTemplate, map[string]any{"tenantId": "root", "name": "py", "poolId": b.pool.ID, "flavorId": b.flavor.ID,
			"imageId": "ubuntu-24.04", "network": "private", "warm": map[string]any{"min": 1, "max": 2}})
		ref := func(kv ...any) map[string]any {
			return with(map[string]any{"tenantId": "root", "id": tpl.ID}, kv...)
		}
		up, err := e.update(compute.KindSandboxTemplate, ref("revision", 1, "imageId", "debian-12", "warm", json.RawMessage("null")))
		if err != nil || up.Revision != 2 {
			t.Fatalf("update = %+v, %v", up, err)
		}
		var spec compute.SandboxTemplateSpec
		if err := up.DecodeSpec(&spec); err != nil || spec.ImageID != "debian-12" || spec.Warm != nil {
			t.Errorf("after the update: %+v (%v)", spec, err)
		}
		_, err = e.update(compute.KindSandboxTemplate, ref("revision", 1, "imageId", "x"))
		wantCode(t, "a stale revision", err, cubefleet.CodeConflict, "", "revision 1")
		if !errors.Is(err, compute.ErrRevision) {
			t.Errorf("a stale revision does not wrap ErrRevision: %v", err)
		}
		_, err = e.update(compute.KindSandboxTemplate, ref("imageId", "img\u00a0x"))
		wantCode(t, "an image id with a no-break space", err, cubefleet.CodeInvalidInput, "imageId", "without whitespace")
		_, err = e.update(compute.KindSandboxTemplate, ref("poolId", b.pool.ID))
		wantCode(t, "a fixed field", err, cubefleet.CodeInvalidInput, "poolId", "cannot change")
		_, err = e.update(compute.KindSandboxTemplate, ref("colour", "red"))
		wantCode(t, "an unknown field", err, cubefleet.CodeInvalidInput, "colour", "flavorId, imageId")
		_, err = e.update(compute.KindSandboxTemplate, ref("id", b.flavor.ID))
		wantCode(t, "a flavor id as a template's", err, cubefleet.CodeInvalidInput, "id", "")
		_, err = e.update(compute.KindSandboxTemplate, ref("tenantId", "acme"))
		wantCode(t, "another tenant's template", err, cubefleet.CodeNotFound, "", "")

		quota := e.mustCreate(compute.KindOwnerQuota, map[string]any{"tenantId": "root", "poolId": b.pool.ID, "resource": "gpu", "max": 1})
		_, err = e.update(compute.KindOwnerQuota, map[string]any{"tenantId": "root", "id": quota.ID, "max": int64(1)<<53 + 1})
		wantCode(t, "a quota above 2^53", err, cubefleet.CodeInvalidInput, "max", "9007199254740992")

		archived := e.mustCreate(compute.KindPool, map[string]any{"tenantId": "root", "siteId": b.site.ID, "class": "vps-host"})
		if err := e.remove(archived); err != nil {
			t.Fatal(err)
		}
		_, err = e.update(compute.KindPool, map[string]any{"tenantId": "root", "id": archived.ID, "gpuModel": "L4"})
		wantCode(t, "an archived pool", err, cubefleet.CodeConflict, "", "archived")
	})
}

// TestRemoveRefusedWhileInUse: an object other live objects reference is neither deleted nor
// archived, and the refusal names the user.
func TestRemoveRefusedWhileInUse(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		b := e.base("root")
		provider := e.mustCreate(compute.KindPool, map[string]any{"tenantId": "root", "siteId": b.site.ID, "class": "provider", "providerAccountId": b.account.ID})
		tpl := e.mustCreate(compute.KindSandboxTemplate, map[string]any{"tenantId": "root", "name": "py", "poolId": b.pool.ID, "flavorId": b.flavor.ID,
			"imageId": "i", "network": "private"})
		for _, c := range []struct {
			target compute.Object
			user   string
		}{{b.site, b.pool.ID}, {b.account, provider.ID}, {b.pool, b.flavor.ID}, {b.flavor, tpl.ID}} {
			wantCode(t, "remove "+c.target.Kind, e.remove(c.target), cubefleet.CodeConflict, "", c.user)
		}
		for _, o := range []compute.Object{tpl, b.flavor, provider, b.account} {
			if err := e.remove(o); err != nil {
				t.Fatalf("remove %s once unused: %v", o.Kind, err)
			}
		}
		_, err := e.svc.Get(e.ctx, e.db, compute.KindFlavor, compute.Ref{TenantID: "root", ID: b.flavor.ID})
		wantCode(t, "get a deleted flavor", err, cubefleet.CodeNotFound, "", "")
	})
}

// TestCountsStayWithinADocument: a tenant holds at most as many objects as one fleet document
// describes. The objects up to the limit are written straight into the table, as the API would
// have, to keep the test fast.
func TestCountsStayWithinADocument(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		b := e.base("root")
		fill := func(tenant, kind, parent string, n int) {
			t.Helper()
			err := db.InTx(e.ctx, func(tx *sql.Tx) error {
				for i := range n {
					_, err := tx.ExecContext(e.ctx, `INSERT INTO compute_objects (id, tenant_id, kind, parent_id, ref_a, ref_b, unique_name, spec, revision, idempotency_key, created_by, created_at, updated_at)
						VALUES ($1, $2, $3, $4, '', '', $5, '{}', 1, '', $6, 0, 0)`, cubefleet.NewID("fill"), tenant, kind, parent, fmt.Sprintf("fill-%d", i), caller)
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		site := map[string]any{"tenantId": "root", "kind": "shared", "region": "eu"}
		fill("root", compute.KindSite, "", 998) // and the base's site: 999
		last := e.mustCreate(compute.KindSite, with(site, "idempotencyKey", "last"))
		_, err := e.create(compute.KindSite, site)
		wantCode(t, "the 1001st site", err, cubefleet.CodeConflict, "", "1001 sites")
		if again, err := e.create(compute.KindSite, with(site, "idempotencyKey", "last")); err != nil || again.ID != last.ID {
			t.Errorf("a retried create at the limit = %v, %v; want %s", again.ID, err, last.ID)
		}
		if _, err := e.create(compute.KindSite, with(site, "tenantId", "acme")); err != nil {
			t.Errorf("another tenant's site: %v", err)
		}
		var sites int
		if err := db.QueryRowContext(e.ctx, `SELECT count(*) FROM compute_objects WHERE tenant_id = 'root' AND kind = 'site'`).Scan(&sites); err != nil || sites != 1000 {
			t.Errorf("root holds %d sites (%v) after the refusal, want 1000", sites, err)
		}
		// A caller that defers the counts (fleet apply) checks them once, before it commits.
		deferred := *e.svc
		deferred.DeferCounts = true
		extra, err := deferred.Create(e.ctx, db, compute.KindSite, caller, raw(t, site))
		if err != nil {
			t.Fatalf("a deferred create: %v", err)
		}
		wantCode(t, "CheckCounts at 1001 sites", compute.CheckCounts(e.ctx, db, "root"), cubefleet.CodeConflict, "", "1001 sites")
		if err := e.remove(extra); err != nil {
			t.Fatal(err)
		}
		if err := compute.CheckCounts(e.ctx, db, "root"); err != nil {
			t.Errorf("CheckCounts at 1000 sites: %v", err)
		}

		quota := map[string]any{"tenantId": "root", "poolId": b.pool.ID, "resource": "gpu", "max": 1}
		fill("root", compute.KindOwnerQuota, b.pool.ID, 256)
		_, err = e.create(compute.KindOwnerQuota, quota)
		wantCode(t, "the 257th owner quota of a pool", err, cubefleet.CodeConflict, "", "257 ownerQuotas")
		other := e.mustCreate(compute.KindPool, map[string]any{"tenantId": "root", "siteId": b.site.ID, "class": "vps-host"})
		e.mustCreate(compute.KindOwnerQuota, with(quota, "poolId", other.ID))

		fill("root", compute.KindOffer, other.ID, 1000)
		_, err = e.create(compute.KindOffer, map[string]any{"tenantId": "root", "poolId": other.ID, "toTenantId": "acme"})
		wantCode(t, "the 1001st offer of a pool", err, cubefleet.CodeConflict, "", "1001 offers")

		// root now holds 999+1 sites, 256+1 quotas, 1000 offers and its base: fill to 20,000.
		var n int
		if err := db.QueryRowContext(e.ctx, `SELECT count(*) FROM compute_objects WHERE tenant_id = 'root'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		fill("root", compute.KindOffer, cubefleet.NewID("pool"), 20000-n) // only owner quotas and offers go past it
		_, err = e.create(compute.KindFlavor, map[string]any{"tenantId": "root", "poolId": other.ID, "name": "f", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1})
		wantCode(t, "the 20,001st object", err, cubefleet.CodeConflict, "", "20001 objects")
	})
}

// TestModulesOff: a deployment without the vps module answers UNSUPPORTED for its kinds.
func TestModulesOff(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t, modules...))
	e.svc.Disabled = map[string]bool{compute.ModuleTemplates: true}
	if e.svc.Serves(compute.KindSandboxTemplate) || !e.svc.Serves(compute.KindFlavor) {
		t.Errorf("without templates: Serves(template) = %v, Serves(flavor) = %v", e.svc.Serves(compute.KindSandboxTemplate), e.svc.Serves(compute.KindFlavor))
	}
	_, err := e.create(compute.KindSandboxTemplate, map[string]any{"tenantId": "root"})
	wantCode(t, "a template without the module", err, cubefleet.CodeUnsupported, "", "vps module")
	e.svc.Disabled = map[string]bool{compute.ModuleVPS: true}
	if e.svc.Serves(compute.KindFlavor) || e.svc.Serves(compute.KindProviderAccount) || !e.svc.Serves(compute.KindPool) {
		t.Errorf("without vps: flavors and provider accounts still served, or pools not")
	}
}

// TestInputChecks: the input around the spec (tenant, idempotency key, list paging) is checked
// before it reaches the database, so a NUL byte or junk is INVALID_INPUT on PostgreSQL too.
func TestInputChecks(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		b := e.base("root")
		site := map[string]any{"tenantId": "root", "kind": "shared", "region": "eu"}
		for _, c := range []struct {
			name string
			in   map[string]any
			path string
		}{
			{"no tenant", with(site, "tenantId", nil), "tenantId"},
			{"a tenant with NUL", with(site, "tenantId", "ro\x00ot"), "tenantId"},
			{"a tenant in upper case", with(site, "tenantId", "Root"), "tenantId"},
			{"a key with NUL", with(site, "idempotencyKey", "k\x00"), "idempotencyKey"},
			{"a key with a newline", with(site, "idempotencyKey", "k\n"), "idempotencyKey"},
			{"not an object", nil, ""},
		} {
			var err error
			if c.in == nil {
				_, err = e.svc.Create(e.ctx, e.db, compute.KindSite, caller, json.RawMessage(`[1]`))
			} else {
				_, err = e.create(compute.KindSite, c.in)
			}
			wantCode(t, c.name, err, cubefleet.CodeInvalidInput, c.path, "")
		}
		if _, err := e.create(compute.KindSite, with(site, "idempotencyKey", "fleet:root:offer:vps-fra -> acme")); err != nil {
			t.Errorf("a key fleet makes: %v", err)
		}
		_, err := e.create(compute.KindOffer, map[string]any{"tenantId": "root", "poolId": b.pool.ID, "toTenantId": "ac\x00me"})
		wantCode(t, "an offer to a tenant id with NUL", err, cubefleet.CodeInvalidInput, "toTenantId", "tenant id")

		// List pages by id; a cursor or pool that is not an id of its kind is refused.
		for range 3 {
			e.mustCreate(compute.KindSite, site)
		}
		page, err := e.svc.List(e.ctx, e.db, compute.KindSite, compute.ListInput{TenantID: "root", Limit: 2})
		if err != nil || len(page.Items) != 2 || page.NextCursor == "" {
			t.Fatalf("first page = %+v, %v", page, err)
		}
		rest, err := e.svc.List(e.ctx, e.db, compute.KindSite, compute.ListInput{TenantID: "root", Limit: 1000, Cursor: page.NextCursor})
		if err != nil || len(rest.Items) != 3 || rest.NextCursor != "" || rest.Items[0].ID <= page.NextCursor {
			t.Fatalf("next page = %+v, %v", rest, err)
		}
		for _, c := range []struct {
			in   compute.ListInput
			path string
		}{
			{compute.ListInput{TenantID: "root", Cursor: "bogus"}, "cursor"},
			{compute.ListInput{TenantID: "root", Cursor: "site_\x00"}, "cursor"},
			{compute.ListInput{TenantID: "root", Cursor: b.pool.ID}, "cursor"},
			{compute.ListInput{TenantID: "root", PoolID: "p\x00"}, "poolId"},
			{compute.ListInput{TenantID: "ro\x00ot"}, "tenantId"},
			{compute.ListInput{TenantID: "root", Limit: 1001}, "limit"},
		} {
			_, err := e.svc.List(e.ctx, e.db, compute.KindSite, c.in)
			wantCode(t, fmt.Sprintf("list %+v", c.in), err, cubefleet.CodeInvalidInput, c.path, "")
		}
		flavors, err := e.svc.List(e.ctx, e.db, compute.KindFlavor, compute.ListInput{TenantID: "root", PoolID: b.pool.ID})
		if err != nil || len(flavors.Items) != 1 || flavors.Items[0].ID != b.flavor.ID {
			t.Errorf("the pool's flavors = %+v, %v", flavors, err)
		}
	})
}
