package scheduler

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDocsDefaults: the default column of docs/scheduler.md's configuration table and the
// profiles table say what the code does. The code is the one source; this test keeps the
// document in step with it.
func TestDocsDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/scheduler.md")
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	rtwa := d.Score.PluginConf[ScorerRealTimeWeightedAverage]
	_, _, binpackN := profile(ProfileBinpackUtilization)
	_, tlf, _ := profile(ProfileTemplateLocalityFirst)
	want := map[string]string{
		"profile":                                          d.Profile,
		"priority_select_num":                              fmt.Sprintf("%d (%d for binpack_utilization)", d.PrioritySelectNum, binpackN),
		"least_select_name":                                d.LeastSelectName,
		"pre_select_num":                                   strconv.Itoa(d.PreSelectNum),
		"metric_update_timeout":                            fmt.Sprintf("%gs", time.Duration(d.MetricUpdateTimeout).Seconds()),
		"node_max_mvm_num":                                 strconv.FormatInt(d.NodeMaxMvmNum, 10),
		"node_max_mvm_num_reserve_num_percent":             fmt.Sprintf("%g", d.NodeMaxMvmNumReserveNumPercent),
		"node_max_cpu_util":                                fmt.Sprintf("%g", d.NodeMaxCPUUtil),
		"node_max_mem_reserved_in_mb":                      strconv.FormatInt(d.NodeMaxMemReservedInMB, 10),
		"disk_usage_max_percent":                           fmt.Sprintf("%g", d.DiskUsageMaxPercent),
		"filter.enable_filters":                            strings.Join(d.Filter.EnableFilters, ", "),
		"score.enable_scorers":                             strings.Join(d.Score.EnableScorers, ", "),
		"score.resource_weights.<factor>":                  weightList(d.Score.ResourceWeights),
		"score.plugin_conf.<scorer>.weight":                fmt.Sprintf("%g", rtwa.Weight),
		"score.plugin_conf.<scorer>.enable_weight_factors": strings.Join(rtwa.EnableWeightFactors, ", "),
		"score.plugin_conf.<scorer>.disable":               strconv.FormatBool(rtwa.Disable),
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, ok := want[key]; ok {
			got[key] = strings.ReplaceAll(strings.TrimSpace(cells[2]), "`", "")
		}
	}
	for key, w := range want {
		if got[key] != w {
			t.Errorf("docs/scheduler.md: the default of %s is %q; the code's is %q", key, got[key], w)
		}
	}
	// The profiles table gives the weights of balanced_spread and template_locality_first.
	for _, w := range []string{
		"`real_time_weighted_average`: " + strings.ReplaceAll(weightList(d.Score.ResourceWeights), ":", ""),
		fmt.Sprintf("plus `template_locality` weighing %g", tlf.ResourceWeights[FactorTemplateLocality]),
	} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/scheduler.md's profiles table lacks %q", w)
		}
	}
}

// TestDocsIgnoredKeys: every CubeMaster key, filter and scorer docs/scheduler.md lists as
// ignored with a warning loads, with a warning naming it, wherever the document places it.
func TestDocsIgnoredKeys(t *testing.T) {
	doc, err := os.ReadFile("../../docs/scheduler.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "- One warning, naming them, for CubeMaster keys not implemented here"
	i := strings.Index(string(doc), start)
	if i < 0 {
		t.Fatalf("docs/scheduler.md lacks %q", start)
	}
	para := string(doc)[i:]
	para = para[:strings.Index(para, "\n- ")]
	keys, rest, ok := strings.Cut(para, "Likewise")
	if !ok {
		t.Fatal("the ignored-keys paragraph lacks its Likewise sentence")
	}
	_, rest, _ = strings.Cut(rest, "filter")
	filters, rest, _ := strings.Cut(rest, "the scorers")
	scorers, tail, _ := strings.Cut(rest, "(left out)")
	tail, _, _ = strings.Cut(tail, "(under") // the places it may be set, not names
	names := func(s string) []string {
		var out []string
		for i, part := range strings.Split(s, "`") {
			if i%2 == 1 && !strings.Contains(part, ":") && !strings.Contains(part, " ") {
				out = append(out, part)
			}
		}
		return out
	}
	const base = "scheduler:\n  profile: balanced_spread\n"
	type placed struct{ name, yaml, warnPath string }
	var tests []placed
	for _, k := range append(names(keys), names(tail)...) {
		tests = append(tests, placed{k, base + "  " + k + ": 1\n", "scheduler"})
	}
	for _, k := range names(tail) { // the score block's own keys
		tests = append(tests,
			placed{k, "scheduler:\n  score:\n    enable_scorers: [binpack_score]\n    plugin_conf:\n      binpack_score: {weight: 1}\n    " + k + ": 1\n", "scheduler.score." + k},
			placed{k, "scheduler:\n  score:\n    enable_scorers: [binpack_score]\n    plugin_conf:\n      binpack_score: {weight: 1, " + k + ": 1}\n", "scheduler.score.plugin_conf.binpack_score." + k})
	}
	for _, f := range names(filters) {
		tests = append(tests, placed{f, base + "  filter:\n    enable_filters: [cpu, " + f + "]\n", "scheduler.filter.enable_filters[1]"})
	}
	for _, s := range names(scorers) {
		tests = append(tests, placed{s, "scheduler:\n  score:\n    enable_scorers: [binpack_score, " + s + "]\n    plugin_conf:\n      binpack_score: {weight: 1}\n", "scheduler.score.enable_scorers"})
	}
	if len(tests) < 25 {
		t.Fatalf("read only %d ignored names from docs/scheduler.md: %v", len(tests), tests)
	}
	for _, tt := range tests {
		t.Run(tt.warnPath+"/"+tt.name, func(t *testing.T) {
			_, warns, err := Load("test.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("docs/scheduler.md says %s is ignored with a warning; it is refused: %v", tt.name, err)
			}
			for _, w := range warns {
				if w.Path == tt.warnPath && strings.Contains(w.Message, tt.name) {
					return
				}
			}
			t.Errorf("no warning at %s naming %s: %v", tt.warnPath, tt.name, warns)
		})
	}
}
