package server

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// Three generations of a document that together take every action of every kind.
const (
	docV1 = `{"version":1,
 "sites":[{"name":"fra","kind":"shared","region":"eu-central"}],
 "providerAccounts":[{"name":"cloud","provider":"hetzner-cloud","config":{"token":"secret://hetzner","location":"fsn1"}}],
 "pools":[
  {"name":"vps-fra","site":"fra","class":"vps-host","gpuModel":"L40S","policy":{"disruptionBudget":0.1},"ownerQuota":{"gpu":8},
   "offers":[{"tenant":"acme","quota":{"vcpu":64,"gpu":2},"priority":5}]},
  {"name":"burst","site":"fra","class":"provider","providerAccount":"cloud"}],
 "flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":2,"memoryGiB":4,"diskGiB":40}],
 "sandboxTemplates":[{"name":"py-small","pool":"vps-fra","flavor":"g1.small","imageId":"ubuntu-24.04","env":{"PIP_INDEX_URL":"secret://pip-index"},"network":"private","warm":{"min":2,"max":4}}]}`

	docV2 = `{"version":1,
 "sites":[{"name":"fra","kind":"shared","region":"eu-central"},{"name":"muc","kind":"dedicated","region":"eu-south"}],
 "providerAccounts":[{"name":"cloud","provider":"hetzner-cloud","config":{"token":"secret://hetzner","location":"nbg1"}},
  {"name":"spare","provider":"ionos-cloud","config":{"token":"env://IONOS_TOKEN"}}],
 "pools":[
  {"name":"vps-fra","site":"fra","class":"vps-host","gpuModel":"H100","policy":{"disruptionBudget":0.2},"ownerQuota":{"gpu":16,"sandboxes":100},
   "offers":[{"tenant":"acme","quota":{"vcpu":32,"gpu":2},"priority":7},{"tenant":"globex","quota":{"vcpu":8}}]}],
 "flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":4,"memoryGiB":4,"diskGiB":40},{"pool":"vps-fra","name":"g1.large","vcpu":16,"memoryGiB":64,"diskGiB":200}],
 "sandboxTemplates":[{"name":"py-small","pool":"vps-fra","flavor":"g1.small","imageId":"ubuntu-26.04","env":{"PIP_INDEX_URL":"secret://pip-index"},"network":"private","warm":{"min":2,"max":4}},
  {"name":"py-large","pool":"vps-fra","flavor":"g1.large","imageId":"ubuntu-26.04","network":"public"}]}`

	docV3 = `{"version":1,
 "sites":[{"name":"fra","kind":"shared","region":"eu-central"},{"name":"muc","kind":"dedicated","region":"eu-south"}],
 "providerAccounts":[{"name":"cloud","provider":"hetzner-cloud","config":{"token":"secret://hetzner","location":"nbg1"}}],
 "pools":[
  {"name":"vps-fra","site":"fra","class":"vps-host","gpuModel":"H100","policy":{"disruptionBudget":0.2},"ownerQuota":{"gpu":16},
   "offers":[{"tenant":"acme","quota":{"vcpu":32,"gpu":2},"priority":7}]}],
 "flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":4,"memoryGiB":4,"diskGiB":40}],
 "sandboxTemplates":[{"name":"py-small","pool":"vps-fra","flavor":"g1.small","imageId":"ubuntu-26.04","env":{"PIP_INDEX_URL":"secret://pip-index"},"network":"private","warm":{"min":2,"max":4}}]}`
)

func raw(s string) any { return jsonRaw(s) }

type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

