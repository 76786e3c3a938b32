package nodehttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// TestNegativeFiguresOverHTTP: over real HTTP, a register or report with a negative figure is
// 400 with the field in the answer, and changes nothing: the node keeps its quota and its
// sandbox count (so a drain is not fooled into Drained by mvm_num -5).
func TestNegativeFiguresOverHTTP(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		reg := nodetest.Register()
		for path, v := range map[string]int{"quota_cpu": -1, "max_mvm_num": -9} {
			code, out := e.Do(http.MethodPost, nodeapi.PathRegister, "", nodetest.Patch(t, reg, path, v))
			if code != http.StatusBadRequest || !strings.Contains(string(out), path+" must be >= 0") {
				t.Errorf("register with %s %d: %d %s", path, v, code, out)
			}
		}
		if _, err := e.Reg.Get(t.Context(), "10.0.0.7"); err == nil {
			t.Fatalf("a refused registration registered the node")
		}
		if code, out := e.Do(http.MethodPost, nodeapi.PathRegister, "", reg); code != 200 {
			t.Fatalf("register: %d %s", code, out)
		}
		status := nodetest.Status()
		if code, out := e.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", status); code != 200 {
			t.Fatalf("status: %d %s", code, out)
		}
		for path, v := range map[string]any{"allocated.mvm_num": -5, "allocated.milli_cpu": -100000, "quota.milli_cpu": -1000, "quota.max_mvm_num": -3} {
			code, out := e.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", nodetest.Patch(t, status, path, v))
			if code != http.StatusBadRequest || !strings.Contains(string(out), path+" must be >= 0") || !strings.Contains(string(out), `"code":"INVALID_INPUT"`) {
				t.Errorf("status with %s %v: %d %s", path, v, code, out)
			}
		}
		v, err := e.Reg.Get(t.Context(), "10.0.0.7")
		if err != nil {
			t.Fatal(err)
		}
		if v.Allocated == nil || v.Allocated.Mvm != 4 || v.Allocated.MilliCPU != 3500 || v.Quota.MilliCPU != 64000 || v.Quota.MaxMvm != 312 {
			t.Errorf("refused reports changed the node: allocated %+v, quota %+v", v.Allocated, v.Quota)
		}
	})
}

// TestNodeStringsOverHTTP: over real HTTP the refusals are 400 naming the field, and change
// nothing: a register with an escape sequence in cluster_label registers nothing, a report
// whose versions hold a newline keeps the previous versions, an isolation whose detail holds
// ESC leaves the node uncordoned, and a drain or cordon through the API is refused the same way.
func TestNodeStringsOverHTTP(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		reg := nodetest.Register()
		code, out := e.Do(http.MethodPost, nodeapi.PathRegister, "", nodetest.Patch(t, reg, "cluster_label", "\x1b[2J\x1b[Hevil"))
		if code != http.StatusBadRequest || !strings.Contains(string(out), `cluster_label \"\\x1b[2J\\x1b[Hevil\" must be empty`) {
			t.Errorf("register with ESC in cluster_label: %d %s", code, out)
		}
		code, out = e.Do(http.MethodPost, nodeapi.PathRegister, "", nodetest.Patch(t, reg, "instance_type", "cubebox\r\n"))
		if code != http.StatusBadRequest || !strings.Contains(string(out), "instance_type") {
			t.Errorf("register with CRLF in instance_type: %d %s", code, out)
		}
		if _, err := e.Reg.Get(t.Context(), "10.0.0.7"); err == nil {
			t.Fatal("a refused registration registered the node")
		}
		if code, out := e.Do(http.MethodPost, nodeapi.PathRegister, "", reg); code != 200 {
			t.Fatalf("register: %d %s", code, out)
		}
		bad := nodetest.Patch(t, nodetest.Status(), "versions", []any{map[string]any{"component": "cubelet", "version": "v9\n\x1b[1mfake"}})
		code, out = e.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", bad)
		if code != http.StatusBadRequest || !strings.Contains(string(out), "versions[0].version must not hold control characters") {
			t.Errorf("status with a newline in a version: %d %s", code, out)
		}
		code, out = e.Do(http.MethodPut, nodeapi.NodesPrefix+"/10.0.0.7/isolation", "", `{"detail":"maintenance\n\u001b[1mby root"}`)
		if code != http.StatusBadRequest || !strings.Contains(string(out), "detail must not hold control characters") {
			t.Errorf("isolation with ESC in the detail: %d %s", code, out)
		}
		if _, err := e.Reg.Cordon(t.Context(), "10.0.0.7", "two\nlines", "test"); err == nil {
			t.Error("nodes.cordon accepted a detail with a newline")
		}
		if _, err := e.Reg.Drain(t.Context(), "10.0.0.7", "why\x1b", "test"); err == nil {
			t.Error("nodes.drain accepted a reason with ESC")
		}
		v, err := e.Reg.Get(t.Context(), "10.0.0.7")
		if err != nil {
			t.Fatal(err)
		}
		if v.Cordoned || v.Drain != nil || len(v.Versions) != 4 || v.Versions[0].Version != "v1.4.2" {
			t.Errorf("refused calls changed the node: cordoned %v, drain %+v, versions %+v", v.Cordoned, v.Drain, v.Versions)
		}
	})
}
