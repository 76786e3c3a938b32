package scheduler

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// MaxConfigBytes bounds a configuration file (1 MiB); a larger one is refused unread.
const MaxConfigBytes = 1 << 20

// Problem is one thing wrong with a configuration file: the key path
// (`scheduler.score.plugin_conf.real_time_weighted_average.weight`), its line in the file (0
// when the problem is a key the file does not hold), and what is wrong and how to fix it.
type Problem struct {
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// String formats p as `scheduler.x: line 12: message`, the order `scheduler check` prints.
func (p Problem) String() string {
	s := p.Message
	if p.Line > 0 {
		s = fmt.Sprintf("line %d: %s", p.Line, s)
	}
	if p.Path != "" {
		s = p.Path + ": " + s
	}
	return s
}

// Warning is something a file holds that loads but does not do what it says upstream: a key
// not implemented, an upstream scorer left out, a missing score block. Same shape as Problem.
type Warning = Problem

// ConfigError is every problem of a configuration file, in file order. [Load] returns it (as
// error) when the file is invalid; nothing of such a file is used.
type ConfigError struct {
	File     string
	Problems []Problem
}

// Error lists every problem on one line: `FILE: scheduler.x: line 3: ...; scheduler.y: line 9: ...`.
func (e *ConfigError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	prefix := "scheduler configuration"
	if e.File != "" {
		prefix = e.File
	}
	return prefix + ": " + strings.Join(parts, "; ")
}

func (e *ConfigError) add(p Problem) { e.Problems = append(e.Problems, p) }

func (e *ConfigError) orNil() error {
	if len(e.Problems) == 0 {
		return nil
	}
	// File order; a problem without a line (a key the file lacks) comes last.
	key := func(p Problem) int {
		if p.Line == 0 {
			return math.MaxInt
		}
		return p.Line
	}
	slices.SortStableFunc(e.Problems, func(a, b Problem) int { return cmp.Compare(key(a), key(b)) })
	return e
}

// LoadFile reads and loads the configuration file at path (see [Load]). A file it cannot read
// (missing, a directory, not permitted), or one larger than MaxConfigBytes, is an error
// `scheduler configuration FILE: reason` (the reason wraps the fs error, so errors.Is(err,
// fs.ErrNotExist) holds for a missing file).
func LoadFile(path string) (Config, []Warning, error) {
	readErr := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named once, in front
		}
		return fmt.Errorf("scheduler configuration %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return Config{}, nil, readErr(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return Config{}, nil, readErr(err)
	}
	return Load(path, data)
}

// Load parses a cubemaster.yaml-shaped document (name labels the messages) and returns its
// `scheduler:` section as an effective Config with every default filled in, and the warnings
// to show. Other top-level sections are ignored. An invalid file returns a *ConfigError naming
// every problem with its key path and line, one problem per mistake (unknown keys, scorers or
// factors, a missing plugin_conf block, negative weights, wrong types); it never panics. A file
// that says nothing about the scheduler is invalid too: an empty one, one without a
// `scheduler:` section (a near miss such as `Scheduler:` is named), one of several YAML
// documents; so a reload of such a file keeps the configuration in force. A `scheduler:`
// section without keys means every default. A file without a `score` block (and no `profile`)
// loads with a warning and uses balanced_spread's scoring, where CubeMaster would place
// first-fit.
func Load(name string, data []byte) (Config, []Warning, error) {
	l := &loader{err: ConfigError{File: name}, lines: map[string]int{}, bad: map[string]bool{}}
	if len(data) > MaxConfigBytes {
		l.fail("", 0, "the file is larger than %d bytes", MaxConfigBytes)
		return Config{}, nil, l.err.orNil()
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.fail("", 0, "the file is empty: give a scheduler: section (docs/scheduler.md); an empty section, scheduler: alone, means every default")
		} else {
			l.yamlError(err)
		}
		return Config{}, nil, l.err.orNil()
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		l.fail("", next.Line, "a second YAML document starts here: the file must hold one document, with one scheduler: section")
		return Config{}, nil, l.err.orNil()
	} else if !errors.Is(err, io.EOF) {
		l.yamlError(err)
		return Config{}, nil, l.err.orNil()
	}
	cfg := l.document(&doc)
	if err := l.err.orNil(); err != nil {
		return Config{}, nil, err
	}
	return cfg, l.warns, nil
}

