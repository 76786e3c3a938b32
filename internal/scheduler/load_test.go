package scheduler

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestLoadShippedConfig(t *testing.T) {
	cfg, warns, err := LoadFile("testdata/shipped.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The shipped file has no score block: it loads with a warning, and uses the recommended
	// scoring where upstream would place first-fit.
	if !hasWarning(warns, "scheduler.score", "first-fit") {
		t.Errorf("no first-fit warning: %v", warns)
	}
	if !hasWarning(warns, "scheduler", "local_metric_update_timeout") {
		t.Errorf("no warning naming the unimplemented key: %v", warns)
	}
	if cfg.PrioritySelectNum != 1 || cfg.Profile != ProfileBalancedSpread {
		t.Errorf("priority_select_num %d profile %s", cfg.PrioritySelectNum, cfg.Profile)
	}
	if !reflect.DeepEqual(cfg.Score, Default().Score) {
		t.Errorf("score %+v, want the recommended %+v", cfg.Score, Default().Score)
	}
	if want := []string{"cpu", "mem", "template_locality", "realtime_create_num"}; !reflect.DeepEqual(cfg.Filter.EnableFilters, want) {
		t.Errorf("filters %v, want %v", cfg.Filter.EnableFilters, want)
	}
}

func TestLoadRecommendedEqualsDefault(t *testing.T) {
	cfg, warns, err := LoadFile("testdata/recommended.yaml")
	if err != nil || len(warns) != 0 {
		t.Fatalf("err %v warnings %v", err, warns)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("the recommended file loads to\n%+v\nwant the default\n%+v", cfg, Default())
	}
}

func TestLoadProfiles(t *testing.T) {
	for _, p := range Profiles {
		cfg, warns, err := Load("p.yaml", []byte("scheduler:\n  profile: "+p+"\n"))
		if err != nil || len(warns) != 0 {
			t.Fatalf("%s: err %v warnings %v", p, err, warns)
		}
		want, _, _ := Load("", nil)
		want.Profile = p
		want.fill(fileKeys{})
		fs, sc, n := profile(p)
		want.Filter.EnableFilters, want.Score, want.PrioritySelectNum = fs, sc, n
		if !reflect.DeepEqual(cfg, want) {
			t.Errorf("%s: %+v", p, cfg)
		}
	}
	// The legacy blocks override the profile's.
	cfg, _, err := Load("p.yaml", []byte("scheduler:\n  profile: binpack_utilization\n  priority_select_num: 2\n  filter:\n    enable_filters: [cpu]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PrioritySelectNum != 2 || !reflect.DeepEqual(cfg.Filter.EnableFilters, []string{"cpu"}) || cfg.Score.EnableScorers[0] != ScorerBinpack {
		t.Errorf("override: %+v", cfg)
	}
}

func TestLoadWarnings(t *testing.T) {
	doc := `scheduler:
  profile: balanced_spread
  overcommit_ratio: {cpu_ratio: 2}
  postscore: {disable: true}
  filter:
    enable_filters: [cpu, thirtparty]
  score:
    enable_scorers: [real_time_weighted_average, image_score]
    resource_weights: {mvm_num: 1}
    plugin_conf:
      real_time_weighted_average:
        weight: 1
        enable_weight_factors: [mvm_num, quota_cpu_usage]
      image_score: {weight: 1}
`
	cfg, warns, err := Load("w.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ path, text string }{
		{"scheduler", "overcommit_ratio, postscore"},
		{"scheduler.filter.enable_filters[1]", "thirtparty"},
		{"scheduler.score.enable_scorers", "image_score"},
		{"scheduler.score.resource_weights", `"quota_cpu_usage" of real_time_weighted_average has no weight`},
	} {
		if !hasWarning(warns, w.path, w.text) {
			t.Errorf("no warning at %s naming %q in %v", w.path, w.text, warns)
		}
	}
	if strings.Count(warnText(warns), "not implemented here, ignored") != 1 {
		t.Errorf("the ignored keys are not named in one warning: %v", warns)
	}
	if !reflect.DeepEqual(cfg.Filter.EnableFilters, []string{"cpu"}) || !reflect.DeepEqual(cfg.Score.EnableScorers, []string{ScorerRealTimeWeightedAverage}) {
		t.Errorf("left-out names kept: %+v", cfg)
	}
}

// TestLoadErrors: every bad configuration is an error naming its key path and line, never a
// panic, and nothing of the file is used.
func TestLoadErrors(t *testing.T) {
	rtwa := "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: 1}\n    plugin_conf:\n      real_time_weighted_average:\n"
	for _, c := range []struct {
		name, doc, path string
		line            int
		text            string
	}{
		{"unknown scorer", "scheduler:\n  score:\n    enable_scorers: [fastest]\n", "scheduler.score.enable_scorers[0]", 3, `unknown scorer "fastest"`},
		{"unknown factor in weights", "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_nums: 1}\n", "scheduler.score.resource_weights.mvm_nums", 4, `unknown factor "mvm_nums"`},
		{"unknown factor listed", rtwa + "        enable_weight_factors: [mvm_num, gpu_util]\n", "scheduler.score.plugin_conf.real_time_weighted_average.enable_weight_factors[1]", 7, `unknown factor "gpu_util"`},
		{"missing plugin block", "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: 1}\n", "scheduler.score.plugin_conf.real_time_weighted_average", 0, "needs its plugin_conf block"},
		{"negative weight", "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: -2}\n    plugin_conf:\n      real_time_weighted_average: {enable_weight_factors: [mvm_num]}\n", "scheduler.score.resource_weights.mvm_num", 4, "weight must be >= 0"},
		{"negative scorer weight", rtwa + "        weight: -1\n        enable_weight_factors: [mvm_num]\n", "scheduler.score.plugin_conf.real_time_weighted_average.weight", 7, "must be > 0"},
		{"zero weights", "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: 0}\n    plugin_conf:\n      real_time_weighted_average: {enable_weight_factors: [mvm_num]}\n", "scheduler.score.plugin_conf.real_time_weighted_average.enable_weight_factors", 6, "weight 0"},
		{"string for int", "scheduler:\n  priority_select_num: three\n", "scheduler.priority_select_num", 2, `must be a whole number, not the string "three"`},
		{"float for int", "scheduler:\n  node_max_mvm_num: 2.5\n", "scheduler.node_max_mvm_num", 2, "must be a whole number"},
		{"int for duration", "scheduler:\n  metric_update_timeout: 300\n", "scheduler.metric_update_timeout", 2, "must be a duration with its unit, such as 300s"},
		{"bad duration", "scheduler:\n  metric_update_timeout: 5 minutes\n", "scheduler.metric_update_timeout", 2, `not "5 minutes"`},
		{"list for mapping", "scheduler:\n  score: [a]\n", "scheduler.score", 2, "must be a mapping"},
		{"scalar for list", "scheduler:\n  filter:\n    enable_filters: cpu\n", "scheduler.filter.enable_filters", 3, "must be a list of names"},
		{"unknown filter", "scheduler:\n  filter:\n    enable_filters: [cpu, gpu]\n", "scheduler.filter.enable_filters[1]", 3, `unknown filter "gpu"`},
		{"unknown key", "scheduler:\n  priority_select_nums: 3\n", "scheduler.priority_select_nums", 2, "unknown key"},
		{"unknown selection", "scheduler:\n  least_select_name: roundrobin\n", "scheduler.least_select_name", 2, `unknown selection "roundrobin"`},
		{"zero priority", "scheduler:\n  priority_select_num: 0\n", "scheduler.priority_select_num", 2, "positive number of nodes, or -1"},
		{"unknown profile", "scheduler:\n  profile: fastest\n", "scheduler.profile", 2, `unknown profile "fastest"`},
		{"percent out of range", "scheduler:\n  node_max_cpu_util: 180\n", "scheduler.node_max_cpu_util", 2, "percentage in (0, 100]"},
		{"reserve fraction", "scheduler:\n  node_max_mvm_num_reserve_num_percent: 1.5\n", "scheduler.node_max_mvm_num_reserve_num_percent", 2, "in (0, 1]"},
		{"duplicate key", "scheduler:\n  priority_select_num: 3\n  priority_select_num: 4\n", "scheduler.priority_select_num", 3, "set twice (first on line 2)"},
		{"nan weight", "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: .nan}\n", "scheduler.score.resource_weights.mvm_num", 4, "finite number"},
		{"bool for weight", rtwa + "        weight: yes\n", "scheduler.score.plugin_conf.real_time_weighted_average.weight", 7, "must be a number"},
		{"binpack factors", "scheduler:\n  score:\n    enable_scorers: [binpack_score]\n    plugin_conf:\n      binpack_score: {enable_weight_factors: [mvm_num]}\n", "scheduler.score.plugin_conf.binpack_score.enable_weight_factors", 5, "takes no factors"},
		{"no scorer", "scheduler:\n  score:\n    resource_weights: {mvm_num: 1}\n", "scheduler.score.enable_scorers", 0, "no scorer enabled"},
		{"unknown plugin key", rtwa + "        weights: 1\n", "scheduler.score.plugin_conf.real_time_weighted_average.weights", 7, "unknown key"},
		{"not a mapping", "- scheduler\n", "", 1, "must be a mapping"},
		{"bad yaml", "scheduler:\n  a: [\n", "", 2, "not valid YAML"},
		{"scheduler is a list", "scheduler: [1]\n", "scheduler", 1, "must be a mapping"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := Load("bad.yaml", []byte(c.doc))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v (%T), want *ConfigError", err, err)
			}
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Errorf("a config came back with the error: %+v", cfg)
			}
			for _, p := range ce.Problems {
				if p.Path == c.path && (c.line == 0 || p.Line == c.line) && strings.Contains(p.Message, c.text) {
					if !strings.Contains(err.Error(), "bad.yaml: ") {
						t.Errorf("error %q does not name the file", err)
					}
					return
				}
			}
			t.Errorf("no problem at %s line %d containing %q; got %v", c.path, c.line, c.text, ce.Problems)
		})
	}
}

