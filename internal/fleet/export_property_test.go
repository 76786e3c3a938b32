package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestEveryAcceptedObjectExportsIntoADocumentThatPlansClean is the property that ties the compute
// API to the fleet document: whatever sequence of creates, updates and removals the compute API
// accepts (random inputs, valid and invalid, for every kind, across three tenants that offer each
// other pools), fleet.export renders each tenant's fleet as a document that document.Decode and
// the published JSON Schema accept, and that plans, with and without prune, to no call and no
// blocked change against the same database. The compute API never answers an input with anything
// but a client error.
func TestEveryAcceptedObjectExportsIntoADocumentThatPlansClean(t *testing.T) {
	schema := compileDocumentSchema(t)
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		rapid.Check(t, func(rt *rapid.T) {
			w := newWorld(rt, db)
			for range rapid.IntRange(1, 40).Draw(rt, "steps") {
				w.step()
			}
			for _, tenant := range w.tenants {
				w.checkExport(tenant, schema)
			}
		})
	})
}

func compileDocumentSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(document.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(document.SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(document.SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// worlds numbers the worlds of one test binary, so that each draws its tenants afresh in a
// database the others share.
var worlds atomic.Int64

// world is one run of the property: three fresh tenants, each with the secrets s1 and s2, the
// objects the compute API accepted (removed ones included: a reference to one must be refused),
// the live ones by id, and the idempotency keys used.
type world struct {
	t       *rapid.T
	ctx     context.Context
	db      *store.DB
	svc     *compute.Service
	tenants []string
	objects []compute.Object
	live    map[string]compute.Object
	keys    []string
}

const propertyCaller = "usr_property"

func newWorld(t *rapid.T, db *store.DB) *world {
	n := worlds.Add(1)
	w := &world{t: t, ctx: context.Background(), db: db, live: map[string]compute.Object{},
		svc: &compute.Service{Names: fleet.Names{}, VaultConfigured: rapid.Bool().Draw(t, "vault")}}
	box, err := secrets.NewBox(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, suffix := range []string{"a", "b", "c"} {
		tenant := fmt.Sprintf("w%d-%s", n, suffix)
		if _, err := iam.CreateTenant(w.ctx, db, tenant, now); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"s1", "s2"} {
			if _, err := box.Create(w.ctx, db, tenant, name, "value-of-"+name, propertyCaller, now); err != nil {
				t.Fatal(err)
			}
		}
		w.tenants = append(w.tenants, tenant)
	}
	// Each tenant starts with a site, a pool and a flavor on it, and offers its pool to the next
	// tenant, so that random steps reach templates, quotas and offers often.
	for i, tenant := range w.tenants {
		site := w.mustCreate(compute.KindSite, map[string]any{"tenantId": tenant, "kind": "shared", "region": "eu-central"})
		pool := w.mustCreate(compute.KindPool, map[string]any{"tenantId": tenant, "siteId": site.ID, "class": "vps-host"})
		w.mustCreate(compute.KindFlavor, map[string]any{"tenantId": tenant, "poolId": pool.ID, "name": "g1.small", "vcpu": 2, "memoryGiB": 4, "diskGiB": 40})
		w.mustCreate(compute.KindOffer, map[string]any{"tenantId": tenant, "poolId": pool.ID, "toTenantId": w.tenants[(i+1)%len(w.tenants)]})
	}
	return w
}

func (w *world) mustCreate(kind string, in map[string]any) compute.Object {
	o, err := w.svc.Create(w.ctx, w.db, kind, propertyCaller, w.raw(in))
	if err != nil {
		w.t.Fatalf("create %s %v: %v", kind, in, err)
	}
	w.made(o)
	return o
}

// made records an object the API accepted (created or updated).
func (w *world) made(o compute.Object) {
	w.objects = append(w.objects, o)
	w.live[o.ID] = o
}

// step runs one random create (most often), update or removal.
func (w *world) step() {
	kind := rapid.SampledFrom(kindNames()).Draw(w.t, "kind")
	switch op := rapid.IntRange(0, 9).Draw(w.t, "op"); {
	case op < 6:
		w.create(kind)
	case op < 9:
		w.update(kind)
	default:
		w.remove(kind)
	}
}

// kindNames lists every kind, sandbox templates three times: they reference the most, so they
// are the most often refused.
func kindNames() []string {
	var out []string
	for _, k := range compute.Kinds {
		out = append(out, k.Kind)
	}
	return append(out, compute.KindSandboxTemplate, compute.KindSandboxTemplate)
}

// tenant draws a tenant of the world, most often the first.
func (w *world) tenant(label string) string {
	return w.tenants[[]int{0, 0, 0, 0, 1, 2}[rapid.IntRange(0, 5).Draw(w.t, label)]]
}

func (w *world) create(kind string) {
	info, _ := compute.Info(kind)
	tenant := w.tenant("tenant")
	g := gen{t: w.t, badOdds: rapid.SampledFrom([]int{0, 0, 6, 2}).Draw(w.t, "badOdds")}
	in := map[string]any{"tenantId": g.str("tenantId", rapid.Just(tenant), nil)}
	if rapid.IntRange(0, 3).Draw(w.t, "withKey") == 0 {
		key := g.str("key", rapid.SampledFrom([]string{"k1", "k2", "k3", "fleet:x -> y"}), genLong(255))
		in["idempotencyKey"] = key
		w.keys = append(w.keys, key)
	}
	if info.Named {
		in["name"] = g.str("name", genName(), nil)
	}
	w.fields(kind, tenant, g, in, nil)
	o, err := w.svc.Create(w.ctx, w.db, kind, propertyCaller, w.raw(in))
	if w.accepted("create "+kind, in, err) {
		w.made(o)
	}
}

func (w *world) update(kind string) {
	info, _ := compute.Info(kind)
	o, ok := w.pick(kind)
	if !ok || len(info.Updatable) == 0 {
		return
	}
	g := gen{t: w.t, badOdds: rapid.SampledFrom([]int{0, 6, 2}).Draw(w.t, "badOdds")}
	in := map[string]any{"tenantId": o.TenantID, "id": o.ID}
	if rapid.Bool().Draw(w.t, "withRevision") {
		in["revision"] = o.Revision + rapid.Int64Range(-1, 0).Draw(w.t, "stale")
	}
	w.fields(kind, o.TenantID, g, in, info.Updatable)
	up, err := w.svc.Update(w.ctx, w.db, kind, propertyCaller, w.raw(in))
	if w.accepted("update "+kind, in, err) {
		w.made(up)
	}
}

func (w *world) remove(kind string) {
	o, ok := w.pick(kind)
	if !ok {
		return
	}
	_, err := w.svc.Remove(w.ctx, w.db, kind, compute.Ref{TenantID: o.TenantID, ID: o.ID})
	if w.accepted("remove "+kind, map[string]any{"id": o.ID}, err) {
		delete(w.live, o.ID)
	}
}

// pick draws one of the live objects of kind, at its latest revision.
func (w *world) pick(kind string) (compute.Object, bool) {
	ids := w.liveIDs(kind, "")
	if len(ids) == 0 {
		return compute.Object{}, false
	}
	return w.live[rapid.SampledFrom(ids).Draw(w.t, "object")], true
}

// liveIDs lists the live objects of kind (of tenant, unless ""), in the order made.
func (w *world) liveIDs(kind, tenant string) []string {
	var ids []string
	seen := map[string]bool{}
	for _, o := range w.objects {
		if l, ok := w.live[o.ID]; ok && !seen[o.ID] && l.Kind == kind && (tenant == "" || l.TenantID == tenant) {
			seen[o.ID] = true
			ids = append(ids, o.ID)
		}
	}
	return ids
}

// accepted reports whether err is nil; any error but a client error fails the property.
func (w *world) accepted(what string, in map[string]any, err error) bool {
	if err == nil {
		return true
	}
	var ce *cubefleet.Error
	if !errors.As(err, &ce) {
		w.t.Fatalf("%s %v: %v, want nil or a client error", what, in, err)
	}
	switch ce.Code {
	case cubefleet.CodeInvalidInput, cubefleet.CodeConflict, cubefleet.CodeNotFound:
		return false
	}
	w.t.Fatalf("%s %v: %v, want nil or a client error", what, in, err)
	return false
}

func (w *world) raw(in map[string]any) json.RawMessage {
	b, err := json.Marshal(in)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// fields sets the spec fields of kind in in: all of them, or only those of only (an update; each
// then only sometimes, and sometimes as null).
func (w *world) fields(kind, tenant string, g gen, in map[string]any, only []string) {
	set := func(field string, value func() any) {
		if only != nil {
			if !contains(only, field) || !rapid.Bool().Draw(w.t, "change "+field) {
				return
			}
			if rapid.IntRange(0, 5).Draw(w.t, "null "+field) == 0 {
				in[field] = nil
				return
			}
		}
		in[field] = value()
	}
	optional := func(field string, value func() any) {
		if only == nil && rapid.Bool().Draw(w.t, "omit "+field) {
			return
		}
		set(field, value)
	}
	switch kind {
	case compute.KindSite:
		set("kind", func() any { return g.str("kind", rapid.SampledFrom([]string{"shared", "dedicated"}), nil) })
		set("region", func() any { return g.str("region", rapid.StringMatching(`[a-z0-9][a-z0-9-]{0,12}`), nil) })
	case compute.KindProviderAccount:
		set("provider", func() any {
			return g.str("provider", rapid.SampledFrom([]string{"hetzner-cloud", "ionos-cloud"}), nil)
		})
		optional("config", func() any {
			return g.strMap("config", rapid.SampledFrom([]string{"location", "token", "password", "api_key", "contract", "region.id"}),
				rapid.StringMatching(`[A-Za-z0-9_.-]{1,12}`), w.value(g, tenant))
		})
	case compute.KindPool:
		class := g.str("class", rapid.SampledFrom([]string{"vps-host", "provider"}), nil)
		set("siteId", func() any { return w.ref("siteId", compute.KindSite, tenant) })
		set("class", func() any { return class })
		optional("gpuModel", func() any { return g.str("gpuModel", rapid.StringMatching(`[A-Za-z0-9._-]{1,10}`), nil) })
		optional("policy", func() any {
			if rapid.IntRange(0, 4).Draw(w.t, "emptyPolicy") == 0 {
				return map[string]any{}
			}
			policy := map[string]any{"disruptionBudget": rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 5e-324, 1e-9, 0.1, 0.5, 1,
				1.0000001, -1e-9, 2}).Draw(w.t, "disruptionBudget")}
			if rapid.IntRange(0, 3).Draw(w.t, "egressPolicy") > 0 {
				var list []any
				for range rapid.IntRange(0, 3).Draw(w.t, "policy.egressAllow items") {
					list = append(list, g.str("policy.egressAllow item", rapid.SampledFrom([]string{"10.0.0.0/8", "10.20.0.0/16", "172.16.0.0/12",
						"192.168.0.0/16", "100.64.0.0/16", "fd12::/16"}), nil))
				}
				if g.bad("policy.egressAllow extra") {
					list = append(list, rapid.SampledFrom([]string{"10.20.0.1/16", "100.64.0.0/10", "198.51.100.0/24"}).Draw(w.t, "policy.egressAllow bad"))
				}
				policy["egressAllow"] = list
			}
			return policy
		})
		if class == "provider" || rapid.IntRange(0, 5).Draw(w.t, "strayAccount") == 0 {
			set("providerAccountId", func() any { return w.ref("providerAccountId", compute.KindProviderAccount, tenant) })
		}
	case compute.KindOwnerQuota:
		set("poolId", func() any { return w.ref("poolId", compute.KindPool, tenant) })
		set("resource", func() any { return g.str("resource", genResource(), nil) })
		set("max", func() any { return g.num("max", 0, 1<<53) })
	case compute.KindOffer:
		set("poolId", func() any { return w.ref("poolId", compute.KindPool, tenant) })
		set("toTenantId", func() any { return g.str("toTenantId", rapid.SampledFrom(w.tenants), nil) })
		optional("quota", func() any {
			q := map[string]any{}
			for range rapid.IntRange(0, 4).Draw(w.t, "quotaKeys") {
				q[g.str("quotaKey", genResource(), nil)] = g.num("quotaMax", 0, 1<<53)
			}
			return q
		})
		optional("priority", func() any { return g.num("priority", 0, 1000) })
	case compute.KindFlavor:
		set("poolId", func() any { return w.ref("poolId", compute.KindPool, tenant) })
		set("vcpu", func() any { return g.num("vcpu", 1, 4096) })
		set("memoryGiB", func() any { return g.num("memoryGiB", 1, 65536) })
		set("diskGiB", func() any { return g.num("diskGiB", 1, 1<<20) })
		optional("gpu", func() any { return g.num("gpu", 0, 64) })
	case compute.KindSandboxTemplate:
		flavor, pool := w.ref("flavorId", compute.KindFlavor, tenant), w.ref("poolId", compute.KindPool, tenant)
		if f, ok := w.live[flavor]; ok && rapid.IntRange(0, 4).Draw(w.t, "poolOfTheFlavor") > 0 {
			pool = f.ParentID
		}
		set("poolId", func() any { return pool })
		set("flavorId", func() any { return flavor })
		set("imageId", func() any {
			return g.str("imageId", rapid.StringMatching(`[a-z0-9][a-z0-9./:@-]{0,20}|bild-ä:1|ubuntu-24\.04`), genLong(255))
		})
		optional("env", func() any {
			return g.strMap("env", rapid.SampledFrom([]string{"API_TOKEN", "PIP_INDEX_URL", "LANG", "_X", "DB_PASSWORD"}),
				rapid.StringMatching(`[A-Za-z_][A-Za-z0-9_]{0,12}`), w.value(g, tenant))
		})
		set("network", func() any { return g.str("network", rapid.SampledFrom([]string{"private", "public"}), nil) })
		optional("runtime", func() any { return g.str("runtime", rapid.SampledFrom([]string{"process", "microvm"}), nil) })
		optional("egressAllow", func() any {
			var list []any
			for range rapid.IntRange(0, 3).Draw(w.t, "egressAllow items") {
				list = append(list, g.str("egressAllow item", rapid.SampledFrom([]string{"10.20.0.0/16", "172.16.5.0/24", "192.168.7.1/32",
					"100.64.0.0/16", "fd12:3456::/32", "10.0.0.0/8"}), nil))
			}
			if g.bad("egressAllow extra") {
				list = append(list, rapid.SampledFrom([]string{"10.20.0.1/16", "100.64.0.0/10", "169.254.0.0/16", "198.51.100.0/24"}).Draw(w.t, "egressAllow bad"))
			}
			return list
		})
		optional("warm", func() any {
			lo := g.num("warm.min", 0, 1000)
			hi := lo + g.num("warm.extra", 0, 1000-max(0, min(lo, 1000)))
			if g.bad("warm.order") {
				hi = lo - 1
			}
			return map[string]any{"min": lo, "max": hi}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ref draws a reference for an object of tenant: most often a live object of kind of the same
// tenant; else one of any tenant, the id of any object made so far (of any kind, removed ones
// included), a key: reference, a well-formed id nothing has, or junk.
func (w *world) ref(label, kind, tenant string) string {
	info, _ := compute.Info(kind)
	var ids []string
	for _, o := range w.objects {
		ids = append(ids, o.ID)
	}
	switch rapid.IntRange(0, 11).Draw(w.t, label+" form") {
	case 0:
		if len(ids) > 0 {
			return rapid.SampledFrom(ids).Draw(w.t, label)
		}
	case 1:
		if len(w.keys) > 0 {
			return compute.KeyRef(rapid.SampledFrom(w.keys).Draw(w.t, label))
		}
	case 2:
		return rapid.SampledFrom([]string{"", "nope", info.Prefix + "_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5", "key:"}).Draw(w.t, label)
	case 3, 4:
		if any := w.liveIDs(kind, ""); len(any) > 0 {
			return rapid.SampledFrom(any).Draw(w.t, label)
		}
	}
	if own := w.liveIDs(kind, tenant); len(own) > 0 {
		return rapid.SampledFrom(own).Draw(w.t, label)
	}
	return cubefleet.NewID(info.Prefix)
}

// value draws a config or env value for an object of tenant: plain text or a reference to one of
// its secrets, the environment or Vault; with the bad odds, a reference to a missing secret or
// another tenant's, a malformed reference, a literal secret, or a value around the length limit.
func (w *world) value(g gen, tenant string) *rapid.Generator[string] {
	other := w.tenants[0]
	if other == tenant {
		other = w.tenants[1]
	}
	return rapid.Custom(func(t *rapid.T) string {
		if !g.bad("value") {
			return rapid.OneOf(rapid.StringMatching(`[a-z0-9./:-]{0,12}`),
				rapid.SampledFrom([]string{"secret://s1", "secret://s2", "secret://" + tenant + "/s1", "env://IONOS_TOKEN",
					"vault://kv/ionos#token", "https://pypi.example.com/simple", strings.Repeat("é", 4096)})).Draw(t, "value")
		}
		return rapid.SampledFrom([]string{"secret://s3", "secret://" + other + "/s1", "secret:/s1", "hunter2", "",
			strings.Repeat("é", 4097), strings.Repeat("v", 4097), "\x00\u00a0"}).Draw(t, "value")
	})
}

// gen draws field values: a valid value, or with odds 1 in badOdds (never when 0) a value near
// or past the rule: with a tricky character inserted, at a length limit, or off by one.
type gen struct {
	t       *rapid.T
	badOdds int
}

func (g gen) bad(label string) bool {
	return g.badOdds > 0 && rapid.IntRange(1, g.badOdds).Draw(g.t, label+" bad") == 1
}

// tricky holds characters the rules treat specially: control characters, every kind of space,
// format characters, non-ASCII letters, a character beyond the BMP, invalid UTF-8, punctuation.
var tricky = []string{"\u00a0", "\x00", " ", "\t", "\n", "\v", "\f", "\r", "\u0085", "\u2028", "\u2029", "\u3000", "\u1680",
	"\u200b", "\ufeff", "\u007f", "\u0080", "\u009f", "é", "😀", "\ufffd", "\xff", "A", "Z", "/", ":", ".", "_", "-", "#", `"`, `\`}

func (g gen) str(label string, valid *rapid.Generator[string], long *rapid.Generator[string]) string {
	s := valid.Draw(g.t, label)
	if !g.bad(label) {
		return s
	}
	switch rapid.IntRange(0, 3).Draw(g.t, label+" how") {
	case 0:
		i := rapid.IntRange(0, len(s)).Draw(g.t, label+" at")
		return s[:i] + rapid.SampledFrom(tricky).Draw(g.t, label+" char") + s[i:]
	case 1:
		if long != nil {
			return long.Draw(g.t, label+" long")
		}
		return genLong(63).Draw(g.t, label+" long")
	case 2:
		return strings.ToUpper(s)
	}
	return ""
}

// genLong draws strings around a length limit, of characters valid almost everywhere.
func genLong(limit int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		n := rapid.IntRange(limit-1, limit+1).Draw(t, "length")
		c := rapid.SampledFrom([]string{"a", "é", "😀"}).Draw(t, "char")
		return strings.Repeat(c, n)
	})
}

// num draws a whole number in [lo, hi], or with the bad odds one at or past a bound or an
// extreme.
func (g gen) num(label string, lo, hi int64) int64 {
	if !g.bad(label) {
		return rapid.OneOf(rapid.Int64Range(lo, min(hi, lo+16)), rapid.Int64Range(lo, hi)).Draw(g.t, label)
	}
	return rapid.SampledFrom([]int64{lo - 1, lo, hi, hi + 1, -1, 1 << 53, 1<<53 + 1, math.MaxInt64, math.MinInt64}).Draw(g.t, label)
}

// strMap draws a config or env map: keys from names or pattern (some spoiled, some repeated
// case-insensitively), values from values; with the bad odds, sometimes past the key limit.
func (g gen) strMap(label string, names, pattern, values *rapid.Generator[string]) map[string]any {
	m := map[string]any{}
	n := rapid.IntRange(0, 4).Draw(g.t, label+" keys")
	if g.bad(label + " size") {
		n = rapid.SampledFrom([]int{256, 257}).Draw(g.t, label+" keys")
	}
	for i := range n {
		var k string
		if i < 4 {
			k = g.str(label+" key", rapid.OneOf(names, pattern), nil)
		} else {
			k = fmt.Sprintf("K%d", i)
		}
		m[k] = values.Draw(g.t, label+" value")
	}
	return m
}

func genName() *rapid.Generator[string] {
	return rapid.OneOf(rapid.StringMatching(`[a-z0-9][a-z0-9._-]{0,10}`), rapid.StringMatching(`[a-z][a-z0-9]{61,62}`))
}

func genResource() *rapid.Generator[string] {
	return rapid.OneOf(rapid.SampledFrom([]string{"vcpu", "memoryGiB", "diskGiB", "gpu", "sandboxes"}),
		rapid.StringMatching(`[A-Za-z][A-Za-z0-9._-]{0,10}`))
}

// checkExport exports tenant's fleet and checks the document: Decode and the JSON Schema accept
// it, nothing is missing, and it plans to no call and no blocked change, with prune and without.
func (w *world) checkExport(tenant string, schema *jsonschema.Schema) {
	p := &fleet.Planner{Compute: w.svc, VaultConfigured: w.svc.VaultConfigured}
	exp, err := p.Export(w.ctx, w.db, tenant)
	if err != nil {
		w.t.Fatalf("export %s: %v", tenant, err)
	}
	if len(exp.Missing) > 0 {
		w.t.Fatalf("export %s left out %v", tenant, exp.Missing)
	}
	raw, err := json.Marshal(exp.Config)
	if err != nil {
		w.t.Fatal(err)
	}
	doc, err := document.Decode(raw)
	if err != nil {
		w.t.Fatalf("the export of %s does not decode: %v\n%s", tenant, err, raw)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		w.t.Fatal(err)
	}
	if err := schema.Validate(inst); err != nil {
		w.t.Fatalf("the JSON Schema refuses the export of %s: %v\n%s", tenant, err, raw)
	}
	for _, prune := range []bool{false, true} {
		pl, err := p.Plan(w.ctx, w.db, tenant, doc, prune)
		if err != nil {
			w.t.Fatalf("plan the export of %s (prune %v): %v\n%s", tenant, prune, err, raw)
		}
		if len(pl.Calls) > 0 || pl.Summary.Blocked || pl.Summary.Create+pl.Summary.Update+pl.Summary.Delete > 0 {
			var changes []string
			for _, c := range pl.Changes {
				if c.Action != fleet.ActionUnchanged || c.Blocked {
					changes = append(changes, fmt.Sprintf("%s %s %s %v blocked=%v %s", c.Action, c.Kind, c.Name, c.Fields, c.Blocked, c.Note))
				}
			}
			w.t.Fatalf("the export of %s plans changes (prune %v):\n%s\n%s", tenant, prune, strings.Join(changes, "\n"), raw)
		}
	}
}
