package scheduler

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// problems loads doc and returns its problems (nil when it loads).
func problems(t *testing.T, doc string) []Problem {
	t.Helper()
	_, _, err := Load("f.yaml", []byte(doc))
	if err == nil {
		return nil
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("%q: %v (%T)", doc, err, err)
	}
	return ce.Problems
}

// TestLoadRefusesAFileThatSaysNothing: an empty file, a file without a scheduler section (a
// misspelled one named), and a file of several YAML documents are refused, so a reload of such
// a file keeps the configuration in force instead of silently going back to the defaults.
func TestLoadRefusesAFileThatSaysNothing(t *testing.T) {
	for _, c := range []struct{ name, doc, text string }{
		{"empty", "", "the file is empty"},
		{"only comments", "# nothing here\n", "the file is empty"},
		{"other sections", "common:\n  a: 1\n", "no scheduler: section"},
		{"misspelled", "schedular:\n  profile: binpack_utilization\n", `did you mean scheduler`},
		{"capitalised", "Scheduler:\n  profile: binpack_utilization\n", `did you mean scheduler`},
		{"two documents", "scheduler:\n  profile: binpack_utilization\n---\nscheduler:\n  profile: balanced_spread\n", "line 3"},
		{"empty second document", "scheduler:\n  profile: binpack_utilization\n---\n", "second YAML document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := problems(t, c.doc)
			if len(ps) != 1 || !strings.Contains(ps[0].String(), c.text) {
				t.Errorf("%q: problems %v, want one naming %q", c.doc, ps, c.text)
			}
		})
	}
	// A scheduler section without keys says "the defaults" on purpose: it loads.
	if ps := problems(t, "scheduler:\n"); ps != nil {
		t.Errorf("an empty scheduler section: %v", ps)
	}
	c := newClock()
	s := newScheduler(t, c, Config{})
	path := t.TempDir() + "/cubemaster.yaml"
	os.WriteFile(path, []byte("scheduler:\n  profile: binpack_utilization\n"), 0o600)
	if _, err := s.ReloadFile(path); err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"", "schedular:\n  profile: balanced_spread\n"} {
		os.WriteFile(path, []byte(doc), 0o600)
		if _, err := s.ReloadFile(path); err == nil || s.Config().Profile != ProfileBinpackUtilization {
			t.Errorf("reloading %q: %v, profile %s", doc, err, s.Config().Profile)
		}
	}
}

// TestLoadOneProblemPerMistake: a value of the wrong type or out of range is one problem, not
// that problem and the range check of the zero it left behind.
func TestLoadOneProblemPerMistake(t *testing.T) {
	rtwa := "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: %s}\n    plugin_conf:\n      real_time_weighted_average: {enable_weight_factors: [mvm_num]}\n"
	for _, doc := range []string{
		"scheduler:\n  priority_select_num: three\n",
		"scheduler:\n  priority_select_num: \"3\"\n",
		"scheduler:\n  priority_select_num: ~\n",
		"scheduler:\n  priority_select_num: 3.5\n",
		"scheduler:\n  priority_select_num: 99999999999999999999\n",
		"scheduler:\n  pre_select_num: x\n",
		"scheduler:\n  metric_update_timeout: 300\n",
		"scheduler:\n  node_max_cpu_util: high\n",
		"scheduler:\n  node_max_mvm_num_reserve_num_percent: .inf\n",
		strings.ReplaceAll(rtwa, "%s", ".nan"),
		strings.ReplaceAll(rtwa, "%s", ".inf"),
		strings.ReplaceAll(rtwa, "%s", "heavy"),
		strings.ReplaceAll(rtwa, "%s", "-1"),
		"scheduler:\n  score:\n    plugin_conf: x\n    enable_scorers: [real_time_weighted_average]\n",
		"scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average, binpack_score]\n    plugin_conf:\n      real_time_weighted_average: {weight: 1}\n      binpack_score: {disable: \"yes\"}\n",
		"scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    plugin_conf:\n      real_time_weighted_average: {weight: x}\n",
	} {
		if ps := problems(t, doc); len(ps) != 1 {
			t.Errorf("%q: %d problems, want 1: %v", doc, len(ps), ps)
		}
	}
	// The documentation's own example of a duration written without its unit.
	ps := problems(t, "scheduler:\n  metric_update_timeout: 300\n")
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "300s") || ps[0].Line != 2 {
		t.Errorf("metric_update_timeout: 300: %v", ps)
	}
}

