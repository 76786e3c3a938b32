package nodeapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

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
	golden := nodetest.Register()
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
		_, err := nodeapi.DecodeRegister(nodetest.Patch(t, golden, c.path, c.value))
		checkBodyCase(t, "register", c, err)
	}
}

// TestStatusFigures: a status report's figures (allocated, disk_usage, quota, images'
// size_bytes, host facts' counts) may not be negative, disk usage percentages not above 100,
// nor the quota's paused_release_ratio outside 0..1; the refusal names the field. Zeros are accepted (an all-zero quota is ignored).
func TestStatusFigures(t *testing.T) {
	golden := nodetest.Status()
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
		_, err := nodeapi.DecodeStatus(nodetest.Patch(t, golden, c.path, c.value))
		checkBodyCase(t, "status", c, err)
	}
	var images []map[string]any
	json.Unmarshal([]byte(`[{"names":["x"],"size_bytes":-1}]`), &images)
	_, err := nodeapi.DecodeStatus(nodetest.Patch(t, golden, "images", images))
	checkBodyCase(t, "status", bodyCase{"images", "[size_bytes -1]", "images[0].size_bytes must be >= 0"}, err)
}

func checkBodyCase(t *testing.T, what string, c bodyCase, err error) {
	t.Helper()
	switch {
	case c.want == "" && err != nil:
		t.Errorf("%s with %s = %v: refused: %v", what, c.path, c.value, err)
	case c.want != "" && err == nil:
		t.Errorf("%s with %s = %v: accepted, want %q", what, c.path, c.value, c.want)
	case c.want != "" && !strings.Contains(nodetest.ErrMessage(err), c.want):
		t.Errorf("%s with %s = %v: %q, want %q", what, c.path, c.value, nodetest.ErrMessage(err), c.want)
	}
}

// TestControlCharacter: ControlChar finds C0 (tab and newline included), DEL and C1, and
// nothing else (printable ASCII, Latin-1 letters, other scripts).
func TestControlCharacter(t *testing.T) {
	for s, want := range map[string]rune{
		"ok": -1, "": -1, "déjà vu ü": -1, "日本語": -1, "a b": -1, "\u00a0nbsp": -1, "\u00ff": -1,
		"\x1b[31mred": 0x1b, "two\nlines": '\n', "tab\there": '\t', "nul\x00": 0, "del\x7f": 0x7f,
		"c1\u0085next-line": 0x85, "csi\u009b": 0x9b, "c1-first\u0080": 0x80, "c1-last\u009f": 0x9f,
	} {
		r, ok := nodeapi.ControlChar(s)
		if want < 0 && ok || want >= 0 && (!ok || r != want) {
			t.Errorf("ControlChar(%q) = %U, %v; want %U", s, r, ok, want)
		}
	}
}

