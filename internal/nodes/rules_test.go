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
// size_bytes, host facts' counts) may not be negative, disk usage percentages not above 100,
// nor the quota's paused_release_ratio outside 0..1; the refusal names the field. Zeros are accepted (an all-zero quota is ignored).
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
		{"disk_usage.data_disk_usage_per", -1, "disk_usage.data_disk_usage_per is a percentage: 0 to 100 (got -1)"},
		{"disk_usage.storage_disk_usage_per", -0.5, "disk_usage.storage_disk_usage_per is a percentage: 0 to 100"},
		{"disk_usage.sys_disk_usage_per", -1e308, "disk_usage.sys_disk_usage_per is a percentage: 0 to 100"},
		{"disk_usage.data_disk_usage_per", 1e308, "disk_usage.data_disk_usage_per is a percentage: 0 to 100 (got 1e+308)"},
		{"disk_usage.sys_disk_usage_per", 100.5, "disk_usage.sys_disk_usage_per is a percentage: 0 to 100"},
		{"disk_usage.sys_disk_usage_per", 100, ""},
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

// TestControlCharacter: controlChar finds C0 (tab and newline included), DEL and C1, and
// nothing else (printable ASCII, Latin-1 letters, other scripts).
func TestControlCharacter(t *testing.T) {
	for s, want := range map[string]rune{
		"ok": -1, "": -1, "déjà vu ü": -1, "日本語": -1, "a b": -1, "\u00a0nbsp": -1, "\u00ff": -1,
		"\x1b[31mred": 0x1b, "two\nlines": '\n', "tab\there": '\t', "nul\x00": 0, "del\x7f": 0x7f,
		"c1\u0085next-line": 0x85, "csi\u009b": 0x9b, "c1-first\u0080": 0x80, "c1-last\u009f": 0x9f,
	} {
		r, ok := controlChar(s)
		if want < 0 && ok || want >= 0 && (!ok || r != want) {
			t.Errorf("controlChar(%q) = %U, %v; want %U", s, r, ok, want)
		}
	}
}

// TestNodeStrings: the node-supplied strings cubefleet stores and shows are refused with 400
// naming the field when they hold a control character or are too long: cluster_label and
// instance_type (the label value rules), every field of versions[] (in register and status),
// local_templates[].template_id, and an isolation's detail.
func TestNodeStrings(t *testing.T) {
	reg := testdata(t, "register.json")
	status := testdata(t, "status.json")
	versions := func(field, value string) []any {
		return []any{map[string]any{"component": "cubelet", "version": "v1"}, map[string]any{"component": "kernel", field: value}}
	}
	for _, c := range []bodyCase{
		{"cluster_label", "\x1b[2Jdefault-cluster", `cluster_label "\x1b[2Jdefault-cluster" must be empty or 1-63`},
		{"cluster_label", "default-cluster\nforged: line", "cluster_label"},
		{"cluster_label", strings.Repeat("a", 64), "cluster_label"},
		{"cluster_label", "with space", "cluster_label"},
		{"instance_type", "cube\x07box", "instance_type"},
		{"instance_type", "cube\u0085box", "instance_type"},
		{"versions", versions("component", "ker\x1bnel"), "versions[1].component must not hold control characters (it holds U+001B)"},
		{"versions", versions("version", "6.6\nFAKE"), "versions[1].version must not hold control characters (it holds U+000A)"},
		{"versions", versions("commit", "abc\x7f"), "versions[1].commit must not hold control characters"},
		{"versions", versions("build_time", "\u009b2026"), "versions[1].build_time must not hold control characters"},
		{"versions", versions("version", strings.Repeat("1", MaxVersionFieldRunes+1)), "versions[1].version is too long: 129 characters, at most 128"},
		// Accepted: what a Cubelet sends, an empty label, non-ASCII text in a version.
		{"cluster_label", "", ""},
		{"cluster_label", "Fra_Cubes.2", ""},
		{"instance_type", "cubebox", ""},
		{"versions", versions("version", "2026.05.1-ü"), ""},
		{"versions", versions("version", "6.6.30\n"), ""}, // read from a file: trimmed
		{"versions", versions("version", strings.Repeat("1", MaxVersionFieldRunes)), ""},
	} {
		_, err := DecodeRegister(patch(t, reg, c.path, c.value))
		checkBodyCase(t, "register", c, err)
		if c.path == "versions" {
			_, err := DecodeStatus(patch(t, status, c.path, c.value))
			checkBodyCase(t, "status", c, err)
		}
	}
	tpls := []any{map[string]any{"template_id": "tpl\x1b]0;owned\x07"}}
	_, err := DecodeStatus(patch(t, status, "local_templates", tpls))
	checkBodyCase(t, "status", bodyCase{"local_templates", tpls, "local_templates[0].template_id must not hold control characters"}, err)
	for detail, want := range map[string]string{
		"kernel update":        "",
		"line one\nline two":   "detail must not hold control characters (it holds U+000A)",
		"\x1b[31malarm\x1b[0m": "detail must not hold control characters (it holds U+001B)",
		"tab\tseparated":       "detail must not hold control characters",
		"c1\u0090":             "detail must not hold control characters",
	} {
		err := checkDetail(detail)
		checkBodyCase(t, "detail", bodyCase{"detail", detail, want}, err)
	}
	if err := checkText("reason", "a\nb"); err == nil || !strings.Contains(errMessage(err), "reason must not hold control characters") {
		t.Errorf("a drain reason with a newline: %v", err)
	}
}

