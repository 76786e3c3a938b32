package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/secrets"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var modules = []store.Module{iam.Module, audit.Module, compute.Module, secrets.Module, fleet.Module}

// seed creates the tenants root, acme and globex and root's secrets hetzner and pip-index.
func seed(t testing.TB, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	for _, id := range []string{"root", "acme", "globex"} {
		if _, err := iam.CreateTenant(ctx, db, id, now); err != nil {
			t.Fatal(err)
		}
	}
	box, err := secrets.NewBox(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hetzner", "pip-index"} {
		if _, err := box.Create(ctx, db, "root", name, "value-of-"+name, "svc_test", now); err != nil {
			t.Fatal(err)
		}
	}
}

func exampleDoc(t testing.TB) *document.Document {
	t.Helper()
	data, err := os.ReadFile("../../examples/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := document.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func decode(t testing.TB, s string) *document.Document {
	t.Helper()
	doc, err := document.Decode([]byte(s))
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return doc
}

func TestPlanExampleOnEmptyFleet(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		p := &fleet.Planner{Compute: &compute.Service{}}
		pl, err := p.Plan(ctx, db, "root", exampleDoc(t), false)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Summary.Blocked {
			t.Fatalf("blocked: %+v", pl.Changes)
		}
		var methods []string
		for _, c := range pl.Calls {
			methods = append(methods, c.Method+" "+c.Name)
		}
		want := []string{
			"compute.providerAccounts.create cloud",
			"compute.sites.create fra",
			"compute.pools.create vps-fra",
			"compute.pools.create burst",
			"compute.ownerQuotas.create vps-fra:gpu",
			"compute.offers.create vps-fra -> acme",
			"compute.flavors.create vps-fra/g1.small",
			"compute.sandboxTemplates.create py-small",
		}
		if !slices.Equal(methods, want) {
			t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(methods, "\n"), strings.Join(want, "\n"))
		}
		if pl.Summary.Create != 8 || pl.Summary.Update != 0 || pl.Summary.Delete != 0 {
			t.Errorf("summary = %+v", pl.Summary)
		}
		// Creates carry the idempotency key and reference new objects by key, never by id.
		var pool map[string]any
		raw, _ := json.Marshal(pl.Calls[2].Input)
		json.Unmarshal(raw, &pool)
		if pool["idempotencyKey"] != "fleet:root:pool:vps-fra" || pool["siteId"] != "key:fleet:root:site:fra" {
			t.Errorf("pool create input = %v", pool)
		}
		again, err := p.Plan(ctx, db, "root", exampleDoc(t), false)
		if err != nil {
			t.Fatal(err)
		}
		if again.PlanHash != pl.PlanHash || len(pl.PlanHash) != 64 {
			t.Errorf("planHash %q then %q", pl.PlanHash, again.PlanHash)
		}
	})
}

func TestPlanBlocked(t *testing.T) {
	cases := []struct {
		name     string
		doc      string
		disabled map[string]bool
		kind     string
		note     string
	}{
		{"offer to owner", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host","offers":[{"tenant":"root"}]}]}`, nil, "offer", "own owner"},
		{"offer to unknown tenant", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host","offers":[{"tenant":"nobody"}]}]}`, nil, "offer", "does not exist"},
		{"unknown site", `{"version":1,"pools":[{"name":"p","site":"nowhere","class":"vps-host"}]}`, nil, "pool", "unknown site"},
		{"unknown provider account", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"provider","providerAccount":"x"}]}`, nil, "pool", "unknown provider account"},
		{"unknown pool of a flavor", `{"version":1,"flavors":[{"pool":"nope","name":"f","vcpu":1,"memoryGiB":1,"diskGiB":1}]}`, nil, "flavor", "unknown pool"},
		{"unknown flavor of a template", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host"}],"sandboxTemplates":[{"name":"t","pool":"p","flavor":"nope","imageId":"img","network":"private"}]}`, nil, "sandboxTemplate", "unknown flavor"},
		{"missing secret", `{"version":1,"providerAccounts":[{"name":"a","provider":"ionos-cloud","config":{"token":"secret://nope"}}]}`, nil, "providerAccount", "no secret nope"},
		{"another tenant's secret", `{"version":1,"providerAccounts":[{"name":"a","provider":"ionos-cloud","config":{"token":"secret://acme/x"}}]}`, nil, "providerAccount", "names tenant acme's secrets"},
		{"vault without a server", `{"version":1,"providerAccounts":[{"name":"a","provider":"ionos-cloud","config":{"token":"vault://kv/ionos#token"}}]}`, nil, "providerAccount", "--vault-addr"},
		{"unknown pool id", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"pool_01JAAAAAAAAAAAAAAAAAAAAAAA","site":"fra","class":"vps-host"}]}`, nil, "pool", "no pool"},
		{"flavors without vps", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host"}],"flavors":[{"pool":"p","name":"f","vcpu":1,"memoryGiB":1,"diskGiB":1}]}`, map[string]bool{compute.ModuleVPS: true}, "flavor", "this deployment does not run sandboxes"},
		{"templates without template support", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"p","site":"fra","class":"vps-host"}],"flavors":[{"pool":"p","name":"f","vcpu":1,"memoryGiB":1,"diskGiB":1}],"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"img","network":"private"}]}`, map[string]bool{compute.ModuleTemplates: true}, "sandboxTemplate", "this deployment does not run sandboxes (vps v0.5)"},
	}
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := &fleet.Planner{Compute: &compute.Service{Disabled: tc.disabled}}
				pl, err := p.Plan(context.Background(), db, "root", decode(t, tc.doc), false)
				if err != nil {
					t.Fatal(err)
				}
				if !pl.Summary.Blocked {
					t.Fatalf("plan not blocked: %+v", pl.Changes)
				}
				for _, c := range pl.Changes {
					if c.Blocked && c.Kind == tc.kind && strings.Contains(c.Note, tc.note) {
						return
					}
				}
				t.Fatalf("no blocked %s change noting %q in %+v", tc.kind, tc.note, pl.Changes)
			})
		}
	})
}

