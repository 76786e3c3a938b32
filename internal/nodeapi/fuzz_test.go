package nodeapi_test

import (
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// addSeeds adds the golden bodies and the corner cases of both decoders to f.
func addSeeds(f *testing.F, bodies ...[]byte) {
	for _, b := range bodies {
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"node_id":""}`, `{"node_id":"a/b"}`, `{"labels":{"a":1}}`, `{"NODE_ID":"x","LABELS":{"k":"v"}}`,
		`{"node_id":"x","node_id":"y"}`, `{"local_templates":null,"images":[],"quota":{}}`, `{"heartbeat_time":"0001-01-01T00:00:00Z"}`,
		`{"host_facts":{"kvm_module_scanned":false}}`, `{"versions":[{"component":"a"}],"inventory_incomplete":true}`,
		"{\"requestID\":\"\xff\"}", `{"allocated":{"mvm_num":1e30}}`, `{"disk_usage":{"sys_disk_usage_per":-1e308}}`,
		`{"cluster_label":"a\u001bb"}`, `{"versions":[{"component":"a\nb"}]}`, `{"allocated":{"mvm_num":-5}}`, `{"quota":{"milli_cpu":-1000}}`, `{"node_id":"x","max_mvm_num":-9,"capacity":{"milli_cpu":-1}}`,
	} {
		f.Add([]byte(s))
	}
}

// noControl fails t when one of ss holds a control character.
func noControl(t *testing.T, what string, ss ...string) {
	t.Helper()
	for _, s := range ss {
		if _, ok := nodeapi.ControlChar(s); ok {
			t.Fatalf("accepted a control character in %s: %q", what, s)
		}
	}
}

// FuzzDecodeRegister: no register body panics the decoder, and an accepted one holds no
// negative figure and no control character in the strings it stores (cluster_label,
// instance_type, versions). (The registry's FuzzApplyRegister applies what it accepts.)
func FuzzDecodeRegister(f *testing.F) {
	addSeeds(f, nodetest.Register())
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := nodeapi.DecodeRegister(body)
		if err != nil {
			return
		}
		if req.Capacity.MilliCPU < 0 || req.Capacity.MemoryMB < 0 || req.Allocatable.MilliCPU < 0 || req.Allocatable.MemoryMB < 0 ||
			req.QuotaCPU < 0 || req.QuotaMemMB < 0 || req.CreateConcurrentNum < 0 || req.MaxMVMNum < 0 || req.GRPCPort < 0 {
			t.Fatalf("accepted a negative figure: %+v", req)
		}
		noControl(t, "cluster_label or instance_type", req.ClusterLabel, req.InstanceType)
		for _, v := range req.Versions {
			noControl(t, "versions", v.Component, v.Version, v.Commit, v.BuildTime, v.Source, v.Variant)
		}
		if _, err := req.Addr(); err != nil {
			t.Fatalf("accepted a registration without an address: %v", err)
		}
	})
}

// FuzzDecodeStatus: no status body panics the decoder, and an accepted one holds no negative
// figure and no control character in its versions and template ids. (The registry's
// FuzzApplyStatus applies what it accepts.)
func FuzzDecodeStatus(f *testing.F) {
	addSeeds(f, nodetest.Status())
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := nodeapi.DecodeStatus(body)
		if err != nil {
			return
		}
		if a := req.Allocated; a != nil && (a.MilliCPU < 0 || a.MemoryMB < 0 || a.MVMNum < 0 || a.MVMRunningNum < 0 || a.NICQueues < 0 ||
			a.DataDiskMB < 0 || a.StorageDiskMB < 0) {
			t.Fatalf("accepted a negative allocation: %+v", a)
		}
		if d := req.DiskUsage; d != nil && !(d.DataDiskUsagePer >= 0 && d.DataDiskUsagePer <= 100 && d.StorageDiskUsagePer >= 0 &&
			d.StorageDiskUsagePer <= 100 && d.SysDiskUsagePer >= 0 && d.SysDiskUsagePer <= 100) {
			t.Fatalf("accepted a disk usage outside 0-100: %+v", d)
		}
		if q := req.Quota; q != nil && (q.MilliCPU < 0 || q.MemMB < 0 || q.MaxMVMNum < 0 || q.CreateConcurrentNum < 0) {
			t.Fatalf("accepted a negative quota: %+v", q)
		}
		vers, err := req.DecodeVersions()
		if err != nil {
			t.Fatalf("DecodeStatus accepted versions DecodeVersions refuses: %v", err)
		}
		for _, v := range vers {
			noControl(t, "versions", v.Component, v.Version, v.Commit, v.BuildTime, v.Source, v.Variant)
		}
		tpls, err := req.DecodeTemplates()
		if err != nil {
			t.Fatalf("DecodeStatus accepted templates DecodeTemplates refuses: %v", err)
		}
		for _, tp := range tpls {
			noControl(t, "template ids", tp.TemplateID)
		}
		if h, ok, err := req.DecodeHostFacts(); err != nil || ok && (h.CPUCount < 0 || h.MemTotalMB < 0 || h.KVMAPIVersion < 0) {
			t.Fatalf("accepted host facts %+v (%v)", h, err)
		}
	})
}
