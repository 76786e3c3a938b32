package compute_test

import (
	"bytes"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/compute"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestOpsRunAsTheirInputs runs typed operations (compute.Op, what fleet apply hands compute)
// and checks they store what the same call's JSON input stores, update and remove as Update
// and Remove do, and break the input rules with the same errors.
func TestOpsRunAsTheirInputs(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		b := e.base("root")
		run := func(op compute.Op) (compute.Object, error) { return e.svc.Run(e.ctx, e.db, caller, op) }
		spec := compute.SandboxTemplateSpec{PoolID: b.pool.ID, FlavorID: b.flavor.ID, ImageID: "ubuntu-24.04", Network: "private",
			Env: map[string]string{"MODE": "batch"}, Warm: &compute.Warm{Min: 1, Max: 2}}
		typed, err := run(compute.Op{Verb: compute.VerbCreate, Kind: compute.KindSandboxTemplate, Ref: compute.Ref{TenantID: "root"}, IdempotencyKey: "k-typed", Name: "py", Spec: spec})
		if err != nil {
			t.Fatalf("create op: %v", err)
		}
		fromJSON := e.mustCreate(compute.KindSandboxTemplate, map[string]any{"tenantId": "root", "idempotencyKey": "k-json", "name": "py2", "poolId": b.pool.ID, "flavorId": b.flavor.ID,
			"imageId": "ubuntu-24.04", "network": "private", "env": map[string]string{"MODE": "batch"}, "warm": map[string]any{"min": 1, "max": 2}})
		if !bytes.Equal(typed.Spec, fromJSON.Spec) || typed.Name != "py" || typed.ID != cubefleet.DerivedID("tpl", "k-typed", caller) {
			t.Errorf("create op stored %s %q %s, the JSON input %s", typed.Spec, typed.Name, typed.ID, fromJSON.Spec)
		}
		again, err := run(compute.Op{Verb: compute.VerbCreate, Kind: compute.KindSandboxTemplate, Ref: compute.Ref{TenantID: "root"}, IdempotencyKey: "k-typed", Name: "py", Spec: spec})
		if err != nil || again.ID != typed.ID {
			t.Errorf("a repeated create op = %s, %v; want %s", again.ID, err, typed.ID)
		}

		rev := typed.Revision
		want := spec
		want.ImageID, want.Warm = "debian-12", nil
		up, err := run(compute.Op{Verb: compute.VerbUpdate, Kind: compute.KindSandboxTemplate, Ref: compute.Ref{TenantID: "root", ID: typed.ID, Revision: &rev},
			Spec: want, Fields: []string{"imageId", "warm"}})
		if err != nil || up.Revision != rev+1 {
			t.Fatalf("update op = %+v, %v", up, err)
		}
		var got compute.SandboxTemplateSpec
		if err := up.DecodeSpec(&got); err != nil || got.ImageID != "debian-12" || got.Warm != nil || got.Env["MODE"] != "batch" {
			t.Errorf("after the update op: %+v (%v)", got, err)
		}
		_, err = run(compute.Op{Verb: compute.VerbUpdate, Kind: compute.KindSandboxTemplate, Ref: compute.Ref{TenantID: "root", ID: typed.ID, Revision: &rev}, Spec: want, Fields: []string{"imageId"}})
		wantCode(t, "an update op at a stale revision", err, cubefleet.CodeConflict, "", "revision 1")

		for _, c := range []struct {
			what       string
			op         compute.Op
			code       cubefleet.Code
			path, says string
		}{
			{"a named kind without a name", compute.Op{Verb: compute.VerbCreate, Kind: compute.KindFlavor, Ref: compute.Ref{TenantID: "root"},
				Spec: compute.FlavorSpec{PoolID: b.pool.ID, VCPU: 1, MemoryGiB: 1, DiskGiB: 1}}, cubefleet.CodeInvalidInput, "name", "required"},
			{"a name on a site", compute.Op{Verb: compute.VerbCreate, Kind: compute.KindSite, Ref: compute.Ref{TenantID: "root"}, Name: "fra",
				Spec: compute.SiteSpec{Kind: "shared", Region: "eu-central"}}, cubefleet.CodeInvalidInput, "name", "no name"},
			{"a bad tenant", compute.Op{Verb: compute.VerbCreate, Kind: compute.KindSite, Ref: compute.Ref{TenantID: "Not A Tenant"},
				Spec: compute.SiteSpec{Kind: "shared", Region: "eu-central"}}, cubefleet.CodeInvalidInput, "tenantId", ""},
			{"a field rule", compute.Op{Verb: compute.VerbCreate, Kind: compute.KindSite, Ref: compute.Ref{TenantID: "root"},
				Spec: compute.SiteSpec{Kind: "nowhere", Region: "eu-central"}}, cubefleet.CodeInvalidInput, "kind", ""},
			{"a fixed field", compute.Op{Verb: compute.VerbUpdate, Kind: compute.KindSandboxTemplate, Ref: compute.Ref{TenantID: "root", ID: typed.ID},
				Spec: want, Fields: []string{"poolId"}}, cubefleet.CodeInvalidInput, "poolId", "cannot change"},
		} {
			_, err := run(c.op)
			wantCode(t, c.what, err, c.code, c.path, c.says)
		}
		if _, err := run(compute.Op{Verb: compute.VerbCreate, Kind: compute.KindSite, Ref: compute.Ref{TenantID: "root"}, Spec: compute.PoolSpec{}}); err == nil {
			t.Error("a pool spec for a site was run")
		}

		site := e.mustCreate(compute.KindSite, map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"})
		if _, err := run(compute.Op{Verb: "delete", Kind: compute.KindSite, Ref: compute.Ref{TenantID: "root", ID: site.ID}}); err != nil {
			t.Errorf("delete op: %v", err)
		}
		_, err = compute.Load(e.ctx, e.db, site.ID)
		wantCode(t, "the deleted site", err, cubefleet.CodeNotFound, "", "")
	})
}
