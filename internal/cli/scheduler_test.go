package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// runOffline runs a command that needs no server and returns its exit code, stdout and stderr.
func runOffline(args ...string) (int, string, string) {
	return runOfflineIn("", args...)
}

// runOfflineIn is runOffline with stdin as the standard input.
func runOfflineIn(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, IO{In: strings.NewReader(stdin), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
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
	if code != ExitOK || !strings.HasPrefix(out, "scheduler:\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	testkit.Golden(t, "scheduler_check.golden", []byte(strings.ReplaceAll(out+"--- stderr\n"+errOut, shipped, "$FILE")))

	// Standard output is only the configuration: a file that loads to the same configuration,
	// with no warning; "-" reads it from standard input.
	again := writeSchedFile(t, "again.yaml", out)
	code, out2, errOut2 := runOffline("scheduler", "check", again)
	if code != ExitOK || out2 != out || errOut2 != "" {
		t.Errorf("the effective configuration does not load back the same:\n%s\n%s%s", out, out2, errOut2)
	}
	code, out2, errOut2 = runOfflineIn(out, "scheduler", "check", "-")
	if code != ExitOK || out2 != out || errOut2 != "" {
		t.Errorf("check - (standard input): exit %d\n%s%s", code, out2, errOut2)
	}
	shippedBody, _ := os.ReadFile(shipped)
	if code, _, errOut2 := runOfflineIn(string(shippedBody), "scheduler", "check", "-"); code != ExitOK || !strings.Contains(errOut2, "warning: scheduler: line 3:") {
		t.Errorf("check - of the shipped file: exit %d %s", code, errOut2)
	}
	if code, _, errOut2 := runOfflineIn("", "scheduler", "check", "-"); code != ExitFailure || !strings.Contains(errOut2, "stdin: the file is empty") {
		t.Errorf("check - of nothing: exit %d %s", code, errOut2)
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
	if code, _, errOut := runOffline("scheduler", "check", filepath.Join(t.TempDir(), "missing.yaml")); code != ExitUsage || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d %s, want 2 (as for a fleet document that cannot be read)", code, errOut)
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
	// docs/cli.md's exit codes: a bad flag value or a file that cannot be read is 2, a
	// configuration with problems 1.
	badConfig := writeSchedFile(t, "bad.yaml", "scheduler:\n  profile: fastest\n")
	for _, c := range []struct {
		args []string
		code int
		text string
	}{
		{[]string{"--requests", "5"}, ExitUsage, "--nodes"},
		{[]string{"--nodes", "5", "--requests", "5", "--profile", "fastest"}, ExitUsage, "--profile"},
		{[]string{"--nodes", "5", "--requests", "5", "--profile", "binpack_utilization", "--config", "x.yaml"}, ExitUsage, "--config"},
		{[]string{"--nodes", "5", "--requests", "5", "--workload", "storm"}, ExitUsage, "--workload: unknown workload"},
		{[]string{"--nodes", "200000", "--requests", "5"}, ExitUsage, "--nodes: must be 1 to 100000"},
		{[]string{"--nodes", "5", "--requests", "5", "--report-lag", "-1s"}, ExitUsage, "--report-lag"},
		{[]string{"--nodes", "5", "--requests", "5", "--report-period", "0s"}, ExitUsage, "--report-period 0s: must be 1ms to 1h"},
		{[]string{"--nodes", "5", "--requests", "5", "--report-period", "-1s"}, ExitUsage, "--report-period: must be 1ms to 1h"},
		{[]string{"--nodes", "5", "--requests", "5", "--report-period", "2h"}, ExitUsage, "--report-period: must be 1ms to 1h"},
		{[]string{"--nodes", "5", "--requests", "5", "--report-period", "1us"}, ExitUsage, "--report-period: must be 1ms to 1h"},
		{[]string{"--nodes", "5", "--requests", "5", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, ExitUsage, "no such file"},
		{[]string{"--nodes", "5", "--requests", "5", "--config", badConfig}, ExitFailure, "scheduler.profile"},
	} {
		code, _, errOut := runOffline(append([]string{"scheduler", "simulate"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.text) {
			t.Errorf("%v: exit %d %s, want %d naming %q", c.args, code, errOut, c.code, c.text)
		}
	}
}

func TestSchedulerStatus(t *testing.T) {
	c := mustServe(t, "")
	out := c.admin("scheduler", "status")
	for _, want := range []string{"Config file:  none (the built-in defaults)", "Loaded:       ", "Profile:      balanced_spread", "Pick:         random among the top 3", "Reservations: 0"} {
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

// TestSchedulerPlaceGolden drives scheduler place and release against a server with one node
// in the pool fra-cubes: a placement, its retry (the same decision, score included), JSON
// output, bad flag values named by flag, nothing that fits, and the release.
func TestSchedulerPlaceGolden(t *testing.T) {
	c := mustServe(t, "")
	writeFile(t, "fleet.json", `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],"pools":[{"name":"fra-cubes","site":"fra","class":"vps-host"}]}`)
	c.admin("fleet", "apply", "fleet.json", "--tenant", "root", "--yes")
	token := strings.TrimSpace(c.admin("nodes", "join-token", "create", "--pool", "fra-cubes", "--any-ip"))
	code, out := c.post(nodeapi.PathRegister, token, nodeBody(t, "register.json", "10.0.0.7"))
	var reg nodeapi.RegisterResponse
	if err := json.Unmarshal(out, &reg); err != nil || code != 200 {
		t.Fatalf("join: %d %s", code, out)
	}
	if code, out := c.post(nodeapi.StatusPath("10.0.0.7"), reg.NodeCredential, nodeBody(t, "status.json", "10.0.0.7")); code != 200 {
		t.Fatalf("status: %d %s", code, out)
	}
	place := "scheduler place --sandbox-id sbx-1 --pool fra-cubes --cpu 500 --memory-mib 1024"
	testkit.Golden(t, "scheduler_place.golden", []byte(c.transcript(
		place,
		place,
		place+" --output json",
		"scheduler place --sandbox-id sbx-2 --pool fra-cubes --cpu 0 --memory-mib 0",
		"scheduler place --sandbox-id ../sbx --pool fra-cubes --cpu 100 --memory-mib 64",
		"scheduler place --sandbox-id sbx-1 --pool fra-cubes --cpu 600 --memory-mib 1024",
		"scheduler place --sandbox-id sbx-3 --pool fra-cubes --cpu 900000000 --memory-mib 64",
		"scheduler place --sandbox-id sbx-3 --pool nowhere --cpu 100 --memory-mib 64",
		"scheduler release sbx-1",
		"scheduler release sbx-1",
		"scheduler release sbx-1 --output json",
	)))
}