func TestFleetEveryActionOfEveryKind(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}

		p2 := e.plan(e.admin, raw(docV2), true)
		want2 := []string{
			"~ providerAccount cloud (config)",
			"+ providerAccount spare",
			"+ site muc",
			"~ pool vps-fra (gpuModel, policy)",
			"~ ownerQuota vps-fra:gpu (max)",
			"+ ownerQuota vps-fra:sandboxes",
			"~ offer vps-fra -> acme (quota, priority)",
			"+ offer vps-fra -> globex",
			"~ flavor vps-fra/g1.small (vcpu)",
			"+ flavor vps-fra/g1.large",
			"~ sandboxTemplate py-small (imageId)",
			"+ sandboxTemplate py-large",
			"- pool burst",
		}
		if got := p2.lines(); !slices.Equal(got, want2) {
			t.Fatalf("plan v2:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want2, "\n"))
		}
		wantOrder := []string{
			"compute.providerAccounts.update", "compute.providerAccounts.create", "compute.sites.create",
			"compute.pools.update", "compute.ownerQuotas.update", "compute.ownerQuotas.create",
			"compute.offers.update", "compute.offers.create", "compute.flavors.update", "compute.flavors.create",
			"compute.sandboxTemplates.update", "compute.sandboxTemplates.create", "compute.pools.archive",
		}
		var order []string
		for _, c := range p2.Calls {
			order = append(order, c.Method)
		}
		if !slices.Equal(order, wantOrder) {
			t.Fatalf("call order:\n%s\nwant:\n%s", strings.Join(order, "\n"), strings.Join(wantOrder, "\n"))
		}
		if n, err := e.apply(e.admin, raw(docV2), true, p2.PlanHash); err != nil || n != len(wantOrder) {
			t.Fatalf("apply v2 = %d, %v", n, err)
		}
		if p := e.plan(e.admin, raw(docV2), true); len(p.Calls) != 0 {
			t.Fatalf("v2 did not converge: %v", p.lines())
		}

		// Without prune, what the document leaves out stays.
		if p := e.plan(e.admin, raw(docV3), false); len(p.Calls) != 0 {
			t.Fatalf("v3 without prune: %v", p.lines())
		}
		p3 := e.plan(e.admin, raw(docV3), true)
		want3 := []string{
			"- ownerQuota vps-fra:sandboxes",
			"- offer vps-fra -> globex",
			"- flavor vps-fra/g1.large",
			"- providerAccount spare",
			"- sandboxTemplate py-large",
		}
		got3 := p3.lines()
		slices.Sort(got3)
		slices.Sort(want3)
		if !slices.Equal(got3, want3) {
			t.Fatalf("plan v3:\n%s\nwant:\n%s", strings.Join(got3, "\n"), strings.Join(want3, "\n"))
		}
		order = order[:0]
		for _, c := range p3.Calls {
			order = append(order, c.Method)
		}
		wantOrder3 := []string{"compute.ownerQuotas.delete", "compute.sandboxTemplates.delete", "compute.flavors.delete", "compute.offers.delete", "compute.providerAccounts.delete"}
		if !slices.Equal(order, wantOrder3) {
			t.Fatalf("v3 call order: %v, want %v", order, wantOrder3)
		}
		if _, err := e.apply(e.admin, raw(docV3), true, p3.PlanHash); err != nil {
			t.Fatal(err)
		}
		if p := e.plan(e.admin, raw(docV3), true); len(p.Calls) != 0 {
			t.Fatalf("v3 did not converge: %v", p.lines())
		}
		// Pruning the flavor a kept template uses is blocked, and so is the apply.
		noFlavor := strings.Replace(docV3, `"flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":4,"memoryGiB":4,"diskGiB":40}],`, "", 1)
		p4 := e.plan(e.admin, raw(noFlavor), true)
		if !p4.Summary.Blocked || !slices.Contains(p4.lines(), "! flavor vps-fra/g1.small") {
			t.Fatalf("deleting a used flavor: %v", p4.lines())
		}
		if _, err := e.apply(e.admin, raw(noFlavor), true, ""); !cubefleet.IsCode(err, cubefleet.CodePlanBlocked) {
			t.Fatalf("apply of a blocked plan = %v, want PLAN_BLOCKED", err)
		}
		// Pruning never deletes a site: the change is a note.
		noMuc := strings.Replace(docV3, `,{"name":"muc","kind":"dedicated","region":"eu-south"}`, "", 1)
		pm := e.plan(e.admin, raw(noMuc), true)
		if len(pm.Calls) != 0 || pm.Summary.Blocked {
			t.Fatalf("pruning a site planned calls: %v", pm.lines())
		}
		noted := false
		for _, c := range pm.Changes {
			noted = noted || (c.Kind == "site" && c.Name == "muc" && c.Action == "unchanged" && strings.Contains(c.Note, "never deletes a site"))
		}
		if !noted {
			t.Fatalf("no note for the site the document leaves out: %+v", pm.Changes)
		}
		// A fixed field cannot change.
		moved := strings.Replace(docV3, `"region":"eu-south"`, `"region":"eu-west"`, 1)
		if p := e.plan(e.admin, raw(moved), false); !p.Summary.Blocked || !slices.Contains(p.lines(), "! site muc (region)") {
			t.Fatalf("changing a site's region: %v", p.lines())
		}
	})
}

