package nodehttp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestStockCubelet drives the registry with a stock-Cubelet-shaped client (plain HTTP, no
// credentials, from an allowed network, Cubelet's exact acceptance rule): readyz, register,
// report, listed with the compact "IP":"x" string quickcheck greps for, cordoned, deleted, and
// then 404.
func TestStockCubelet(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		c := nodetest.NewCubelet(e.URL)
		if err := c.Readyz(); err != nil {
			t.Fatalf("readyz: %v", err)
		}
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatalf("register: %v", err)
		}
		for range 3 {
			if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
				t.Fatalf("status: %v", err)
			}
		}
		status, list := e.Do(http.MethodGet, nodeapi.NodesPrefix, "", nil)
		if status != http.StatusOK || !bytes.Contains(list, []byte(`"IP":"10.0.0.7"`)) || list[0] != '[' {
			t.Fatalf("list: %d %s", status, list)
		}
		status, one := e.Do(http.MethodGet, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if status != http.StatusOK || !bytes.Contains(one, []byte(`"IP":"10.0.0.7"`)) || bytes.ContainsAny(one, "\n\t") {
			t.Fatalf("get: %d %s", status, one)
		}
		var node map[string]any
		json.Unmarshal(one, &node)
		if node["Healthy"] != true || node["SchedulingDisabled"] != false || node["ReportedReady"] != true {
			t.Errorf("node = %v", node)
		}
		// ?ids= selects, unknown ids are skipped.
		for q, want := range map[string]int{"?ids=10.0.0.7,10.9.9.9": 1, "?ids=10.9.9.9": 0, "": 1} {
			_, body := e.Do(http.MethodGet, nodeapi.NodesPrefix+q, "", nil)
			var items []map[string]any
			if err := json.Unmarshal(body, &items); err != nil || len(items) != want {
				t.Errorf("list%s = %s (%v), want %d nodes", q, body, err, want)
			}
		}
		// The older prefixes are aliases.
		for _, prefix := range []string{nodeapi.LegacyAgentPrefix, nodeapi.MetaAgentPrefix} {
			old := &nodetest.Cubelet{Base: e.URL, Prefix: prefix, Client: c.Client}
			if err := old.Readyz(); err != nil {
				t.Errorf("%s readyz: %v", prefix, err)
			}
			if err := old.Register(nodetest.WithNode("10.0.0.8")); err != nil {
				t.Errorf("%s register: %v", prefix, err)
			}
			if err := old.Status("10.0.0.8", nodetest.Status()); err != nil {
				t.Errorf("%s status: %v", prefix, err)
			}
		}
		// Isolate, then delete; the Cubelet keeps reporting and gets 404.
		status, body := e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if status != http.StatusConflict {
			t.Errorf("delete before isolation: %d %s, want 409", status, body)
		}
		status, body = e.Do(http.MethodPut, nodeapi.NodesPrefix+"/10.0.0.7/isolation", "", `{"detail":"maintenance"}`)
		if status != http.StatusOK || nodetest.DecodeObject(t, body)["scheduling_disabled"] != true {
			t.Fatalf("isolate: %d %s", status, body)
		}
		_, one = e.Do(http.MethodGet, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if node := nodetest.DecodeObject(t, one); node["SchedulingDisabled"] != true || node["Healthy"] != true {
			t.Errorf("cordon must set SchedulingDisabled and leave Healthy: %v", node)
		}
		status, body = e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if status != http.StatusConflict || !bytes.Contains(body, []byte("still runs 4 sandboxes")) {
			t.Errorf("delete while sandboxes run: %d %s, want 409", status, body)
		}
		if err := c.Status("10.0.0.7", []byte(`{"conditions":[{"type":"Ready","status":"True"}],"allocated":{"mvm_num":0}}`)); err != nil {
			t.Fatal(err)
		}
		status, body = e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if status != http.StatusOK || nodetest.DecodeObject(t, body)["node_id"] != "10.0.0.7" {
			t.Fatalf("delete: %d %s", status, body)
		}
		if err := c.Status("10.0.0.7", nodetest.Status()); nodetest.CodeOf(err) != http.StatusNotFound {
			t.Errorf("status after delete: %v, want 404", err)
		}
		if status, _ := e.Do(http.MethodGet, nodeapi.NodesPrefix+"/10.0.0.7", "", nil); status != http.StatusNotFound {
			t.Errorf("get after delete: %d, want 404", status)
		}
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM nodes_registrations WHERE node_id = '10.0.0.7'`); n != 0 {
			t.Errorf("the deleted node's row is still there")
		}
		// It comes back only when it registers again (a Cubelet restart).
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
			t.Errorf("status after registering again: %v", err)
		}
		if got := e.EventTypes("10.0.0.7"); !slices.Equal(got, []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventDeleted, nodes.EventJoined}) {
			t.Errorf("events = %v", got)
		}
	})
}

// snapshotKeys are the NodeSnapshot keys of docs/nodes.md, "Node-agent API" every answer carries.
var snapshotKeys = strings.Fields(`node_id host_ip grpc_port labels capacity allocatable instance_type cluster_label quota_cpu
	quota_mem_mb create_concurrent_num max_mvm_num conditions images local_templates versions heartbeat_time host_facts
	healthy scheduling_disabled score metric_update metric_local_update_at quota_cpu_usage quota_mem_mb_usage mvm_num
	data_disk_usage_per storage_disk_usage_per sys_disk_usage_per nic_queues`)

// schedulerKeys are the SchedulerNode keys of docs/nodes.md, "Internal nodes API" every listed node
// carries.
var schedulerKeys = strings.Fields(`InstanceID uuid IP CpuTotal MemMBTotal QuotaCpu QuotaMem ClusterLabel OssClusterLabel
	InstanceType HostStatus Healthy CreateConcurrentNum MaxMvmLimit MetaDataUpdateAt MetricUpdateAt MetricLocalUpdateAt
	QuotaCpuUsage QuotaMemUsage mvm_num nic_queues DataDiskUsagePer StorageDiskUsagePer SysDiskUsagePer CpuUtil
	CpuLoadUsage MemUsage RealTimeCreateNum LocalCreateNum Score NodeLabels SchedulingDisabled LocalTemplatesReported
	Versions HostFacts`)

func missingKeys(m map[string]any, keys []string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// TestGoldenPayloads checks the answers to the golden register and status bodies (built from
// the upstream field lists, testdata/register.json and status.json) and the node list, byte for
// byte, and that they carry every upstream key.
func TestGoldenPayloads(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		status, reg := e.Do(http.MethodPost, nodeapi.PathRegister, "", nodetest.Register())
		if status != http.StatusOK {
			t.Fatalf("register: %d %s", status, reg)
		}
		testkit.Golden(t, "register_response.golden", reg)
		status, st := e.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", nodetest.Status())
		if status != http.StatusOK {
			t.Fatalf("status: %d %s", status, st)
		}
		testkit.Golden(t, "status_response.golden", st)
		if missing := missingKeys(nodetest.DecodeObject(t, st), snapshotKeys); len(missing) > 0 {
			t.Errorf("the snapshot lacks %v", missing)
		}
		_, list := e.Do(http.MethodGet, nodeapi.NodesPrefix, "", nil)
		testkit.Golden(t, "nodes.golden", list)
		var items []map[string]any
		if err := json.Unmarshal(list, &items); err != nil || len(items) != 1 {
			t.Fatalf("list: %s %v", list, err)
		}
		if missing := missingKeys(items[0], schedulerKeys); len(missing) > 0 {
			t.Errorf("the scheduler node lacks %v", missing)
		}
		_, scores := e.Do(http.MethodGet, nodeapi.NodesPrefix+"?score_only=true", "", nil)
		testkit.Golden(t, "nodes_score_only.golden", scores)
		// The host facts keep the KVM module fingerprint the status did not scan, and never
		// the transient scanned flag.
		hf := nodetest.DecodeObject(t, st)["host_facts"].(map[string]any)
		if hf["kvm_module_fingerprint"] != "sha256:9a0c" || hf["kvm_module_scanned"] != nil {
			t.Errorf("host_facts = %v", hf)
		}
	})
}

// TestStatusRules checks the report rules of docs/nodes.md, "Node-agent API", with the fixes
// over CubeOps it lists.
func TestStatusRules(t *testing.T) {
	nodetest.Each(t, func(c *nodetest.Config) { c.HTTP.MaxBodyBytes = 64 << 10 }, func(t *testing.T, e *nodetest.Env) {
		post := func(body string) (int, map[string]any) {
			t.Helper()
			status, out := e.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", body)
			if status != http.StatusOK {
				return status, map[string]any{"error": string(out)}
			}
			return status, nodetest.DecodeObject(t, out)
		}
		ready := `"conditions":[{"type":"Ready","status":"True"}]`
		if status, out := e.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", `{`+ready+`}`); status != http.StatusNotFound {
			t.Errorf("status of an unknown node: %d %s, want 404", status, out)
		}
		if status, out := e.Do(http.MethodPost, nodeapi.PathRegister, "", nodetest.Register()); status != 200 {
			t.Fatalf("register: %d %s", status, out)
		}
		_, s := post(string(nodetest.Status()))
		if n := len(s["local_templates"].([]any)); n != 2 {
			t.Fatalf("templates = %d", n)
		}
		// local_templates absent or null: keep; []: empty.
		for _, body := range []string{`{` + ready + `}`, `{` + ready + `,"local_templates":null}`} {
			if _, s = post(body); len(s["local_templates"].([]any)) != 2 || s["local_templates_reported"] != true {
				t.Errorf("%s: templates %v", body, s["local_templates"])
			}
		}
		if _, s = post(`{` + ready + `,"local_templates":[]}`); len(s["local_templates"].([]any)) != 0 || s["local_templates_reported"] != true {
			t.Errorf("[]: templates %v", s["local_templates"])
		}
		// An all-zero quota is ignored; a real one applies.
		if _, s = post(`{` + ready + `,"quota":{"milli_cpu":0,"mem_mb":0,"max_mvm_num":0,"create_concurrent_num":0}}`); s["quota_cpu"] != 64000.0 || s["max_mvm_num"] != 312.0 {
			t.Errorf("all-zero quota changed the node: %v %v", s["quota_cpu"], s["max_mvm_num"])
		}
		if _, s = post(`{` + ready + `,"quota":{"milli_cpu":32000,"mem_mb":100000,"max_mvm_num":100,"create_concurrent_num":4}}`); s["quota_cpu"] != 32000.0 || s["max_mvm_num"] != 100.0 {
			t.Errorf("quota not applied: %v %v", s["quota_cpu"], s["max_mvm_num"])
		}
		// allocated and disk_usage apply only when present.
		if _, s = post(`{` + ready + `}`); s["mvm_num"] != 4.0 || s["data_disk_usage_per"] != 12.5 {
			t.Errorf("absent allocated/disk_usage changed the node: %v %v", s["mvm_num"], s["data_disk_usage_per"])
		}
		if _, s = post(`{` + ready + `,"allocated":{"mvm_num":1}}`); s["mvm_num"] != 1.0 || s["data_disk_usage_per"] != 12.5 {
			t.Errorf("allocated: %v %v", s["mvm_num"], s["data_disk_usage_per"])
		}
		// A heartbeat from the future is clamped to now; an unknown field is accepted.
		if _, s = post(`{` + ready + `,"heartbeat_time":"2030-01-01T00:00:00Z","brand_new":{"x":1}}`); s["heartbeat_time"] != "2026-05-04T10:00:00Z" {
			t.Errorf("heartbeat_time = %v, want it clamped to now", s["heartbeat_time"])
		}
		// Ready=False: reported, not healthy, the reason says so.
		if _, s = post(`{"conditions":[{"type":"Ready","status":"False","reason":"cubeletNotReady"}]}`); s["healthy"] != false || s["unhealthy_reason"] != nodeapi.ReasonReportedNotReady {
			t.Errorf("not ready: %v %v", s["healthy"], s["unhealthy_reason"])
		}
		// Bad bodies are 400, never 500; the node does not change.
		for _, body := range []string{
			``, `[]`, `not json`, `{"conditions":"yes"}`, `{"images":[{"names":"x"}]}`, `{"allocated":{"mvm_num":1.5}}`,
			`{"heartbeat_time":"yesterday"}`, `{"requestID":"` + strings.Repeat("é", 65) + `"}`, "{\"requestID\":\"\xff\"}",
			`{"local_templates":{"template_id":"x"}}`, `{} {}`,
		} {
			if status, out := post(body); status != http.StatusBadRequest {
				t.Errorf("%q: %d %v, want 400", body, status, out)
			}
		}
		if status, out := post(`{"requestID":"` + strings.Repeat("é", 64) + `",` + ready + `}`); status != http.StatusOK {
			t.Errorf("a 64-rune requestID: %d %v", status, out)
		}
		// Oversized bodies are 413, on both routes.
		big := `{"images":[` + strings.Repeat(`{"names":["x"]},`, 8000) + `{"names":["y"]}]}`
		if status, _ := post(big); status != http.StatusRequestEntityTooLarge {
			t.Errorf("oversized status: %d, want 413", status)
		}
		if status, _ := e.Do(http.MethodPost, nodeapi.PathRegister, "", big); status != http.StatusRequestEntityTooLarge {
			t.Errorf("oversized register: %d, want 413", status)
		}
	})
}

// TestLabelRules checks upstream's label rules, with every validation failure 400 (never 500)
// and the reserved label 400 at registration, 403 on the labels routes.
func TestLabelRules(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		register := func(labels map[string]string) (int, []byte) {
			var body map[string]any
			json.Unmarshal(nodetest.Register(), &body)
			body["labels"] = labels
			return e.Do(http.MethodPost, nodeapi.PathRegister, "", body)
		}
		many := map[string]string{}
		for i := range nodeapi.MaxLabels + 1 {
			many["l"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
		}
		for name, c := range map[string]struct {
			labels map[string]string
			want   int
		}{
			"reserved":       {map[string]string{nodeapi.ReservedLabel: "true"}, 400},
			"bad key":        {map[string]string{"-bad": "x"}, 400},
			"bad prefix":     {map[string]string{"Bad_Prefix/name": "x"}, 400},
			"long name":      {map[string]string{strings.Repeat("a", 64): "x"}, 400},
			"long value":     {map[string]string{"a": strings.Repeat("v", 64)}, 400},
			"bad value":      {map[string]string{"a": "has space"}, 400},
			"too many":       {many, 400},
			"fine":           {map[string]string{"example.com/zone": "fra-1", "empty": ""}, 200},
			"max name":       {map[string]string{strings.Repeat("a", 63): strings.Repeat("b", 63)}, 200},
			"no labels":      {nil, 200},
			"subdomain only": {map[string]string{"a.b.example.com/x": "y"}, 200},
		} {
			if status, out := register(c.labels); status != c.want {
				t.Errorf("%s: register %d %s, want %d", name, status, out, c.want)
			}
		}
		// Stored labels are kept and merged with what the node sends.
		status, out := register(map[string]string{"kubernetes.io/arch": "arm64"})
		labels := nodetest.DecodeObject(t, out)["labels"].(map[string]any)
		if status != 200 || labels["kubernetes.io/arch"] != "arm64" || labels["example.com/zone"] != "fra-1" {
			t.Errorf("merge: %d %v", status, labels)
		}
		put := func(body string) (int, []byte) {
			return e.Do(http.MethodPut, nodeapi.NodesPrefix+"/10.0.0.7/labels", "", body)
		}
		for body, want := range map[string]int{
			`{"labels":{"` + nodeapi.ReservedLabel + `":"true"}}`: 403,
			`{"labels":{"bad key":"x"}}`:                          400,
			`{"labels":"x"}`:                                      400,
			`{"labels":{"team":"a"}}`:                             200,
		} {
			if status, out := put(body); status != want {
				t.Errorf("PUT labels %s: %d %s, want %d", body, status, out, want)
			}
		}
		if status, out := e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7/labels/"+nodeapi.ReservedLabel, "", nil); status != 403 {
			t.Errorf("DELETE the reserved label: %d %s, want 403", status, out)
		}
		status, out = e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7/labels/kubernetes.io/arch", "", nil)
		if status != 200 || nodetest.DecodeObject(t, out)["labels"].(map[string]any)["kubernetes.io/arch"] != nil {
			t.Errorf("DELETE a label: %d %s", status, out)
		}
		if status, _ := e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7/labels/never-set", "", nil); status != 200 {
			t.Errorf("DELETE an absent label: %d, want 200", status)
		}
		// Filling up to the limit through the labels API is refused past 64.
		lots := map[string]string{}
		for i := range nodeapi.MaxLabels {
			lots["k"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
		}
		b, _ := json.Marshal(map[string]any{"labels": lots})
		if status, out := put(string(b)); status != 400 || !bytes.Contains(out, []byte("cannot have more than 64")) {
			t.Errorf("PUT past 64 labels: %d %s", status, out)
		}
		// Isolation details are at most 200 runes.
		if status, _ := e.Do(http.MethodPut, nodeapi.NodesPrefix+"/10.0.0.7/isolation", "", `{"detail":"`+strings.Repeat("ü", 201)+`"}`); status != 400 {
			t.Errorf("a 201-rune detail: %d, want 400", status)
		}
		if status, _ := e.Do(http.MethodPut, nodeapi.NodesPrefix+"/10.0.0.7/isolation", "", `{"detail":"`+strings.Repeat("ü", 200)+`"}`); status != 200 {
			t.Errorf("a 200-rune detail: %d, want 200", status)
		}
		// The node cannot clear its cordon by registering again.
		status, out = register(nil)
		if status != 200 || nodetest.DecodeObject(t, out)["scheduling_disabled"] != true {
			t.Errorf("register after cordon: %d %s", status, out)
		}
		keys := make([]string, 0)
		for k := range nodetest.DecodeObject(t, out)["labels"].(map[string]any) {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !slices.Contains(keys, nodeapi.ReservedLabel) {
			t.Errorf("labels after register: %v", keys)
		}
	})
}

// TestReadyzNeedsTheStore: readyz answers the ret envelope 200 only while the store answers.
func TestReadyzNeedsTheStore(t *testing.T) {
	db := storetest.SQLite(t, nodetest.Modules...)
	e := nodetest.MustEnv(t, db, nil)
	c := nodetest.NewCubelet(e.URL)
	if err := c.Readyz(); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	e.Stop()
	db.Close()
	srv := httptest.NewServer(e.HTTP)
	defer srv.Close()
	nodehttp.ForgetReadyz(e.HTTP) // forget the cached answer
	status, _, body := get(t, srv.URL+nodeapi.PathReadyz)
	if status != http.StatusServiceUnavailable || !bytes.Contains(body, []byte(`"ret_code":503`)) {
		t.Errorf("readyz without a store: %d %s", status, body)
	}
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
