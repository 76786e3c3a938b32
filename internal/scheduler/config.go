package scheduler

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the effective scheduler configuration: the `scheduler:` section of a
// cubemaster.yaml-shaped file (docs/scheduler.md, "Configuration") with every default filled
// in. Build it with [Load] or [Default]; a Config from either is valid (Validate returns nil).
// The yaml tags are the file's keys, so `cubefleet scheduler check` prints a Config as a file
// that loads to the same Config.
type Config struct {
	// Profile is the built-in profile the filter and score defaults come from:
	// ProfileBalancedSpread (default), ProfileTemplateLocalityFirst or ProfileBinpackUtilization.
	// Keys given in the file (filter, score, priority_select_num, least_select_name) override the
	// profile's.
	Profile string `yaml:"profile" json:"profile"`
	// PrioritySelectNum is N of the final pick among the N best-scored nodes; -1 means every
	// feasible node. Never 0.
	PrioritySelectNum int `yaml:"priority_select_num" json:"priority_select_num"`
	// LeastSelectName is how the pick among the top N is made: SelectRandom (uniform),
	// SelectSW (smooth weighted round robin), SelectRW (random weighted by score) or SelectRRW
	// (weighted round robin).
	LeastSelectName string `yaml:"least_select_name" json:"least_select_name"`
	// PreSelectNum caps how many candidate nodes a decision looks at (from a rotating start);
	// -1 (default) looks at every node of the pool. Any other value gives up the full scan.
	PreSelectNum int `yaml:"pre_select_num" json:"pre_select_num"`
	// MetricUpdateTimeout bounds the age of a node's metrics: a node is a candidate only while
	// its last metrics are no older than min(MetricUpdateTimeout, 2 of its report periods).
	MetricUpdateTimeout Duration `yaml:"metric_update_timeout" json:"metric_update_timeout"`
	// NodeMaxMvmNum is the microVM limit of a node that reports no max_mvm_num.
	NodeMaxMvmNum int64 `yaml:"node_max_mvm_num" json:"node_max_mvm_num"`
	// NodeMaxMvmNumReserveNumPercent scales the microVM limit: ceil(limit × percent), in (0,1].
	NodeMaxMvmNumReserveNumPercent float64 `yaml:"node_max_mvm_num_reserve_num_percent" json:"node_max_mvm_num_reserve_num_percent"`
	// NodeMaxCPUUtil is the cpu filter's threshold: a node whose reported CPU utilisation
	// (percent, 0-100) is at or above it is filtered out.
	NodeMaxCPUUtil float64 `yaml:"node_max_cpu_util" json:"node_max_cpu_util"`
	// NodeMaxMemReservedInMB is the mem filter's host reserve (MiB) kept free of sandboxes; a
	// reserve at or above a node's memory becomes ceil(10% of it) on that node.
	NodeMaxMemReservedInMB int64 `yaml:"node_max_mem_reserved_in_mb" json:"node_max_mem_reserved_in_mb"`
	// DiskUsageMaxPercent is the disk filter's threshold: a node with any of its data, storage
	// or system disk usage (percent) at or above it is filtered out.
	DiskUsageMaxPercent float64 `yaml:"disk_usage_max_percent" json:"disk_usage_max_percent"`
	// Filter lists the enabled filters.
	Filter FilterConfig `yaml:"filter" json:"filter"`
	// Score is the weighted scoring.
	Score ScoreConfig `yaml:"score" json:"score"`
}

// FilterConfig is `scheduler.filter`.
type FilterConfig struct {
	// EnableFilters names the filters that run, from Filters.
	EnableFilters []string `yaml:"enable_filters" json:"enable_filters"`
}

// ScoreConfig is `scheduler.score`.
type ScoreConfig struct {
	// EnableScorers names the scorers that run, from Scorers; each has a PluginConf entry.
	EnableScorers []string `yaml:"enable_scorers" json:"enable_scorers"`
	// ResourceWeights is each factor's weight (>= 0), by factor name (Factors).
	ResourceWeights map[string]float64 `yaml:"resource_weights" json:"resource_weights"`
	// PluginConf is each scorer's settings, by scorer name.
	PluginConf map[string]PluginConf `yaml:"plugin_conf" json:"plugin_conf"`
}