func TestFleetApplyIsAllOrNothing(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}
		p := e.plan(e.admin, raw(docV2), true)
		before := dump(t, db)
		injected := errors.New("injected fault")
		for i := range p.Calls {
			e.srv.hooks.beforeCall = func(n int) error {
				if n == i {
					return injected
				}
				return nil
			}
			if _, err := e.apply(e.admin, raw(docV2), true, p.PlanHash); err == nil {
				t.Fatalf("apply with a fault at call %d succeeded", i)
			}
			if dump(t, db) != before {
				t.Fatalf("a fault at call %d of %d left a partial apply", i, len(p.Calls))
			}
		}
		e.srv.hooks.beforeCall = nil
		if _, err := e.apply(e.admin, raw(docV2), true, p.PlanHash); err != nil {
			t.Fatal(err)
		}
		// A retried apply creates nothing more.
		var objects int
		db.QueryRow(`SELECT count(*) FROM compute_objects`).Scan(&objects)
		if n, err := e.apply(e.admin, raw(docV2), true, ""); err != nil || n != 0 {
			t.Fatalf("retried apply = %d, %v", n, err)
		}
		var after int
		db.QueryRow(`SELECT count(*) FROM compute_objects`).Scan(&after)
		if after != objects {
			t.Fatalf("retried apply: %d objects, then %d", objects, after)
		}
	})
}

func TestFleetApplyRefusesAHandEditBetweenCheckAndCommit(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		if _, err := e.apply(e.admin, raw(docV1), false, ""); err != nil {
			t.Fatal(err)
		}
		poolID := e.poolID("vps-fra")
		p := e.plan(e.admin, raw(docV2), false)
		e.srv.hooks.afterCheck = func() {
			e.mustCall(e.admin, "compute.pools.update", map[string]any{"tenantId": "root", "id": poolID, "gpuModel": "A100"}, nil)
		}
		before := dump(t, db)
		_, err := e.apply(e.admin, raw(docV2), false, p.PlanHash)
		e.srv.hooks.afterCheck = nil
		if !cubefleet.IsCode(err, cubefleet.CodeConfigDrift) {
			t.Fatalf("apply after a hand edit = %v, want CONFIG_DRIFT", err)
		}
		// Only the hand edit (and its audit row) landed.
		var gpu string
		db.QueryRow(`SELECT spec FROM compute_objects WHERE id = $1`, poolID).Scan(&gpu)
		if !strings.Contains(gpu, "A100") || dump(t, db) == before {
			t.Fatalf("the hand edit did not land: %s", gpu)
		}
		var fleetCalls int
		db.QueryRow(`SELECT count(*) FROM compute_objects WHERE kind = 'site'`).Scan(&fleetCalls)
		if fleetCalls != 1 {
			t.Fatalf("sites = %d: the refused apply created some", fleetCalls)
		}
		// The hand edit also changes the plan hash a reviewer saw.
		if again := e.plan(e.admin, raw(docV2), false); again.PlanHash == p.PlanHash {
			t.Fatal("a hand edit left the planHash unchanged")
		}
	})
}

func TestFleetApplyDecidesEveryCallAsTheCaller(t *testing.T) {
	storetest.Each(t, controlplane.Modules(), func(t *testing.T, db *store.DB) {
		e := newFleetEnv(t, db)
		var key struct {
			Token string `json:"token"`
		}
		e.mustCall(e.admin, "iam.keys.create", map[string]any{"tenantId": "root", "name": "ci", "grants": []string{"compute:fleet:admin@compute-fleet/global"}}, &key)
		// Planning needs only the fleet permission, and the plan is the same for every key.
		if a, b := e.plan(key.Token, raw(docV1), false), e.plan(e.admin, raw(docV1), false); a.PlanHash != b.PlanHash {
			t.Fatalf("planHash differs between keys: %s, %s", a.PlanHash, b.PlanHash)
		}
		before := dump(t, db)
		_, err := e.apply(key.Token, raw(docV1), false, "")
		if !cubefleet.IsCode(err, cubefleet.CodeForbidden) {
			t.Fatalf("apply without the call permissions = %v, want FORBIDDEN", err)
		}
		var refused int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE outcome = 'forbidden' AND method = 'compute.providerAccounts.create'`).Scan(&refused)
		if refused != 1 {
			t.Fatalf("forbidden audit rows = %d, want 1", refused)
		}
		var objects int
		db.QueryRow(`SELECT count(*) FROM compute_objects`).Scan(&objects)
		if objects != 0 || dump(t, db) == before && refused == 0 {
			t.Fatalf("a refused apply created %d objects", objects)
		}
	})
}
