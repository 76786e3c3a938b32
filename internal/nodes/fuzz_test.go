package nodes

import (
	"encoding/json"
	"hash/maphash"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// fuzzRegistry is a registry without a store: enough to apply reports and encode answers.
func fuzzRegistry() *Registry {
	start := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	r := &Registry{seed: maphash.MakeSeed(), cfg: Config{HeartbeatTimeout: DefaultHeartbeatTimeout, LostAfter: DefaultLostAfter,
		Now: func() time.Time { return start }},
		health: HealthPolicy{Timeout: DefaultHeartbeatTimeout, LostAfter: DefaultLostAfter, Started: start}}
	r.pools.Store(&poolIndex{})
	return r
}

// goldenBody reads the golden body name of nodetest (which this package's own tests cannot import).
func goldenBody(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("nodetest", "testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func addSeeds(f *testing.F, name string) {
	f.Add(goldenBody(f, name))
	for _, s := range []string{
		``, `{}`, `{"node_id":"10.0.0.7"}`, `{"node_id":"x","labels":{"a":"b"}}`, `{"local_templates":null,"images":[],"quota":{}}`,
		`{"heartbeat_time":"0001-01-01T00:00:00Z"}`, `{"host_facts":{"kvm_module_scanned":false}}`,
		`{"versions":[{"component":"a"}],"inventory_incomplete":true}`, `{"allocated":{"mvm_num":1e30}}`,
		`{"quota":{"milli_cpu":5,"paused_release_ratio":0.5}}`, `{"node_id":"fd00::7","cluster_label":"c","instance_type":""}`,
	} {
		f.Add([]byte(s))
	}
}

// noControl fails t when one of ss holds a control character.
func noControl(t *testing.T, what string, ss ...string) {
	t.Helper()
	for _, s := range ss {
		if _, ok := nodeapi.ControlChar(s); ok {
			t.Fatalf("stored a control character in %s: %q", what, s)
		}
	}
}

// FuzzApplyRegister: every register body the decoder accepts (nodeapi's FuzzDecodeRegister
// fuzzes the decoder) applies without a panic and always answers valid JSON.
func FuzzApplyRegister(f *testing.F) {
	addSeeds(f, "register.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := nodeapi.DecodeRegister(body)
		if err != nil {
			return
		}
		r := fuzzRegistry()
		labels := mergeLabels(map[string]string{nodeapi.ReservedLabel: "true"}, req.Labels)
		if nodeapi.CheckLabels(labels) != nil {
			return
		}
		n := &node{id: req.NodeID}
		applyRegistration(n, req, labels, r.now())
		if out := n.appendSnapshot(nil, r.health.state(n, r.now())); !json.Valid(out) {
			t.Fatalf("invalid snapshot %s", out)
		}
		if out := n.appendScheduler(nil, r.health.state(n, r.now()), false); !json.Valid(out) {
			t.Fatalf("invalid scheduler node %s", out)
		}
	})
}

// FuzzApplyStatus: no status body panics the decoder or applying it, a rejected report
// changes nothing, an accepted one leaves no negative figure on the node, and it always
// answers valid JSON.
func FuzzApplyStatus(f *testing.F) {
	addSeeds(f, "status.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		r := fuzzRegistry()
		n := &node{id: "10.0.0.7", hostIP: "10.0.0.7", labels: map[string]string{}}
		var dc nodeapi.Decoder
		dc.Write(body)
		var req nodeapi.StatusRequest
		if err := dc.Status(&req); err != nil {
			return
		}
		snapshot := func() string { return string(n.appendSnapshot(nil, r.health.state(n, r.now()))) }
		before := snapshot()
		if _, err := applyStatus(n, &req, r.now(), r.seed, r.health); err != nil {
			if after := snapshot(); after != before {
				t.Fatalf("a refused report changed the node:\n%s\n%s", before, after)
			}
			return
		}
		if a, d := n.allocated, n.diskUsage; a.MilliCPU < 0 || a.MemoryMB < 0 || a.MVMNum < 0 || a.MVMRunningNum < 0 || a.NICQueues < 0 ||
			a.DataDiskMB < 0 || a.StorageDiskMB < 0 || d.DataDiskUsagePer < 0 || d.StorageDiskUsagePer < 0 || d.SysDiskUsagePer < 0 ||
			n.quotaCPU < 0 || n.quotaMemMB < 0 || n.maxMVM < 0 || n.createConcurrent < 0 || n.hostFacts.CPUCount < 0 || n.hostFacts.MemTotalMB < 0 {
			t.Fatalf("an accepted report left a negative figure: %+v %+v quota %d %d %d %d", a, d, n.quotaCPU, n.quotaMemMB, n.maxMVM, n.createConcurrent)
		}
		for _, v := range n.versions {
			noControl(t, "versions", v.Component, v.Version, v.Commit, v.BuildTime, v.Source, v.Variant)
		}
		noControl(t, "template ids", n.templateIDs...)
		if out := snapshot(); !json.Valid([]byte(out)) {
			t.Fatalf("invalid snapshot %s", out)
		}
		if out := n.appendScheduler(nil, r.health.state(n, r.now()), false); !json.Valid(out) {
			t.Fatalf("invalid scheduler node %s", out)
		}
		// The same report again decodes nothing and changes nothing.
		again := snapshot()
		if _, err := applyStatus(n, &req, r.now(), r.seed, r.health); err != nil {
			t.Fatal(err)
		}
		if out := snapshot(); out != again {
			t.Fatalf("a repeated report changed the node:\n%s\n%s", again, out)
		}
	})
}