// PluginConf is `scheduler.score.plugin_conf.<scorer>`.
type PluginConf struct {
	// Weight is the scorer's share of the blend Σ weight·S / Σ weight (> 0; 1 when omitted).
	Weight float64 `yaml:"weight" json:"weight"`
	// EnableWeightFactors lists the factors of a weighted-average scorer (Factors).
	EnableWeightFactors []string `yaml:"enable_weight_factors,omitempty" json:"enable_weight_factors,omitempty"`
	// Disable turns the scorer off while keeping its settings.
	Disable bool `yaml:"disable,omitempty" json:"disable,omitempty"`
}

// Duration is a time.Duration written as Go's duration string ("300s", "1m30s") in the file.
type Duration time.Duration

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads a duration string ("300s").
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("a duration must be a string such as \"300s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Profiles (`scheduler.profile`).
const (
	// ProfileBalancedSpread spreads sandboxes over the least loaded nodes: the spec's
	// recommended multi-node scoring (mvm_num 2, local_create_num 3, quota_cpu_usage 1,
	// quota_mem_usage 1) and a random pick among the top 3. The default.
	ProfileBalancedSpread = "balanced_spread"
	// ProfileTemplateLocalityFirst prefers nodes that already hold the request's template
	// (a score, not a filter: a template held nowhere still places), then spreads.
	ProfileTemplateLocalityFirst = "template_locality_first"
	// ProfileBinpackUtilization fills the busiest feasible node first, so idle nodes stay
	// empty and can be drained and removed.
	ProfileBinpackUtilization = "binpack_utilization"
)

// Profiles lists the built-in profiles.
var Profiles = []string{ProfileBalancedSpread, ProfileTemplateLocalityFirst, ProfileBinpackUtilization}

// Selection kinds (`scheduler.least_select_name`).
const (
	SelectRandom = "random" // uniform over the top N (upstream's random: it ignores the scores)
	SelectSW     = "sw"     // smooth weighted round robin, weights = scores
	SelectRW     = "rw"     // random, probability proportional to score
	SelectRRW    = "rrw"    // weighted round robin (LVS), weights = scores
)

// Selections lists the selection kinds.
var Selections = []string{SelectRandom, SelectSW, SelectRW, SelectRRW}

// Filters (`scheduler.filter.enable_filters`). A node's quota room (CPU, memory, disk) and its
// microVM limit are checked whatever this list says: they are the reservation guarantee.
const (
	FilterCPU                = "cpu"                 // reported CPU utilisation below node_max_cpu_util
	FilterMem                = "mem"                 // node_max_mem_reserved_in_mb of host memory left free
	FilterDisk               = "disk"                // every disk usage below disk_usage_max_percent
	FilterTemplateLocality   = "template_locality"   // the node holds the request's template
	FilterRealtimeCreateNum  = "realtime_create_num" // fewer creates in flight than the node's limit
	filterThirdPartyUpstream = "thirtparty"          // upstream's no-op filter: accepted with a warning
)

// Filters lists the implemented filters.
var Filters = []string{FilterCPU, FilterMem, FilterDisk, FilterTemplateLocality, FilterRealtimeCreateNum}

// Scorers (`scheduler.score.enable_scorers`).
const (
	// ScorerRealTimeWeightedAverage is Σ w(k)·s_k / Σ w(k) over its enable_weight_factors.
	ScorerRealTimeWeightedAverage = "real_time_weighted_average"
	// ScorerMultiFactorWeightedAverage is the same average over its own factors (upstream
	// precomputes it every score_interval; here it is computed at decision time).
	ScorerMultiFactorWeightedAverage = "multi_factor_weighted_average"
	// ScorerBinpack is the node's current utilisation (the mean of its CPU, memory and microVM
	// fractions in use): the busiest feasible node scores highest.
	ScorerBinpack = "binpack_score"
)

// Scorers lists the implemented scorers.
var Scorers = []string{ScorerRealTimeWeightedAverage, ScorerMultiFactorWeightedAverage, ScorerBinpack}

// upstreamScorers are CubeMaster scorers this scheduler does not implement: a file that enables
// one loads with a warning naming it, and the scorer is left out.
var upstreamScorers = []string{"affinity_score", "image_score", "resource_fit_score", "create_concurrency_score",
	"template_local_pressure", "external_http_score"}

// upstreamKeys are the `scheduler:` keys of CubeMaster this scheduler does not implement: they
// load with one warning naming them, and are ignored.
var upstreamKeys = []string{"local_metric_update_timeout", "node_max_mvm_num_conf", "node_max_mem_reserved_conf",
	"disable_circuit_filter", "max_mvm_cpu", "max_mvm_memory", "overhead", "affinityconf", "large_size_affinity_conf",
	"node_affinity_selector_allowed_keys", "instance_type_conf", "disable_backoff_filter_instance_type",
	"thirtparty_filter_instance_type", "enable_run_instance_host_ips", "in_backoff_mode", "postscore",
	"ignore_redis_allocation", "overcommit_ratio", "overcommit_ratio_conf", "profiles", "profile_route_label_keys",
	"score_interval"}

// scoreIntervalUnused is the warning of score_interval wherever a file sets it (under
// `scheduler:`, `score:` or a scorer's plugin_conf): upstream precomputes scores every
// score_interval.
const scoreIntervalUnused = "score_interval is not used: scores are computed at decision time, never from a stale precomputation"

// Defaults (no file, or a key left out).
const (
	DefaultPrioritySelectNum   = 3
	DefaultPreSelectNum        = -1
	DefaultMetricUpdateTimeout = 300 * time.Second // the shipped cubemaster.yaml's (code default 1h)
	DefaultNodeMaxMvmNum       = 3000
	DefaultMvmReservePercent   = 1.0
	DefaultNodeMaxCPUUtil      = 80
	DefaultNodeMaxMemReserved  = 10240 // MiB
	DefaultDiskUsageMaxPercent = 80
	// DefaultCreateConcurrentLimit is a node's limit of creates in flight when it reports no
	// create_concurrent_num (upstream's cubelet_conf.create_concurrent_limit default).
	DefaultCreateConcurrentLimit = 100
)

// recommendedWeights is the spec's recommended multi-node scoring (docs/scheduler.md),
// its factors in the spec's order.
var (
	recommendedWeights = map[string]float64{FactorMvmNum: 2, FactorLocalCreateNum: 3, FactorQuotaCPUUsage: 1, FactorQuotaMemUsage: 1}
	recommendedFactors = []string{FactorMvmNum, FactorLocalCreateNum, FactorQuotaCPUUsage, FactorQuotaMemUsage}
)

// profile returns the filter and score blocks and pick defaults of a built-in profile.
func profile(name string) (filters []string, score ScoreConfig, n int) {
	all := []string{FilterCPU, FilterMem, FilterDisk, FilterTemplateLocality, FilterRealtimeCreateNum}
	spread := func(w map[string]float64, factors []string) ScoreConfig {
		return ScoreConfig{
			EnableScorers:   []string{ScorerRealTimeWeightedAverage},
			ResourceWeights: w,
			PluginConf: map[string]PluginConf{ScorerRealTimeWeightedAverage: {
				Weight: 1, EnableWeightFactors: factors,
			}},
		}
	}
	switch name {
	case ProfileTemplateLocalityFirst:
		w := maps.Clone(recommendedWeights)
		w[FactorTemplateLocality] = 8 // > the sum of the others: a holder always outranks a non-holder
		factors := append([]string{FactorTemplateLocality}, recommendedFactors...)
		return slices.DeleteFunc(all, func(f string) bool { return f == FilterTemplateLocality }), spread(w, factors), DefaultPrioritySelectNum
	case ProfileBinpackUtilization:
		return all, ScoreConfig{
			EnableScorers:   []string{ScorerBinpack},
			ResourceWeights: map[string]float64{},
			PluginConf:      map[string]PluginConf{ScorerBinpack: {Weight: 1}},
		}, 1
	}
	return all, spread(maps.Clone(recommendedWeights), slices.Clone(recommendedFactors)), DefaultPrioritySelectNum
}

// Default returns the configuration used without a file: profile balanced_spread, the spec's
// recommended multi-node scoring and priority_select_num 3.
func Default() Config {
	c := Config{Profile: ProfileBalancedSpread}
	c.fill(fileKeys{})
	return c
}

// fileKeys records which keys a file set, so the profile fills only the others.
type fileKeys struct {
	prioritySelectNum, leastSelectName, preSelectNum, metricUpdateTimeout, nodeMaxMvmNum,
	mvmReservePercent, nodeMaxCPUUtil, nodeMaxMemReserved, diskUsageMaxPercent, filter, score bool
}

// fill sets every key the file did not set from c.Profile and the defaults.
func (c *Config) fill(set fileKeys) {
	if c.Profile == "" {
		c.Profile = ProfileBalancedSpread
	}
	filters, score, n := profile(c.Profile)
	if !set.prioritySelectNum {
		c.PrioritySelectNum = n
	}
	if !set.leastSelectName {
		c.LeastSelectName = SelectRandom
	}
	if !set.preSelectNum {
		c.PreSelectNum = DefaultPreSelectNum
	}
	if !set.metricUpdateTimeout {
		c.MetricUpdateTimeout = Duration(DefaultMetricUpdateTimeout)
	}
	if !set.nodeMaxMvmNum {
		c.NodeMaxMvmNum = DefaultNodeMaxMvmNum
	}
	if !set.mvmReservePercent {
		c.NodeMaxMvmNumReserveNumPercent = DefaultMvmReservePercent
	}
	if !set.nodeMaxCPUUtil {
		c.NodeMaxCPUUtil = DefaultNodeMaxCPUUtil
	}
	if !set.nodeMaxMemReserved {
		c.NodeMaxMemReservedInMB = DefaultNodeMaxMemReserved
	}
	if !set.diskUsageMaxPercent {
		c.DiskUsageMaxPercent = DefaultDiskUsageMaxPercent
	}
	if !set.filter {
		c.Filter.EnableFilters = filters
	}
	if !set.score {
		c.Score = score
	}
}

// Validate checks a Config built in code (a loaded one is valid). It returns a *ConfigError
// naming every problem by key path, or nil.
func (c Config) Validate() error {
	var e ConfigError
	c.check(&e, nil, nil)
	return e.orNil()
}

// check appends c's problems to e. lines, when not nil, gives the line of a key path (a key the
// file lacks is told at the line of the nearest key above it that it holds); bad holds the
// paths the loader already reported, whose values (zero) are not checked again: one problem
// per mistake.
func (c Config) check(e *ConfigError, lines map[string]int, bad map[string]bool) {
	add := func(path, format string, args ...any) {
		if bad[path] {
			return
		}
		e.add(Problem{Path: path, Line: lineOf(lines, path), Message: fmt.Sprintf(format, args...)})
	}
	if !slices.Contains(Profiles, c.Profile) {
		add("scheduler.profile", "unknown profile %q: want one of %s", c.Profile, list(Profiles))
	}
	if c.PrioritySelectNum == 0 || c.PrioritySelectNum < -1 {
		add("scheduler.priority_select_num", "must be a positive number of nodes, or -1 for every feasible node (got %d)", c.PrioritySelectNum)
	}
	if !slices.Contains(Selections, c.LeastSelectName) {
		add("scheduler.least_select_name", "unknown selection %q: want one of %s", c.LeastSelectName, list(Selections))
	}
	if c.PreSelectNum == 0 || c.PreSelectNum < -1 {
		add("scheduler.pre_select_num", "must be a positive number of nodes, or -1 for every node (got %d)", c.PreSelectNum)
	}
	if c.MetricUpdateTimeout <= 0 {
		add("scheduler.metric_update_timeout", "must be a positive duration such as 300s")
	}
	if c.NodeMaxMvmNum <= 0 {
		add("scheduler.node_max_mvm_num", "must be a positive number of microVMs (got %d)", c.NodeMaxMvmNum)
	}
	if !(c.NodeMaxMvmNumReserveNumPercent > 0 && c.NodeMaxMvmNumReserveNumPercent <= 1) {
		add("scheduler.node_max_mvm_num_reserve_num_percent", "must be in (0, 1], a fraction of the microVM limit (got %g)", c.NodeMaxMvmNumReserveNumPercent)
	}
	if !(c.NodeMaxCPUUtil > 0 && c.NodeMaxCPUUtil <= 100) {
		add("scheduler.node_max_cpu_util", "must be a percentage in (0, 100] (got %g)", c.NodeMaxCPUUtil)
	}
	if c.NodeMaxMemReservedInMB < 0 {
		add("scheduler.node_max_mem_reserved_in_mb", "must be >= 0 MiB (got %d)", c.NodeMaxMemReservedInMB)
	}
	if !(c.DiskUsageMaxPercent > 0 && c.DiskUsageMaxPercent <= 100) {
		add("scheduler.disk_usage_max_percent", "must be a percentage in (0, 100] (got %g)", c.DiskUsageMaxPercent)
	}
	for i, f := range c.Filter.EnableFilters {
		if !slices.Contains(Filters, f) {
			add(fmt.Sprintf("scheduler.filter.enable_filters[%d]", i), "unknown filter %q: want one of %s", f, list(Filters))
		}
	}
	c.Score.check(add, lines, bad)
}

// lineOf returns the line of path in lines or, when the file does not hold that key, of the
// nearest enclosing key it holds (0 when none).
func lineOf(lines map[string]int, path string) int {
	for path != "" {
		if n := lines[path]; n > 0 {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// check reports the score block's problems through add; bad holds the paths already reported
// (a weight or a disable that did not load is not taken for 0 or false). Every plugin_conf
// block is checked, enabled or not; that the listed factors do not all weigh 0 only for the
// scorers that run.
func (s ScoreConfig) check(add func(path, format string, args ...any), lines map[string]int, bad map[string]bool) {
	for _, k := range slices.Sorted(maps.Keys(s.ResourceWeights)) {
		w := s.ResourceWeights[k]
		path := "scheduler.score.resource_weights." + k
		if !slices.Contains(Factors, k) {
			add(path, "unknown factor %q: want one of %s", k, list(Factors))
		} else if !(w >= 0) {
			add(path, "weight must be >= 0 (got %g)", w)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.PluginConf)) {
		base := "scheduler.score.plugin_conf." + name
		if !slices.Contains(Scorers, name) {
			add(base, "unknown scorer %q: want one of %s", name, list(Scorers))
			continue
		}
		pc := s.PluginConf[name]
		if pc.Weight < 0 || !(pc.Weight > 0) && !pc.Disable {
			add(base+".weight", "must be > 0 (got %g); to turn the scorer off, set disable: true", pc.Weight)
		}
		if name == ScorerBinpack {
			if len(pc.EnableWeightFactors) > 0 {
				add(base+".enable_weight_factors", "binpack_score takes no factors: it scores CPU, memory and microVM utilisation")
			}
			continue
		}
		if pc.EnableWeightFactors != nil && len(pc.EnableWeightFactors) == 0 {
			add(base+".enable_weight_factors", "must list at least one factor of %s (leave the key out for %s)", list(Factors), strings.Join(recommendedFactors, ", "))
		}
		for j, f := range pc.EnableWeightFactors {
			if !slices.Contains(Factors, f) {
				add(fmt.Sprintf("%s.enable_weight_factors[%d]", base, j), "unknown factor %q: want one of %s", f, list(Factors))
			}
		}
	}
	active, listed := 0, 0
	for i, name := range s.EnableScorers {
		path := fmt.Sprintf("scheduler.score.enable_scorers[%d]", i)
		if !slices.Contains(Scorers, name) {
			add(path, "unknown scorer %q: want one of %s", name, list(Scorers))
			continue
		}
		listed++
		pc, ok := s.PluginConf[name]
		base := "scheduler.score.plugin_conf." + name
		if !ok && bad["scheduler.score.plugin_conf"] { // the block did not load: that is the problem told
			active++
			continue
		}
		if !ok {
			if lines != nil && lines[base] == 0 {
				lines[base] = lines[path] // the problem is told at the scorer's line
			}
			add(base, "missing: enabled scorer %q needs its plugin_conf block (weight, enable_weight_factors)", name)
			continue
		}
		if bad[base+".disable"] { // whether it runs is the problem already told
			active++
			continue
		}
		if pc.Disable {
			continue
		}
		active++
		if name == ScorerBinpack || len(pc.EnableWeightFactors) == 0 {
			continue
		}
		var sum float64
		known := true
		for _, f := range pc.EnableWeightFactors {
			// a weight refused (negative, not a number) is that problem, not also "weight 0"
			known = known && slices.Contains(Factors, f) && !bad["scheduler.score.resource_weights."+f] && !(s.ResourceWeights[f] < 0) && !math.IsNaN(s.ResourceWeights[f])
			if w := s.ResourceWeights[f]; w > 0 {
				sum += w
			}
		}
		if sum == 0 && known {
			add(base+".enable_weight_factors", "every listed factor has weight 0 in scheduler.score.resource_weights: the scorer would rank nothing; give them weights")
		}
	}
	if active == 0 && listed == len(s.EnableScorers) && (listed == 0 || len(s.PluginConf) > 0) {
		add("scheduler.score.enable_scorers", "no scorer enabled: list at least one of %s (or leave score out to use the profile's)", list(Scorers))
	}
}

// weightList formats weights for a message: "mvm_num: 2, local_create_num: 3, ...", in the
// order of recommendedFactors, then the others sorted.
func weightList(w map[string]float64) string {
	var parts []string
	for _, f := range recommendedFactors {
		if v, ok := w[f]; ok {
			parts = append(parts, fmt.Sprintf("%s: %g", f, v))
		}
	}
	for _, f := range slices.Sorted(maps.Keys(w)) {
		if !slices.Contains(recommendedFactors, f) {
			parts = append(parts, fmt.Sprintf("%s: %g", f, w[f]))
		}
	}
	return strings.Join(parts, ", ")
}

// list formats names for a message: "a, b or c".
func list(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	s := ""
	for i, n := range names[:len(names)-1] {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s + " or " + names[len(names)-1]
}

// filled returns c with the profile's defaults in every key left zero (for configurations
// built in code: tests, simulate).
func (c Config) filled() Config {
	c.fill(fileKeys{
		prioritySelectNum: c.PrioritySelectNum != 0, leastSelectName: c.LeastSelectName != "",
		preSelectNum: c.PreSelectNum != 0, metricUpdateTimeout: c.MetricUpdateTimeout != 0,
		nodeMaxMvmNum: c.NodeMaxMvmNum != 0, mvmReservePercent: c.NodeMaxMvmNumReserveNumPercent != 0,
		nodeMaxCPUUtil: c.NodeMaxCPUUtil != 0, nodeMaxMemReserved: c.NodeMaxMemReservedInMB != 0,
		diskUsageMaxPercent: c.DiskUsageMaxPercent != 0, filter: c.Filter.EnableFilters != nil,
		score: c.Score.EnableScorers != nil,
	})
	return c
}

// YAML returns c as a `scheduler:` section of a cubemaster.yaml (two-space indents): the
// effective configuration `cubefleet scheduler check` prints, which loads back to c.
func (c Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(map[string]any{"scheduler": c}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