// TestLoadScoreDefaults: the score keys left out take the documented defaults: a plugin block
// without enable_weight_factors averages the recommended four factors, a score block without
// resource_weights weighs them as recommended; a scorer whose factors all weigh 0 is refused
// at its line.
func TestLoadScoreDefaults(t *testing.T) {
	cfg, _, err := Load("d.yaml", []byte("scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    plugin_conf:\n      real_time_weighted_average: {weight: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Score, Default().Score) {
		t.Errorf("score %+v, want the recommended %+v", cfg.Score, Default().Score)
	}
	cfg, _, err = Load("d.yaml", []byte("scheduler:\n  score:\n    enable_scorers: [multi_factor_weighted_average]\n    plugin_conf:\n      multi_factor_weighted_average:\n        enable_weight_factors: [mvm_num, quota_cpu_usage]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Score.ResourceWeights; w[FactorMvmNum] != 2 || w[FactorQuotaCPUUsage] != 1 {
		t.Errorf("weights %v, want the recommended ones", w)
	}
	ps := problems(t, "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    plugin_conf:\n      real_time_weighted_average:\n        enable_weight_factors: [cpu_util]\n")
	if len(ps) != 1 || ps[0].Line == 0 || !strings.Contains(ps[0].Message, "weight 0") {
		t.Errorf("factors without weight: %v", ps)
	}
	for _, p := range problems(t, "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    resource_weights: {cpu_util: 1}\n") {
		if p.Line == 0 {
			t.Errorf("a problem without its line: %v", p)
		}
	}
}

// TestLoadChecksEveryPluginBlock: the settings of a scorer that is not enabled are checked like
// an enabled one's, so enabling it later cannot bring a surprise.
func TestLoadChecksEveryPluginBlock(t *testing.T) {
	base := "scheduler:\n  score:\n    enable_scorers: [real_time_weighted_average]\n    plugin_conf:\n      real_time_weighted_average: {weight: 1}\n      multi_factor_weighted_average:\n"
	for doc, path := range map[string]string{
		base + "        enable_weight_factors: [nonsense]\n":                   "scheduler.score.plugin_conf.multi_factor_weighted_average.enable_weight_factors[0]",
		base + "        weight: -1\n":                                          "scheduler.score.plugin_conf.multi_factor_weighted_average.weight",
		base + "        disable: true\n        enable_weight_factors: [gpu]\n": "scheduler.score.plugin_conf.multi_factor_weighted_average.enable_weight_factors[0]",
	} {
		ps := problems(t, doc)
		if len(ps) != 1 || ps[0].Path != path || ps[0].Line == 0 {
			t.Errorf("%q: %v, want one problem at %s", doc, ps, path)
		}
	}
}

// TestLoadWarnsPreSelectBelowPriority: pre_select_num below priority_select_num caps the pick.
func TestLoadWarnsPreSelectBelowPriority(t *testing.T) {
	_, warns, err := Load("w.yaml", []byte("scheduler:\n  pre_select_num: 5\n  priority_select_num: 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(warns, func(w Warning) bool {
		return w.Path == "scheduler.priority_select_num" && w.Line == 3 && strings.Contains(w.Message, "pre_select_num")
	}) {
		t.Errorf("no warning: %v", warns)
	}
	_, warns, _ = Load("w.yaml", []byte("scheduler:\n  pre_select_num: 5\n  priority_select_num: -1\n"))
	if !slices.ContainsFunc(warns, func(w Warning) bool { return w.Path == "scheduler.priority_select_num" }) {
		t.Errorf("no warning for -1: %v", warns)
	}
}

// TestLoadWarnsUnusedScoreSettings: settings that change nothing are named: a scorer
// configured but not enabled, one enabled and disabled, a weight no running scorer uses.
func TestLoadWarnsUnusedScoreSettings(t *testing.T) {
	head := "scheduler:\n  score:\n"
	for _, c := range []struct {
		name, doc, path string
		line            int
	}{
		{"configured, not enabled", head + "    enable_scorers: [real_time_weighted_average]\n    plugin_conf:\n      real_time_weighted_average: {weight: 1}\n      binpack_score: {weight: 2}\n",
			"scheduler.score.plugin_conf.binpack_score", 6},
		{"enabled and disabled", head + "    enable_scorers: [real_time_weighted_average, binpack_score]\n    plugin_conf:\n      real_time_weighted_average: {weight: 1}\n      binpack_score: {weight: 3, disable: true}\n",
			"scheduler.score.plugin_conf.binpack_score.disable", 6},
		{"weight nobody uses", head + "    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: 2, cpu_util: 4}\n    plugin_conf:\n      real_time_weighted_average: {enable_weight_factors: [mvm_num]}\n",
			"scheduler.score.resource_weights.cpu_util", 4},
		{"weights of a disabled scorer", head + "    enable_scorers: [binpack_score, multi_factor_weighted_average]\n    resource_weights: {mvm_num: 2}\n    plugin_conf:\n      binpack_score: {}\n      multi_factor_weighted_average: {disable: true, enable_weight_factors: [mvm_num]}\n",
			"scheduler.score.resource_weights.mvm_num", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, warns, err := Load("u.yaml", []byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(warns, func(w Warning) bool { return w.Path == c.path && w.Line == c.line }) {
				t.Errorf("no warning at %s line %d: %v", c.path, c.line, warns)
			}
		})
	}
	// The defaults and a fully used score block warn about nothing of the kind.
	for _, doc := range []string{"scheduler:\n  profile: template_locality_first\n", head + "    enable_scorers: [real_time_weighted_average]\n    resource_weights: {mvm_num: 2}\n    plugin_conf:\n      real_time_weighted_average: {enable_weight_factors: [mvm_num]}\n"} {
		_, warns, err := Load("u.yaml", []byte(doc))
		if err != nil || len(warns) != 0 {
			t.Errorf("%q: %v %v", doc, warns, err)
		}
	}
}

// TestConfigErrorWording: a file that cannot be read is `scheduler configuration FILE: reason`
// whatever the reason, a whole number too large says out of range, and a problem reads
// `path: line N: message` in every error (start, SIGHUP reload) as `scheduler check` prints it.
func TestConfigErrorWording(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	huge := write("huge.yaml", "scheduler:\n  priority_select_num: 99999999999999999999\n")
	badProfile := write("bad.yaml", "scheduler:\n  profile: binpack\n")
	for _, c := range []struct{ name, path, want string }{
		{"missing file", dir + "/missing.yaml", "scheduler configuration " + dir + "/missing.yaml: no such file or directory"},
		{"directory", dir, "scheduler configuration " + dir + ": is a directory"},
		{"too large a whole number", huge, huge + ": scheduler.priority_select_num: line 2: out of range: 99999999999999999999 does not fit in 64 bits"},
		{"path before line", badProfile, badProfile + `: scheduler.profile: line 2: unknown profile "binpack"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := LoadFile(c.path)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("LoadFile(%s): %v\nwant %s...", c.path, err, c.want)
			}
			s := newScheduler(t, newClock(), Config{})
			if _, err := s.ReloadFile(c.path); err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("ReloadFile(%s): %v\nwant %s...", c.path, err, c.want)
			}
		})
	}
}