// TestNodeStringsOverHTTP: over real HTTP the refusals are 400 naming the field, and change
// nothing: a register with an escape sequence in cluster_label registers nothing, a report
// whose versions hold a newline keeps the previous versions, an isolation whose detail holds
// ESC leaves the node uncordoned, and a drain or cordon through the API is refused the same way.
func TestNodeStringsOverHTTP(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		reg := testdata(t, "register.json")
		code, out := e.do(http.MethodPost, registerPath, "", patch(t, reg, "cluster_label", "\x1b[2J\x1b[Hevil"))
		if code != http.StatusBadRequest || !strings.Contains(string(out), `cluster_label \"\\x1b[2J\\x1b[Hevil\" must be empty`) {
			t.Errorf("register with ESC in cluster_label: %d %s", code, out)
		}
		code, out = e.do(http.MethodPost, registerPath, "", patch(t, reg, "instance_type", "cubebox\r\n"))
		if code != http.StatusBadRequest || !strings.Contains(string(out), "instance_type") {
			t.Errorf("register with CRLF in instance_type: %d %s", code, out)
		}
		if _, err := e.reg.Get(t.Context(), "10.0.0.7"); err == nil {
			t.Fatal("a refused registration registered the node")
		}
		if code, out := e.do(http.MethodPost, registerPath, "", reg); code != 200 {
			t.Fatalf("register: %d %s", code, out)
		}
		bad := patch(t, testdata(t, "status.json"), "versions", []any{map[string]any{"component": "cubelet", "version": "v9\n\x1b[1mfake"}})
		code, out = e.do(http.MethodPost, statusPath("10.0.0.7"), "", bad)
		if code != http.StatusBadRequest || !strings.Contains(string(out), "versions[0].version must not hold control characters") {
			t.Errorf("status with a newline in a version: %d %s", code, out)
		}
		code, out = e.do(http.MethodPut, NodesPrefix+"/10.0.0.7/isolation", "", `{"detail":"maintenance\n\u001b[1mby root"}`)
		if code != http.StatusBadRequest || !strings.Contains(string(out), "detail must not hold control characters") {
			t.Errorf("isolation with ESC in the detail: %d %s", code, out)
		}
		if _, err := e.reg.Cordon(t.Context(), "10.0.0.7", "two\nlines", "test"); err == nil {
			t.Error("nodes.cordon accepted a detail with a newline")
		}
		if _, err := e.reg.Drain(t.Context(), "10.0.0.7", "why\x1b", "test"); err == nil {
			t.Error("nodes.drain accepted a reason with ESC")
		}
		v, err := e.reg.Get(t.Context(), "10.0.0.7")
		if err != nil {
			t.Fatal(err)
		}
		if v.Cordoned || v.Drain != nil || len(v.Versions) != 4 || v.Versions[0].Version != "v1.4.2" {
			t.Errorf("refused calls changed the node: cordoned %v, drain %+v, versions %+v", v.Cordoned, v.Drain, v.Versions)
		}
	})
}