// yamlError reports a YAML syntax error at its line.
func (l *loader) yamlError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if n, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(n, "line ") {
		line, _ = strconv.Atoi(strings.TrimPrefix(n, "line "))
		msg = rest
	}
	l.fail("", line, "not valid YAML: %s", msg)
}

type loader struct {
	err   ConfigError
	warns []Warning
	lines map[string]int  // key path -> line, for the semantic checks
	bad   map[string]bool // key paths with a problem reported: no second problem for the same mistake
	set   fileKeys
}

func (l *loader) fail(path string, line int, format string, args ...any) {
	l.err.add(Problem{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
	if path != "" {
		l.bad[path] = true
	}
}

func (l *loader) warn(path string, line int, format string, args ...any) {
	l.warns = append(l.warns, Warning{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

// resolve follows an alias.
func resolve(n *yaml.Node) *yaml.Node {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode && depth < 16; depth++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// mapping returns the key/value pairs of n, or reports that n is not a mapping. Duplicate keys
// are a problem.
func (l *loader) mapping(path string, n *yaml.Node) ([][2]*yaml.Node, bool) {
	return l.merged(path, n, 0)
}

// maxMergeDepth bounds chains of merge keys (`<<: *base` in a base that merges another).
const maxMergeDepth = 8

func (l *loader) merged(path string, n *yaml.Node, depth int) ([][2]*yaml.Node, bool) {
	n = resolve(n)
	if n == nil || isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		l.fail(path, n.Line, "must be a mapping of keys, not %s", describe(n))
		return nil, false
	}
	seen := map[string]int{}
	var pairs [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			l.fail(path, n.Content[i].Line, "keys must be plain names")
			continue
		}
		if k.Value == "<<" { // a merge key: its mapping's pairs come first, then ours override
			if depth >= maxMergeDepth {
				l.fail(path, k.Line, "merge keys (<<) nested more than %d deep, or merging into themselves", maxMergeDepth)
				continue
			}
			sub, _ := l.merged(path, v, depth+1)
			pairs = append(pairs, sub...)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			l.fail(join(path, k.Value), k.Line, "set twice (first on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		pairs = append(pairs, [2]*yaml.Node{k, v})
	}
	// Merged keys are overridden by the mapping's own ones.
	out := pairs[:0]
	for i, p := range pairs {
		if j := slices.IndexFunc(pairs[i+1:], func(q [2]*yaml.Node) bool { return q[0].Value == p[0].Value }); j >= 0 {
			continue
		}
		out = append(out, p)
	}
	return out, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!str":
		return fmt.Sprintf("the string %q", n.Value)
	case "!!null":
		return "empty"
	}
	return fmt.Sprintf("%q (%s)", n.Value, strings.TrimPrefix(n.Tag, "!!"))
}

func (l *loader) document(doc *yaml.Node) Config {
	var cfg Config
	if len(doc.Content) == 0 {
		l.fail("", 0, "the file is empty: give a scheduler: section (docs/scheduler.md)")
		return cfg
	}
	top, ok := l.mapping("", doc.Content[0])
	if !ok {
		return cfg
	}
	var sched *yaml.Node
	var keys []string
	for _, p := range top {
		if p[0].Value == "scheduler" {
			sched = p[1]
			l.lines["scheduler"] = p[0].Line
		}
		keys = append(keys, p[0].Value)
	}
	if sched == nil {
		for _, p := range top {
			if nearMiss(p[0].Value, "scheduler") {
				l.fail(p[0].Value, p[0].Line, "unknown top-level key %q: did you mean scheduler? Only the scheduler: section is read", p[0].Value)
				return cfg
			}
		}
		if len(keys) == 0 {
			l.fail("", doc.Content[0].Line, "the file is empty: give a scheduler: section (docs/scheduler.md)")
			return cfg
		}
		l.fail("scheduler", 0, "the file has no scheduler: section (its top-level keys are %s): nothing here configures the scheduler; an empty section, scheduler: alone, means every default", strings.Join(keys, ", "))
		return cfg
	}
	l.scheduler(&cfg, sched)
	return cfg
}

// nearMiss reports whether key looks like a misspelling of want: the same letters in another
// case, or at most two letters added, dropped or changed.
func nearMiss(key, want string) bool {
	if strings.EqualFold(key, want) {
		return true
	}
	a, b := []rune(strings.ToLower(key)), []rune(want)
	if d := len(a) - len(b); d > 2 || d < -2 {
		return false
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)] <= 2
}

// schedulerKeys are the implemented `scheduler:` keys, for the unknown-key message.
var schedulerKeys = []string{"profile", "priority_select_num", "least_select_name", "pre_select_num", "metric_update_timeout",
	"node_max_mvm_num", "node_max_mvm_num_reserve_num_percent", "node_max_cpu_util", "node_max_mem_reserved_in_mb",
	"disk_usage_max_percent", "filter", "score"}

func (l *loader) scheduler(cfg *Config, n *yaml.Node) {
	pairs, ok := l.mapping("scheduler", n)
	if !ok {
		return
	}
	var ignored []string
	var scoreNode *yaml.Node
	for _, p := range pairs {
		key, v := p[0].Value, p[1]
		path := "scheduler." + key
		l.lines[path] = p[0].Line
		switch key {
		case "profile":
			cfg.Profile = l.str(path, v)
		case "priority_select_num":
			cfg.PrioritySelectNum, l.set.prioritySelectNum = int(l.int(path, v)), true
		case "least_select_name":
			cfg.LeastSelectName, l.set.leastSelectName = l.str(path, v), true
		case "pre_select_num":
			cfg.PreSelectNum, l.set.preSelectNum = int(l.int(path, v)), true
		case "metric_update_timeout":
			cfg.MetricUpdateTimeout, l.set.metricUpdateTimeout = l.duration(path, v), true
		case "node_max_mvm_num":
			cfg.NodeMaxMvmNum, l.set.nodeMaxMvmNum = l.int(path, v), true
		case "node_max_mvm_num_reserve_num_percent":
			cfg.NodeMaxMvmNumReserveNumPercent, l.set.mvmReservePercent = l.float(path, v), true
		case "node_max_cpu_util":
			cfg.NodeMaxCPUUtil, l.set.nodeMaxCPUUtil = l.float(path, v), true
		case "node_max_mem_reserved_in_mb":
			cfg.NodeMaxMemReservedInMB, l.set.nodeMaxMemReserved = l.int(path, v), true
		case "disk_usage_max_percent":
			cfg.DiskUsageMaxPercent, l.set.diskUsageMaxPercent = l.float(path, v), true
		case "filter":
			l.filter(cfg, path, v)
		case "score":
			scoreNode = v
		default:
			if slices.Contains(upstreamKeys, key) {
				ignored = append(ignored, key)
				continue
			}
			l.fail(path, p[0].Line, "unknown key %q: the scheduler keys are %s", key, strings.Join(schedulerKeys, ", "))
		}
	}
	if len(ignored) > 0 {
		l.warn("scheduler", l.lines["scheduler"], "CubeMaster keys not implemented here, ignored: %s (docs/scheduler.md says why)", strings.Join(ignored, ", "))
	}
	if scoreNode != nil && !isNull(resolve(scoreNode)) {
		l.score(cfg, "scheduler.score", scoreNode)
	} else if cfg.Profile == "" {
		l.warn("scheduler.score", l.lines["scheduler"], "no score block: CubeMaster would place first-fit here (every sandbox on the first eligible node, CubeSandbox #573); using the recommended scoring of profile balanced_spread instead")
	}
	cfg.fill(l.set)
	cfg.check(&l.err, l.lines, l.bad)
	if ps := cfg.PreSelectNum; ps > 0 && !l.bad["scheduler.pre_select_num"] && !l.bad["scheduler.priority_select_num"] &&
		(cfg.PrioritySelectNum == -1 || cfg.PrioritySelectNum > ps) {
		path := "scheduler.priority_select_num"
		if !l.set.prioritySelectNum {
			path = "scheduler.pre_select_num"
		}
		n := strconv.Itoa(cfg.PrioritySelectNum)
		if cfg.PrioritySelectNum == -1 {
			n = "-1 (every feasible node)"
		}
		l.warn(path, l.lines[path], "priority_select_num %s is more than pre_select_num %d: a decision looks at %d candidates at most, so it picks among at most %d", n, ps, ps, ps)
	}
}

func (l *loader) filter(cfg *Config, path string, n *yaml.Node) {
	pairs, ok := l.mapping(path, n)
	if !ok {
		return
	}
	for _, p := range pairs {
		key := path + "." + p[0].Value
		l.lines[key] = p[0].Line
		if p[0].Value != "enable_filters" {
			l.fail(key, p[0].Line, "unknown key %q: filter holds enable_filters", p[0].Value)
			continue
		}
		l.set.filter = true
		cfg.Filter.EnableFilters = []string{}
		for i, name := range l.strs(key, p[1]) {
			if name == filterThirdPartyUpstream {
				l.warn(fmt.Sprintf("%s[%d]", key, i), p[0].Line, "filter %q is a no-op upstream and is not implemented here: left out", name)
				continue
			}
			l.lines[fmt.Sprintf("%s[%d]", key, len(cfg.Filter.EnableFilters))] = p[0].Line
			cfg.Filter.EnableFilters = append(cfg.Filter.EnableFilters, name)
		}
	}
}

func (l *loader) score(cfg *Config, path string, n *yaml.Node) {
	pairs, ok := l.mapping(path, n)
	if !ok {
		return
	}
	l.set.score = true
	s := ScoreConfig{ResourceWeights: map[string]float64{}, PluginConf: map[string]PluginConf{}}
	weighted := false // resource_weights given: else the recommended weights
	var skipped []string
	for _, p := range pairs {
		key := path + "." + p[0].Value
		l.lines[key] = p[0].Line
		switch p[0].Value {
		case "enable_scorers":
			for _, name := range l.strs(key, p[1]) {
				if slices.Contains(upstreamScorers, name) {
					skipped = append(skipped, name)
					continue
				}
				l.lines[fmt.Sprintf("%s[%d]", key, len(s.EnableScorers))] = p[0].Line
				s.EnableScorers = append(s.EnableScorers, name)
			}
		case "resource_weights":
			weighted = true
			wp, _ := l.mapping(key, p[1])
			for _, w := range wp {
				wk := key + "." + w[0].Value
				l.lines[wk] = w[0].Line
				s.ResourceWeights[w[0].Value] = l.float(wk, w[1])
			}
		case "plugin_conf":
			pp, _ := l.mapping(key, p[1])
			for _, sp := range pp {
				if slices.Contains(upstreamScorers, sp[0].Value) {
					continue
				}
				pk := key + "." + sp[0].Value
				l.lines[pk] = sp[0].Line
				s.PluginConf[sp[0].Value] = l.plugin(sp[0].Value, pk, sp[1])
			}
		case "score_interval":
			l.warn(key, p[0].Line, scoreIntervalUnused)
		default:
			l.fail(key, p[0].Line, "unknown key %q: score holds enable_scorers, resource_weights and plugin_conf", p[0].Value)
		}
	}
	if len(skipped) > 0 {
		l.warn(path+".enable_scorers", l.lines[path+".enable_scorers"], "CubeMaster scorers not implemented here, left out: %s", strings.Join(skipped, ", "))
	}
	if !weighted {
		s.ResourceWeights = maps.Clone(recommendedWeights)
	}
	for _, name := range s.EnableScorers {
		pc, ok := s.PluginConf[name]
		if !ok || pc.Disable {
			continue
		}
		for _, f := range pc.EnableWeightFactors {
			if _, has := s.ResourceWeights[f]; !has && slices.Contains(Factors, f) {
				what := "resource_weights"
				if !weighted {
					what = "the default resource_weights (" + weightList(recommendedWeights) + ")"
				}
				l.warn(path+".resource_weights", l.lines[path+".plugin_conf."+name], "factor %q of %s has no weight in %s: it counts 0", f, name, what)
			}
		}
	}
	l.unusedScoreSettings(path, s, weighted)
	cfg.Score = s
}

// unusedScoreSettings warns about score settings that change nothing: a plugin_conf block of a
// scorer that enable_scorers does not list, a listed scorer turned off with disable: true, and
// a factor weighed in resource_weights that no running scorer averages.
func (l *loader) unusedScoreSettings(path string, s ScoreConfig, weighted bool) {
	used := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(s.PluginConf)) {
		pc, pk := s.PluginConf[name], path+".plugin_conf."+name
		if !slices.Contains(Scorers, name) || l.bad[pk] {
			continue // an error already
		}
		switch {
		case !slices.Contains(s.EnableScorers, name):
			l.warn(pk, l.lines[pk], "scorer %s has a plugin_conf block but is not in enable_scorers: its settings are not used (list it in enable_scorers to use them)", name)
		case pc.Disable:
			l.warn(pk+".disable", l.lines[pk], "scorer %s is in enable_scorers but disable: true turns it off: its weight and factors are not used", name)
		default:
			for _, f := range pc.EnableWeightFactors {
				used[f] = true
			}
		}
	}
	if !weighted {
		return
	}
	for _, f := range slices.Sorted(maps.Keys(s.ResourceWeights)) {
		wk := path + ".resource_weights." + f
		if w := s.ResourceWeights[f]; w > 0 && !used[f] && slices.Contains(Factors, f) && !l.bad[wk] {
			l.warn(wk, l.lines[wk], "factor %s weighs %g but no running scorer lists it in enable_weight_factors: the weight is not used", f, w)
		}
	}
}

// plugin reads scorer's plugin_conf block at path. A weighted-average scorer without
// enable_weight_factors averages the recommended factors.
func (l *loader) plugin(scorer, path string, n *yaml.Node) PluginConf {
	pc := PluginConf{Weight: 1}
	pairs, _ := l.mapping(path, n)
	for _, p := range pairs {
		key := path + "." + p[0].Value
		l.lines[key] = p[0].Line
		switch p[0].Value {
		case "weight":
			pc.Weight = l.float(key, p[1])
		case "enable_weight_factors":
			pc.EnableWeightFactors = l.strs(key, p[1])
			if pc.EnableWeightFactors == nil {
				pc.EnableWeightFactors = []string{}
			}
			for i := range pc.EnableWeightFactors {
				l.lines[fmt.Sprintf("%s[%d]", key, i)] = p[0].Line
			}
		case "disable":
			pc.Disable = l.bool(key, p[1])
		case "score_interval":
			l.warn(key, p[0].Line, scoreIntervalUnused)
		default:
			l.fail(key, p[0].Line, "unknown key %q: a plugin_conf block holds weight, enable_weight_factors and disable", p[0].Value)
		}
	}
	if pc.EnableWeightFactors == nil && (scorer == ScorerRealTimeWeightedAverage || scorer == ScorerMultiFactorWeightedAverage) {
		pc.EnableWeightFactors = slices.Clone(recommendedFactors)
	}
	return pc
}

// scalar returns n as a scalar with one of tags, or reports want.
func (l *loader) scalar(path string, n *yaml.Node, want string, tags ...string) (*yaml.Node, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || !slices.Contains(tags, n.Tag) {
		line := 0
		got := "nothing"
		if n != nil {
			line, got = n.Line, describe(n)
		}
		l.fail(path, line, "must be %s, not %s", want, got)
		return nil, false
	}
	return n, true
}

func (l *loader) str(path string, n *yaml.Node) string {
	if s, ok := l.scalar(path, n, "a name", "!!str"); ok {
		return s.Value
	}
	return ""
}

func (l *loader) strs(path string, n *yaml.Node) []string {
	n = resolve(n)
	if n != nil && isNull(n) {
		return nil
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		line := 0
		if n != nil {
			line = n.Line
		}
		l.fail(path, line, "must be a list of names")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		out = append(out, l.str(fmt.Sprintf("%s[%d]", path, i), item))
	}
	return out
}

// wholeNumber is a YAML scalar of decimal digits only, with an optional sign.
var wholeNumber = regexp.MustCompile(`^[-+]?[0-9]+$`)

func (l *loader) int(path string, n *yaml.Node) int64 {
	if r := resolve(n); r != nil && r.Kind == yaml.ScalarNode && r.Tag == "!!float" && wholeNumber.MatchString(r.Value) {
		// YAML reads a whole number too large for 64 bits as a float.
		l.fail(path, r.Line, "out of range: %s does not fit in 64 bits", r.Value)
		return 0
	}
	s, ok := l.scalar(path, n, "a whole number", "!!int")
	if !ok {
		return 0
	}
	var v int64
	if err := s.Decode(&v); err != nil {
		l.fail(path, s.Line, "must be a whole number that fits in 64 bits, not %q", s.Value)
	}
	return v
}

func (l *loader) float(path string, n *yaml.Node) float64 {
	s, ok := l.scalar(path, n, "a number", "!!int", "!!float")
	if !ok {
		return 0
	}
	var v float64
	if err := s.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		l.fail(path, s.Line, "must be a finite number, not %q", s.Value)
		return 0
	}
	return v
}

func (l *loader) bool(path string, n *yaml.Node) bool {
	s, ok := l.scalar(path, n, "true or false", "!!bool")
	if !ok {
		return false
	}
	var v bool
	_ = s.Decode(&v)
	return v
}

func (l *loader) duration(path string, n *yaml.Node) Duration {
	s, ok := l.scalar(path, n, "a duration such as 300s or 5m", "!!str", "!!int", "!!float")
	if !ok {
		return 0
	}
	if s.Tag != "!!str" {
		l.fail(path, s.Line, "must be a duration with its unit, such as %ss or 5m, not the bare number %s", s.Value, s.Value)
		return 0
	}
	d, err := time.ParseDuration(s.Value)
	if err != nil {
		l.fail(path, s.Line, "must be a duration such as 300s or 5m, not %q", s.Value)
		return 0
	}
	return Duration(d)
}

// ReloadFile loads the configuration file at path and puts it in force (SIGHUP). An invalid or
// unreadable file changes nothing: the configuration in force stays, the failure is kept in
// [Scheduler.ConfigSource] and counted (cubefleet_scheduler_config_reloads_total{result="failed"}),
// and the error (naming every problem) is returned for the caller to log once.
func (s *Scheduler) ReloadFile(path string) ([]Warning, error) {
	cfg, warns, err := LoadFile(path)
	if err == nil {
		err = s.SetConfig(cfg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.source.ReloadFailedAt, s.source.ReloadError = s.now(), err.Error()
		s.metrics.reloaded(false)
		return nil, err
	}
	s.source = ConfigSource{File: path, LoadedAt: s.now()}
	s.metrics.reloaded(true)
	return warns, nil
}
