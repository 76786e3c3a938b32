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