// TestNodeStrings: the node-supplied strings cubefleet stores and shows are refused with 400
// naming the field when they hold a control character or are too long: cluster_label and
// instance_type (the label value rules), every field of versions[] (in register and status),
// local_templates[].template_id, and an isolation's detail.
func TestNodeStrings(t *testing.T) {
	reg := nodetest.Register()
	status := nodetest.Status()
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
		{"versions", versions("version", strings.Repeat("1", nodeapi.MaxVersionFieldRunes+1)), "versions[1].version is too long: 129 characters, at most 128"},
		// Accepted: what a Cubelet sends, an empty label, non-ASCII text in a version.
		{"cluster_label", "", ""},
		{"cluster_label", "Fra_Cubes.2", ""},
		{"instance_type", "cubebox", ""},
		{"versions", versions("version", "2026.05.1-ü"), ""},
		{"versions", versions("version", "6.6.30\n"), ""}, // read from a file: trimmed
		{"versions", versions("version", strings.Repeat("1", nodeapi.MaxVersionFieldRunes)), ""},
	} {
		_, err := nodeapi.DecodeRegister(nodetest.Patch(t, reg, c.path, c.value))
		checkBodyCase(t, "register", c, err)
		if c.path == "versions" {
			_, err := nodeapi.DecodeStatus(nodetest.Patch(t, status, c.path, c.value))
			checkBodyCase(t, "status", c, err)
		}
	}
	tpls := []any{map[string]any{"template_id": "tpl\x1b]0;owned\x07"}}
	_, err := nodeapi.DecodeStatus(nodetest.Patch(t, status, "local_templates", tpls))
	checkBodyCase(t, "status", bodyCase{"local_templates", tpls, "local_templates[0].template_id must not hold control characters"}, err)
	for detail, want := range map[string]string{
		"kernel update":        "",
		"line one\nline two":   "detail must not hold control characters (it holds U+000A)",
		"\x1b[31malarm\x1b[0m": "detail must not hold control characters (it holds U+001B)",
		"tab\tseparated":       "detail must not hold control characters",
		"c1\u0090":             "detail must not hold control characters",
	} {
		err := nodeapi.CheckText("detail", detail)
		checkBodyCase(t, "detail", bodyCase{"detail", detail, want}, err)
	}
	if err := nodeapi.CheckText("reason", "a\nb"); err == nil || !strings.Contains(nodetest.ErrMessage(err), "reason must not hold control characters") {
		t.Errorf("a drain reason with a newline: %v", err)
	}
}

// TestRegisterAddr: a registration's address is host_ip or, when that is empty, node_id; it
// must be an IP address a node can have, else 400 naming host_ip.
func TestRegisterAddr(t *testing.T) {
	for _, c := range []struct {
		nodeID, hostIP string
		want           string // the address, or the refusal's message
		ok             bool
	}{
		{"10.0.0.7", "10.0.0.7", "10.0.0.7", true},
		{"10.0.0.7", "", "10.0.0.7", true},
		{"cube-7", "10.0.0.7", "10.0.0.7", true},
		{"fd00::7", "", "fd00::7", true},
		{"10.0.0.7", "::ffff:10.0.0.8", "10.0.0.8", true},
		{"10.0.0.7", "127.0.0.1", "127.0.0.1", true},
		{"10.0.0.7", "not an ip", `host_ip must be an IP address: host_ip is "not an ip"`, false},
		{"cube-7", "", `host_ip must be an IP address: node_id (host_ip defaults to it) is "cube-7"`, false},
		{"10.0.0.7", "10.0.0.300", "host_ip must be an IP address", false},
		{"10.0.0.7", "10.0.0.0/24", "host_ip must be an IP address", false},
		{"10.0.0.7", "0.0.0.0", "not the unspecified address", false},
		{"10.0.0.7", "::", "not the unspecified address", false},
		{"10.0.0.7", "224.0.0.1", "not a multicast address", false},
		{"10.0.0.7", "ff02::1", "not a multicast address", false},
		{"10.0.0.7", "255.255.255.255", "not the broadcast address", false},
		{"10.0.0.7", "fe80::1%eth0", "not an address with a zone", false},
	} {
		a, err := (&nodeapi.RegisterRequest{NodeID: c.nodeID, HostIP: c.hostIP}).Addr()
		switch {
		case c.ok && (err != nil || a.String() != c.want):
			t.Errorf("node_id %q host_ip %q: %v %v, want %s", c.nodeID, c.hostIP, a, err, c.want)
		case !c.ok && (err == nil || !strings.Contains(nodetest.ErrMessage(err), c.want)):
			t.Errorf("node_id %q host_ip %q: %v %v, want a refusal saying %q", c.nodeID, c.hostIP, a, err, c.want)
		}
		if !c.ok {
			if _, err := nodeapi.DecodeRegister(nodetest.Patch(t, nodetest.Patch(t, nodetest.Register(), "node_id", c.nodeID), "host_ip", c.hostIP)); err == nil {
				t.Errorf("DecodeRegister accepted node_id %q host_ip %q", c.nodeID, c.hostIP)
			}
		}
	}
}