func TestPlanRefusesADocumentOverTheObjectLimit(t *testing.T) {
	db := storetest.SQLite(t, modules...)
	seed(t, db)
	doc := &document.Document{Version: 1}
	for i := range 100 {
		quota := map[string]int64{}
		for k := range 201 {
			quota[fmt.Sprintf("r%d", k)] = 1
		}
		doc.Pools = append(doc.Pools, document.Pool{Name: fmt.Sprintf("p%d", i), Site: "fra", Class: "vps-host", OwnerQuota: quota})
	}
	_, err := (&fleet.Planner{}).Plan(context.Background(), db, "root", doc, false)
	if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "20200 objects") {
		t.Fatalf("plan of 20,200 objects = %v, want INVALID_INPUT naming the count", err)
	}
}

// TestPlanNamesWhatTheDocumentNoLongerLists: without prune, the objects a document leaves out
// are kept, and the plan lists them (NotInDocument: what --prune would delete); sites are never
// deleted, so they are not listed. With prune they are deletes and the list is empty.
func TestPlanNamesWhatTheDocumentNoLongerLists(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		a := &fleet.Applier{DB: db, Planner: &fleet.Planner{Compute: &compute.Service{Names: fleet.Names{}}}, Now: time.Now}
		p := caller()
		if _, err := a.Apply(ctx, p, fleet.ApplyInput{TenantID: "root", Document: exampleDoc(t),
			Audit: audit.Entry{TenantID: "root", PrincipalID: p.ID, Method: "fleet.apply", Permission: iam.PermFleetAdmin, Scope: iam.ScopeFleet, Outcome: audit.OutcomeOK}}); err != nil {
			t.Fatal(err)
		}
		trimmed := exampleDoc(t)
		trimmed.Sites = nil
		trimmed.Pools[0].Offers = nil
		trimmed.SandboxTemplates = nil
		trimmed.Pools[0].Site = "fra" // the site stays, by its fleet name
		pl, err := a.Planner.Plan(ctx, db, "root", trimmed, false)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range pl.NotInDocument {
			got = append(got, o.Kind+" "+o.Name)
		}
		want := []string{"sandboxTemplate py-small", "offer vps-fra -> acme"}
		if !slices.Equal(got, want) {
			t.Errorf("notInDocument = %q, want %q", got, want)
		}
		if pl.Summary.Delete != 0 || len(pl.Calls) != 0 {
			t.Errorf("without prune the plan deletes: %+v %+v", pl.Summary, pl.Calls)
		}
		pruned, err := a.Planner.Plan(ctx, db, "root", trimmed, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(pruned.NotInDocument) != 0 || pruned.Summary.Delete != 2 {
			t.Errorf("with prune: notInDocument %+v, summary %+v; want none and 2 deletes", pruned.NotInDocument, pruned.Summary)
		}
		if pruned.PlanHash == pl.PlanHash {
			t.Error("the pruned plan has the plan's hash")
		}
	})
}
