package nodes

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// patch returns the JSON object body with the member at the dotted path set to value (nil
// deletes it); intermediate objects are created.
func patch(t testing.TB, body []byte, path string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	keys := strings.Split(path, ".")
	cur := m
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	if value == nil {
		delete(cur, keys[len(keys)-1])
	} else {
		cur[keys[len(keys)-1]] = value
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bodyCase is one rule of a register or status body: the member set, and the message of its
// refusal ("" when it is accepted).
type bodyCase struct {
	path  string
	value any
	want  string
}

// TestRegisterFigures: a register body's figures are counts, sizes and shares: a negative one
// (capacity, allocatable, quota, host facts' counts), a grpc_port outside 0..65535 or a
// paused_release_ratio outside 0..1 is refused, naming the field; 0 and the golden body's
// values are accepted.
func TestRegisterFigures(t *testing.T) {
	golden := testdata(t, "register.json")
	for _, c := range []bodyCase{
		{"capacity.milli_cpu", -1, "capacity.milli_cpu must be >= 0 (got -1)"},
		{"capacity.memory_mb", -1, "capacity.memory_mb must be >= 0"},
		{"allocatable.milli_cpu", -100000, "allocatable.milli_cpu must be >= 0 (got -100000)"},
		{"allocatable.memory_mb", -1, "allocatable.memory_mb must be >= 0"},
		{"quota_cpu", -1, "quota_cpu must be >= 0 (got -1)"},
		{"quota_mem_mb", -1, "quota_mem_mb must be >= 0"},
		{"create_concurrent_num", -1, "create_concurrent_num must be >= 0"},
		{"max_mvm_num", -9, "max_mvm_num must be >= 0 (got -9)"},
		{"grpc_port", -1, "grpc_port must be 0 to 65535"},
		{"grpc_port", 65536, "grpc_port must be 0 to 65535"},
		{"paused_release_ratio", -0.5, "paused_release_ratio must be between 0 and 1"},
		{"paused_release_ratio", 1.5, "paused_release_ratio must be between 0 and 1"},
		{"host_facts.cpu_count", -32, "host_facts.cpu_count must be >= 0"},
		{"host_facts.mem_total_mb", -1, "host_facts.mem_total_mb must be >= 0"},
		{"host_facts.kvm_api_version", -12, "host_facts.kvm_api_version must be >= 0"},
		// Accepted: zeros, the edges, and absent members.
		{"capacity.milli_cpu", 0, ""},
		{"quota_cpu", 0, ""},
		{"max_mvm_num", 0, ""},
		{"grpc_port", 9999, ""},
		{"grpc_port", 65535, ""},
		{"paused_release_ratio", 0, ""},
		{"paused_release_ratio", 1, ""},
		{"paused_release_ratio", nil, ""},
		{"host_facts", nil, ""},
	} {
		_, err := DecodeRegister(patch(t, golden, c.path, c.value))
		checkBodyCase(t, "register", c, err)
	}
}

// TestStatusFigures: a status report's figures (allocated, disk_usage, quota, images'
// size_bytes, host facts' counts) may not be negative, nor the quota's paused_release_ratio
// outside 0..1; the refusal names the field. Zeros are accepted (an all-zero quota is ignored).
func TestStatusFigures(t *testing.T) {
	golden := testdata(t, "status.json")
	for _, c := range []bodyCase{
		{"allocated.milli_cpu", -100000, "allocated.milli_cpu must be >= 0 (got -100000)"},
		{"allocated.memory_mb", -1, "allocated.memory_mb must be >= 0"},
		{"allocated.mvm_num", -5, "allocated.mvm_num must be >= 0 (got -5)"},
		{"allocated.mvm_running_num", -1, "allocated.mvm_running_num must be >= 0"},
		{"allocated.nic_queues", -1, "allocated.nic_queues must be >= 0"},
		{"allocated.data_disk_mb", -1, "allocated.data_disk_mb must be >= 0"},
		{"allocated.storage_disk_mb", -1, "allocated.storage_disk_mb must be >= 0"},
		{"disk_usage.data_disk_usage_per", -1, "disk_usage.data_disk_usage_per must be >= 0"},
		{"disk_usage.storage_disk_usage_per", -0.5, "disk_usage.storage_disk_usage_per must be >= 0"},
		{"disk_usage.sys_disk_usage_per", -1e308, "disk_usage.sys_disk_usage_per must be >= 0"},
		{"quota.milli_cpu", -1000, "quota.milli_cpu must be >= 0 (got -1000)"},
		{"quota.mem_mb", -1, "quota.mem_mb must be >= 0"},
		{"quota.max_mvm_num", -3, "quota.max_mvm_num must be >= 0 (got -3)"},
		{"quota.create_concurrent_num", -1, "quota.create_concurrent_num must be >= 0"},
		{"quota.paused_release_ratio", 2, "quota.paused_release_ratio must be between 0 and 1"},
		{"host_facts.cpu_count", -1, "host_facts.cpu_count must be >= 0"},
		{"allocated.mvm_num", 0, ""},
		{"quota.milli_cpu", 0, ""},
		{"disk_usage.sys_disk_usage_per", 0, ""},
		{"allocated", nil, ""},
		{"quota", nil, ""},
	} {
		_, err := DecodeStatus(patch(t, golden, c.path, c.value))
		checkBodyCase(t, "status", c, err)
	}
	var images []map[string]any
	json.Unmarshal([]byte(`[{"names":["x"],"size_bytes":-1}]`), &images)
	_, err := DecodeStatus(patch(t, golden, "images", images))
	checkBodyCase(t, "status", bodyCase{"images", "[size_bytes -1]", "images[0].size_bytes must be >= 0"}, err)
}

func checkBodyCase(t *testing.T, what string, c bodyCase, err error) {
	t.Helper()
	switch {
	case c.want == "" && err != nil:
		t.Errorf("%s with %s = %v: refused: %v", what, c.path, c.value, err)
	case c.want != "" && err == nil:
		t.Errorf("%s with %s = %v: accepted, want %q", what, c.path, c.value, c.want)
	case c.want != "" && !strings.Contains(errMessage(err), c.want):
		t.Errorf("%s with %s = %v: %q, want %q", what, c.path, c.value, errMessage(err), c.want)
	}
}

// TestNegativeFiguresOverHTTP: over real HTTP, a register or report with a negative figure is
// 400 with the field in the answer, and changes nothing: the node keeps its quota and its
// sandbox count (so a drain is not fooled into Drained by mvm_num -5).
func TestNegativeFiguresOverHTTP(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		reg := testdata(t, "register.json")
		for path, v := range map[string]int{"quota_cpu": -1, "max_mvm_num": -9} {
			code, out := e.do(http.MethodPost, registerPath, "", patch(t, reg, path, v))
			if code != http.StatusBadRequest || !strings.Contains(string(out), path+" must be >= 0") {
				t.Errorf("register with %s %d: %d %s", path, v, code, out)
			}
		}
		if _, err := e.reg.Get(t.Context(), "10.0.0.7"); err == nil {
			t.Fatalf("a refused registration registered the node")
		}
		if code, out := e.do(http.MethodPost, registerPath, "", reg); code != 200 {
			t.Fatalf("register: %d %s", code, out)
		}
		status := testdata(t, "status.json")
		if code, out := e.do(http.MethodPost, statusPath("10.0.0.7"), "", status); code != 200 {
			t.Fatalf("status: %d %s", code, out)
		}
		for path, v := range map[string]any{"allocated.mvm_num": -5, "allocated.milli_cpu": -100000, "quota.milli_cpu": -1000, "quota.max_mvm_num": -3} {
			code, out := e.do(http.MethodPost, statusPath("10.0.0.7"), "", patch(t, status, path, v))
			if code != http.StatusBadRequest || !strings.Contains(string(out), path+" must be >= 0") || !strings.Contains(string(out), `"code":"INVALID_INPUT"`) {
				t.Errorf("status with %s %v: %d %s", path, v, code, out)
			}
		}
		v, err := e.reg.Get(t.Context(), "10.0.0.7")
		if err != nil {
			t.Fatal(err)
		}
		if v.Allocated == nil || v.Allocated.Mvm != 4 || v.Allocated.MilliCPU != 3500 || v.Quota.MilliCPU != 64000 || v.Quota.MaxMvm != 312 {
			t.Errorf("refused reports changed the node: allocated %+v, quota %+v", v.Allocated, v.Quota)
		}
	})
}
