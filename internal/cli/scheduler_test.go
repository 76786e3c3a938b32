package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/testkit"
)

// runOffline runs a command that needs no server and returns its exit code, stdout and stderr.
func runOffline(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
	return code, out.String(), errb.String()
}

func writeSchedFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSchedulerCheck(t *testing.T) {
	shipped := writeSchedFile(t, "cubemaster.yaml", `common:
  sync_meta_data_interval: 1s
scheduler:
  priority_select_num: 1
  metric_update_timeout: 300s
  local_metric_update_timeout: 300s
  filter:
    enable_filters: [cpu, mem, template_locality, realtime_create_num]
`)
	code, out, errOut := runOffline("scheduler", "check", shipped)
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	testkit.Golden(t, "scheduler_check.golden", []byte(strings.ReplaceAll(out, shipped, "$FILE")))

	// The printed configuration is a file that loads to the same configuration, with no warning.
	effective := out[strings.Index(out, "\nscheduler:\n")+1:]
	again := writeSchedFile(t, "again.yaml", effective)
	code, out2, _ := runOffline("scheduler", "check", again)
	if code != ExitOK || out2 != effective {
		t.Errorf("the effective configuration does not load back the same:\n%s\n%s", out, out2)
	}

	bad := writeSchedFile(t, "bad.yaml", "scheduler:\n  priority_select_num: 0\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: -1}\n")
	code, out, errOut = runOffline("scheduler", "check", bad)
	if code != ExitFailure {
		t.Fatalf("exit %d, want 1", code)
	}
	testkit.Golden(t, "scheduler_check_bad.golden", []byte(strings.ReplaceAll(out+"--- stderr\n"+errOut, bad, "$FILE")))

	code, out, _ = runOffline("scheduler", "check", bad, "-o", "json")
	var res struct {
		Valid    bool `json:"valid"`
		Problems []struct {
			Path string `json:"path"`
			Line int    `json:"line"`
		} `json:"problems"`
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitFailure {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if res.Valid || len(res.Problems) != 3 || res.Problems[0].Path != "scheduler.priority_select_num" || res.Problems[0].Line != 2 || res.Error.Code != "INVALID_INPUT" {
		t.Errorf("%+v", res)
	}
	if code, _, errOut := runOffline("scheduler", "check", filepath.Join(t.TempDir(), "missing.yaml")); code != ExitFailure || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d %s", code, errOut)
	}
	if code, _, _ := runOffline("scheduler", "check"); code != ExitUsage {
		t.Errorf("no file: exit %d, want 2", code)
	}
}

func TestSchedulerSimulate(t *testing.T) {
	args := []string{"scheduler", "simulate", "--nodes", "50", "--requests", "500", "--workload", "mixed", "--report-lag", "1s", "--seed", "3"}
	code, out, errOut := runOffline(args...)
	if code != ExitOK || !strings.Contains(errOut, "decision latency: p50") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	testkit.Golden(t, "scheduler_simulate.golden", []byte(out))
	_, again, _ := runOffline(args...)
	if again != out {
		t.Error("the same seed printed a different report")
	}
	code, js, _ := runOffline(append(args, "-o", "json")...)
	var rep struct {
		Nodes      int   `json:"nodes"`
		Placements []int `json:"placements"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || code != ExitOK || rep.Nodes != 50 || len(rep.Placements) != 50 {
		t.Errorf("json: exit %d %v %+v", code, err, rep)
	}
	for _, bad := range [][]string{
		{"scheduler", "simulate", "--requests", "5"},
		{"scheduler", "simulate", "--nodes", "5", "--requests", "5", "--profile", "fastest"},
		{"scheduler", "simulate", "--nodes", "5", "--requests", "5", "--profile", "binpack_utilization", "--config", "x.yaml"},
	} {
		if code, _, _ := runOffline(bad...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	if code, _, errOut := runOffline("scheduler", "simulate", "--nodes", "5", "--requests", "5", "--workload", "storm"); code != ExitFailure || !strings.Contains(errOut, "workload") {
		t.Errorf("bad workload: exit %d %s", code, errOut)
	}
}

func TestSchedulerStatus(t *testing.T) {
	c := mustServe(t, "")
	out := c.admin("scheduler", "status")
	for _, want := range []string{"Profile:      balanced_spread", "Pick:         random among the top 3", "Reservations: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	js := c.admin("scheduler", "status", "-o", "json")
	var st struct {
		Config struct {
			Profile string `json:"profile"`
		} `json:"config"`
		Reservations []any `json:"reservations"`
	}
	if err := json.Unmarshal([]byte(js), &st); err != nil || st.Config.Profile != "balanced_spread" || st.Reservations == nil {
		t.Errorf("json: %v %s", err, js)
	}
}
