package fleet_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// runtimeDoc is a fleet with a microvm template that opens two private prefixes and a process
// template, on SQLite and PostgreSQL alike.
func runtimeDoc(vmRuntime, allow string) string {
	return `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu-central"}],
		"pools":[{"name":"vps-fra","site":"fra","class":"vps-host","policy":{"egressAllow":["10.0.0.0/8","fd12::/16"]}}],
		"flavors":[{"pool":"vps-fra","name":"g1.small","vcpu":2,"memoryGiB":4,"diskGiB":40}],
		"sandboxTemplates":[
			{"name":"vm","pool":"vps-fra","flavor":"g1.small","imageId":"busybox","network":"public","runtime":"` + vmRuntime + `","egressAllow":` + allow + `},
			{"name":"proc","pool":"vps-fra","flavor":"g1.small","imageId":"ubuntu-24.04","network":"private","runtime":"process"}]}`
}

// TestTemplateRuntimeAndEgressAllowRoundTrip: a template's runtime and egressAllow are applied
// to compute, exported as they were written (so the export plans clean), and a change of either
// is an update of that field alone, which apply carries out.
func TestTemplateRuntimeAndEgressAllowRoundTrip(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		seed(t, db)
		ctx := context.Background()
		svc := &compute.Service{Names: fleet.Names{}}
		planner := &fleet.Planner{Compute: svc}
		a := &fleet.Applier{DB: db, Planner: planner}
		apply := func(doc string) {
			t.Helper()
			if _, err := a.Apply(ctx, caller(), fleet.ApplyInput{TenantID: "root", Document: decode(t, doc)}); err != nil {
				t.Fatal(err)
			}
		}
		export := func() map[string][2]any {
			t.Helper()
			exp, err := planner.Export(ctx, db, "root")
			if err != nil {
				t.Fatal(err)
			}
			out := map[string][2]any{}
			for _, tpl := range exp.Config.SandboxTemplates {
				out[tpl.Name] = [2]any{tpl.Runtime, strings.Join(tpl.EgressAllow, ",")}
			}
			// The export plans clean against the fleet it came from.
			pl, err := planner.Plan(ctx, db, "root", exp.Config, true)
			if err != nil || len(pl.Calls) != 0 || pl.Summary.Blocked {
				t.Fatalf("the export does not plan clean: %+v (%v)", pl.Changes, err)
			}
			return out
		}
		apply(runtimeDoc("microvm", `["10.20.0.0/16","fd12:3456::/32"]`))
		got := export()
		if got["vm"] != [2]any{"microvm", "10.20.0.0/16,fd12:3456::/32"} || got["proc"] != [2]any{"process", ""} {
			t.Fatalf("export = %v", got)
		}

		for _, tc := range []struct {
			doc   string
			field string
			want  [2]any
		}{
			{runtimeDoc("process", `["10.20.0.0/16","fd12:3456::/32"]`), "runtime", [2]any{"process", "10.20.0.0/16,fd12:3456::/32"}},
			{runtimeDoc("process", `["10.30.0.0/16"]`), "egressAllow", [2]any{"process", "10.30.0.0/16"}},
			{strings.Replace(runtimeDoc("process", `[]`), `,"egressAllow":[]`, "", 1), "egressAllow", [2]any{"process", ""}},
			{strings.Replace(runtimeDoc("process", `[]`), `"runtime":"process","egressAllow":[]`, `"egressAllow":[]`, 1), "runtime", [2]any{"", ""}},
		} {
			pl, err := planner.Plan(ctx, db, "root", decode(t, tc.doc), false)
			if err != nil {
				t.Fatal(err)
			}
			var vm *fleet.Change
			for i, c := range pl.Changes {
				if c.Kind == compute.KindSandboxTemplate && c.Name == "vm" {
					vm = &pl.Changes[i]
				}
				if c.Name == "proc" && c.Action != fleet.ActionUnchanged {
					t.Errorf("proc changed: %+v", c)
				}
			}
			if vm == nil || vm.Action != fleet.ActionUpdate || !slices.Equal(vm.Fields, []string{tc.field}) || vm.Blocked {
				t.Fatalf("the change of %s: %+v, want an update of %s alone", tc.field, vm, tc.field)
			}
			apply(tc.doc)
			if got := export(); got["vm"] != tc.want {
				t.Errorf("after changing %s: export = %v, want %v", tc.field, got["vm"], tc.want)
			}
		}
	})
}