func TestLoadCollectsEveryProblem(t *testing.T) {
	_, _, err := Load("bad.yaml", []byte("scheduler:\n  priority_select_num: 0\n  least_select_name: x\n  node_max_cpu_util: -1\n"))
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("%v", err)
	}
	if ce.Problems[0].Line != 2 || ce.Problems[2].Line != 4 {
		t.Errorf("problems not in file order: %v", ce.Problems)
	}
}

func TestLoadEmptySection(t *testing.T) {
	cfg, warns, err := Load("e.yaml", []byte("common:\n  a: 1\nscheduler:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("%+v", cfg)
	}
	if len(warns) != 1 {
		t.Errorf("warnings %v", warns)
	}
}

func TestLoadMergeKeysAndAliases(t *testing.T) {
	doc := "base: &w {mvm_num: 2, local_create_num: 3}\nscheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights:\n      <<: *w\n      mvm_num: 5\n    plugin_conf:\n      real_time_weighted_average: {enable_weight_factors: [mvm_num, local_create_num]}\n"
	cfg, _, err := Load("m.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Score.ResourceWeights; w["mvm_num"] != 5 || w["local_create_num"] != 3 {
		t.Errorf("weights %v", w)
	}
}

func TestLoadFileTooLarge(t *testing.T) {
	path := t.TempDir() + "/big.yaml"
	if err := os.WriteFile(path, []byte("scheduler:\n"+strings.Repeat("# padding\n", MaxConfigBytes/10+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err %v", err)
	}
	if _, _, err := LoadFile(t.TempDir() + "/missing.yaml"); err == nil {
		t.Error("a missing file loaded")
	}
}

func hasWarning(ws []Warning, path, text string) bool {
	for _, w := range ws {
		if w.Path == path && strings.Contains(w.Message, text) {
			return true
		}
	}
	return false
}

func warnText(ws []Warning) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.String() + "\n")
	}
	return b.String()
}

func TestLoadMergeCycle(t *testing.T) {
	_, _, err := Load("c.yaml", []byte("scheduler: &s\n  <<: *s\n"))
	if err == nil || !strings.Contains(err.Error(), "merge keys") {
		t.Errorf("err %v", err)
	}
}

func TestReloadFileKeepsConfigOnError(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	path := t.TempDir() + "/cubemaster.yaml"
	os.WriteFile(path, []byte("scheduler:\n  profile: binpack_utilization\n"), 0o600)
	if _, err := s.ReloadFile(path); err != nil || s.Config().Profile != ProfileBinpackUtilization {
		t.Fatalf("reload: %v %s", err, s.Config().Profile)
	}
	os.WriteFile(path, []byte("scheduler:\n  profile: nope\n"), 0o600)
	if _, err := s.ReloadFile(path); err == nil || s.Config().Profile != ProfileBinpackUtilization {
		t.Errorf("an invalid file replaced the configuration: %v %s", err, s.Config().Profile)
	}
}
