package scheduler

import (
	"errors"
	"os"
	"reflect"
	"testing"
)

// FuzzLoad: the loader never panics; a file it accepts is a valid configuration, and the
// effective configuration `scheduler check` prints loads back to the same configuration.
// Run: go test ./internal/scheduler -run '^$' -fuzz FuzzLoad -fuzztime 60s
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"testdata/shipped.yaml", "testdata/recommended.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("scheduler:\n  profile: binpack_utilization\n  priority_select_num: -1\n  least_select_name: rrw\n"))
	f.Add([]byte("scheduler:\n  score:\n    enable_scorers: [binpack_score, real_time_weighted_average]\n    resource_weights: {req_cpu: 1, metric_update: 0.5}\n    plugin_conf:\n      binpack_score: {weight: 2}\n      real_time_weighted_average: {weight: 1, enable_weight_factors: [req_cpu, metric_update]}\n"))
	f.Add([]byte("a: &x {b: *x}\nscheduler: *x\n"))
	f.Add([]byte("scheduler:\n  <<: {priority_select_num: 2}\n  filter: {enable_filters: [disk]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := Load("fuzz.yaml", data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v (%T) is not a *ConfigError with problems", err, err)
			}
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("accepted an invalid configuration: %v", verr)
		}
		out, err := cfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		again, warns, err := Load("again.yaml", out)
		if err != nil || len(warns) != 0 {
			t.Fatalf("the effective configuration does not load back: %v %v\n%s", err, warns, out)
		}
		if !reflect.DeepEqual(normal(cfg), normal(again)) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v", cfg, again)
		}
	})
}

// normal maps empty slices and maps to nil, which YAML does not tell apart.
func normal(c Config) Config {
	if len(c.Filter.EnableFilters) == 0 {
		c.Filter.EnableFilters = nil
	}
	if len(c.Score.ResourceWeights) == 0 {
		c.Score.ResourceWeights = nil
	}
	pc := map[string]PluginConf{}
	for k, v := range c.Score.PluginConf {
		if len(v.EnableWeightFactors) == 0 {
			v.EnableWeightFactors = nil
		}
		pc[k] = v
	}
	c.Score.PluginConf = pc
	return c
}
