package nodes

import (
	"encoding/json"
	"hash/maphash"
	"testing"
	"time"
)

// fuzzRegistry is a registry without a database: enough to apply reports and encode answers.
func fuzzRegistry() *Registry {
	r := &Registry{seed: maphash.MakeSeed(), cfg: Config{HeartbeatTimeout: DefaultHeartbeatTimeout, LostAfter: DefaultLostAfter,
		Now: func() time.Time { return time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC) }}}
	r.pools.Store(&poolIndex{})
	return r
}

func addSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		f.Add(testdata(f, name))
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

// FuzzDecodeRegister: no register body panics the decoder or the registration rules, an
// accepted one holds no negative figure and no control character in the strings it stores
// (cluster_label, instance_type, versions), and it always answers valid JSON.
func FuzzDecodeRegister(f *testing.F) {
	addSeeds(f, "register.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRegister(body)
		if err != nil {
			return
		}
		if req.Capacity.MilliCPU < 0 || req.Capacity.MemoryMB < 0 || req.Allocatable.MilliCPU < 0 || req.Allocatable.MemoryMB < 0 ||
			req.QuotaCPU < 0 || req.QuotaMemMB < 0 || req.CreateConcurrentNum < 0 || req.MaxMvmNum < 0 || req.GRPCPort < 0 {
			t.Fatalf("accepted a negative figure: %+v", req)
		}
		for _, v := range append([]Version{{Component: req.ClusterLabel, Version: req.InstanceType}}, req.Versions...) {
			for _, s := range []string{v.Component, v.Version, v.Commit, v.BuildTime, v.Source, v.Variant} {
				if _, ok := controlChar(s); ok {
					t.Fatalf("accepted a control character in %q", s)
				}
			}
		}
		r := fuzzRegistry()
		labels := mergeLabels(map[string]string{ReservedLabel: "true"}, req.Labels)
		if checkLabels(labels) != nil {
			return
		}
		n := &node{id: req.NodeID}
		r.applyRegistration(n, req, labels, r.now())
		if out := r.appendSnapshot(nil, n, r.now()); !json.Valid(out) {
			t.Fatalf("invalid snapshot %s", out)
		}
		if out := r.appendScheduler(nil, n, r.now(), false); !json.Valid(out) {
			t.Fatalf("invalid scheduler node %s", out)
		}
	})
}

// FuzzDecodeStatus: no status body panics the decoder or applying it, a rejected report
// changes nothing, an accepted one leaves no negative figure on the node, and it always
// answers valid JSON.
func FuzzDecodeStatus(f *testing.F) {
	addSeeds(f, "status.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		r := fuzzRegistry()
		n := &node{id: "10.0.0.7", hostIP: "10.0.0.7", labels: map[string]string{}}
		var dc decoder
		dc.buf.Write(body)
		var req StatusRequest
		if err := decodeStatus(&dc, &req); err != nil {
			return
		}
		before := r.appendSnapshot(nil, n, r.now())
		if _, err := r.applyStatus(n, &req, r.now()); err != nil {
			if after := r.appendSnapshot(nil, n, r.now()); string(after) != string(before) {
				t.Fatalf("a refused report changed the node:\n%s\n%s", before, after)
			}
			return
		}
		if a, d := n.allocated, n.diskUsage; a.MilliCPU < 0 || a.MemoryMB < 0 || a.MvmNum < 0 || a.MvmRunningNum < 0 || a.NICQueues < 0 ||
			a.DataDiskMB < 0 || a.StorageDiskMB < 0 || d.DataDiskUsagePer < 0 || d.StorageDiskUsagePer < 0 || d.SysDiskUsagePer < 0 ||
			n.quotaCPU < 0 || n.quotaMemMB < 0 || n.maxMvm < 0 || n.createConcurrent < 0 || n.hostFacts.CPUCount < 0 || n.hostFacts.MemTotalMB < 0 {
			t.Fatalf("an accepted report left a negative figure: %+v %+v quota %d %d %d %d", a, d, n.quotaCPU, n.quotaMemMB, n.maxMvm, n.createConcurrent)
		}
		for _, v := range n.versions {
			for _, s := range []string{v.Component, v.Version, v.Commit, v.BuildTime, v.Source, v.Variant} {
				if _, ok := controlChar(s); ok {
					t.Fatalf("an accepted report stored a control character in versions: %q", s)
				}
			}
		}
		for _, id := range n.templateIDs {
			if _, ok := controlChar(id); ok {
				t.Fatalf("an accepted report stored a control character in a template id: %q", id)
			}
		}
		if out := r.appendSnapshot(nil, n, r.now()); !json.Valid(out) {
			t.Fatalf("invalid snapshot %s", out)
		}
		if out := r.appendScheduler(nil, n, r.now(), false); !json.Valid(out) {
			t.Fatalf("invalid scheduler node %s", out)
		}
		// The same report again decodes nothing and changes nothing.
		again := r.appendSnapshot(nil, n, r.now())
		if _, err := r.applyStatus(n, &req, r.now()); err != nil {
			t.Fatal(err)
		}
		if out := r.appendSnapshot(nil, n, r.now()); string(out) != string(again) {
			t.Fatalf("a repeated report changed the node:\n%s\n%s", again, out)
		}
	})
}
