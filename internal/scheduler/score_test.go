package scheduler

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/cubefleet/cubefleet/internal/testkit"
)

// upNode is the node as CubeMaster's scorer sees it (docs/nodes.md, "Internal nodes API",
// docs/scheduler.md, "Scoring"): usage without any reservation, LocalCreateNum counted per replica.
type upNode struct {
	QuotaCpu, QuotaMem, QuotaCpuUsage, QuotaMemUsage, MvmNum, MaxMvmLimit, MemMBTotal int64
	CreateConcurrentNum, RealTimeCreateNum, LocalCreateNum                            int64
	CpuUtil, MemUsage, CpuLoadUsage, CpuTotal, DataDisk, StorageDisk, SysDisk         float64
	MetricUpdate                                                                      time.Time
}

// upRatio is upstream's ratio: a ratio with base 0 is 0.
func upRatio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// upstreamFactor is CubeMaster's per-factor s_k (score/utils.go@eab78e1), on its own mixed
// scales; ok is false for a name its switch does not know (it still counts in the
// denominator).
func upstreamFactor(k string, n upNode, now time.Time, masters int64) (float64, bool) {
	switch k {
	case FactorMvmNum:
		return 100 - 100*upRatio(float64(n.MvmNum), float64(n.MaxMvmLimit)), true
	case FactorQuotaCPUUsage:
		if n.QuotaCpu <= 0 {
			return 0, true
		}
		return 100 - 100*upRatio(float64(n.QuotaCpuUsage), float64(n.QuotaCpu)), true
	case FactorQuotaMemUsage:
		return 100 - 100*upRatio(float64(n.QuotaMemUsage), float64(n.QuotaMem)), true
	case FactorCPUUtil:
		return 100 - n.CpuUtil, true
	case FactorMemUsage:
		return 100 - 100*upRatio(n.MemUsage, float64(n.MemMBTotal)), true
	case FactorCPULoad:
		return 100 - 100*upRatio(n.CpuLoadUsage, n.CpuTotal), true
	case FactorRealtimeCreateNum:
		return 100 - 100*upRatio(float64(n.RealTimeCreateNum), float64(n.CreateConcurrentNum)), true
	case FactorLocalCreateNum:
		if n.CreateConcurrentNum == 0 {
			return 100, true
		}
		return 100 - 100*upRatio(float64(n.LocalCreateNum*masters), float64(n.CreateConcurrentNum)), true
	case FactorDataDiskUsage:
		return 100 - n.DataDisk, true
	case FactorStorageDiskUsage:
		return 100 - n.StorageDisk, true
	case FactorSysDiskUsage:
		return 100 - n.SysDisk, true
	case FactorCreateConcurrentLim:
		return float64(n.CreateConcurrentNum), true // the raw number
	case FactorMetricUpdate, FactorMetricLocalUpdateAt: // both read MetricUpdate
		return float64(n.MetricUpdate.Unix()) / float64(now.Unix()), true
	}
	return 0, false
}

// upstreamRTWA is CubeMaster's real_time_weighted_average, exactly (docs/scheduler.md, "Scoring"):
// S = (Σ_{k∈E} w(k)·s_k + w(req_cpu)·(QuotaCpu−U_cpu−req)/QuotaCpu + w(req_mem)·(...)/QuotaMem) /
// Σ_{k∈E} w(k). The req_* terms are added whenever their weight exists; unknown names still add
// their weight to the denominator; a zero denominator returns no score.
func upstreamRTWA(E []string, w map[string]float64, n upNode, reqCPU, reqMem int64, now time.Time) (float64, bool) {
	var num, den float64
	for _, k := range E {
		den += w[k]
		if s, ok := upstreamFactor(k, n, now, 1); ok {
			num += w[k] * s
		}
	}
	if den == 0 {
		return 0, false
	}
	if wc, ok := w[FactorReqCPU]; ok {
		num += wc * upRatio(float64(n.QuotaCpu-n.QuotaCpuUsage-reqCPU), float64(n.QuotaCpu))
	}
	if wm, ok := w[FactorReqMem]; ok {
		num += wm * upRatio(float64(n.QuotaMem-n.QuotaMemUsage-reqMem), float64(n.QuotaMem))
	}
	return num / den, true
}

// sample is one node of the scoring tables: its reported state and the creates in flight.
type sample struct {
	name     string
	st       NodeState
	inflight int
}

func samples(c *clock) []sample {
	mk := func(name string, cpu, mem, mvm int64, util, load float64, memUse int64, disk float64, ccn int64, age time.Duration, inflight int, tpl bool) sample {
		st := node(c, name, 64000, 262144, 500)
		st.Pool = "pool_" + name
		st.AllocatedCPU, st.AllocatedMemMiB, st.MvmNum = cpu, mem, mvm
		st.CPUUtil, st.CPULoad, st.MemUsageMiB = util, load, memUse
		st.DataDiskUsage, st.StorageDiskUsage, st.SysDiskUsage = disk, disk/2, disk/4
		st.CreateConcurrentNum = ccn
		st.MetricTime = c.t.Add(-age)
		st.MetricsReceivedAt = c.t.Add(-age / 2)
		if tpl {
			st.Templates = []string{"tpl_a"}
		}
		return sample{name, st, inflight}
	}
	return []sample{
		mk("idle", 0, 0, 0, 5, 1, 2048, 10, 100, 100*time.Millisecond, 0, true),
		mk("half", 32000, 131072, 250, 40, 16, 120000, 50, 100, 500*time.Millisecond, 10, true),
		mk("busy", 56000, 229376, 440, 70, 40, 220000, 70, 50, 1500*time.Millisecond, 20, false),
	}
}

func (sm sample) upstream() upNode {
	st := sm.st
	return upNode{
		QuotaCpu: st.QuotaCPU, QuotaMem: st.QuotaMemMiB, QuotaCpuUsage: st.AllocatedCPU, QuotaMemUsage: st.AllocatedMemMiB,
		MvmNum: st.MvmNum, MaxMvmLimit: st.MaxMvmNum, MemMBTotal: st.QuotaMemMiB, CreateConcurrentNum: st.CreateConcurrentNum,
		LocalCreateNum: int64(sm.inflight), CpuUtil: st.CPUUtil, MemUsage: float64(st.MemUsageMiB),
		CpuLoadUsage: st.CPULoad, CpuTotal: float64(st.QuotaCPU) / 1000, DataDisk: st.DataDiskUsage,
		StorageDisk: st.StorageDiskUsage, SysDisk: st.SysDiskUsage, MetricUpdate: st.MetricTime,
	}
}

const (
	scoreReqCPU = 2000
	scoreReqMem = 4096
)

// ourScores places one request on each sample node alone in its pool under cfg and returns
// the score the real decision gave it. The creates in flight are zero-size reservations made
// first, so they count in local_create_num and take microVM slots, as real ones do.
func ourScores(t *testing.T, c *clock, cfg Config) map[string]float64 {
	t.Helper()
	cfg.Filter.EnableFilters = []string{}
	s := newScheduler(t, c, cfg)
	out := map[string]float64{}
	for _, sm := range samples(c) {
		s.Update(sm.st)
		for i := range sm.inflight {
			// decide itself: the API refuses a zero-size request, which these stand-ins are.
			s.mu.Lock()
			_, err := s.decide(&Request{SandboxID: fmt.Sprintf("%s-%d", sm.name, i), Pool: sm.st.Pool}, new(tally))
			s.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
		}
		d := mustDecide(t, s, Request{SandboxID: sm.name, Pool: sm.st.Pool, Template: "tpl_a", CPU: scoreReqCPU, MemoryMiB: scoreReqMem})
		out[sm.name] = d.Score
	}
	return out
}

func factorConfig(f string) Config {
	return Config{Profile: ProfileBalancedSpread, Score: ScoreConfig{
		EnableScorers:   []string{ScorerRealTimeWeightedAverage},
		ResourceWeights: map[string]float64{f: 1},
		PluginConf:      map[string]PluginConf{ScorerRealTimeWeightedAverage: {Weight: 1, EnableWeightFactors: []string{f}}},
	}}.filled()
}

// TestScoreTables writes testdata/scores.golden: every factor and every profile scored on
// three sample nodes by upstream's formula and by ours, side by side, then upstream's quirks.
func TestScoreTables(t *testing.T) {
	c := newClock()
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	nodes := samples(c)
	fmt.Fprintf(&b, "# Request: %d millicores, %d MiB, template tpl_a (idle and half hold it).\n", scoreReqCPU, scoreReqMem)
	fmt.Fprintf(&b, "# Upstream: CubeMaster real_time_weighted_average (0-100 mostly); ours: [0,1].\n\n")
	fmt.Fprintln(tw, "factor\tupstream idle\thalf\tbusy\tours idle\thalf\tbusy\t")
	for _, f := range Factors {
		ours := ourScores(t, c, factorConfig(f))
		row := f
		for _, sm := range nodes {
			// req_* in E: unknown to upstream's factor switch, added by its weight rule.
			up, ok := upstreamRTWA([]string{f}, map[string]float64{f: 1}, sm.upstream(), scoreReqCPU, scoreReqMem, c.t)
			row += "\t" + cell(up, ok)
		}
		for _, sm := range nodes {
			v := ours[sm.name]
			if v < 0 || v > 1 {
				t.Errorf("factor %s on %s scores %g, outside [0,1]", f, sm.name, v)
			}
			row += "\t" + cell(v, true)
		}
		fmt.Fprintln(tw, row+"\t")
	}
	tw.Flush()

	fmt.Fprintf(&b, "\n# Profiles: the whole score. Upstream runs the same blocks through its formula\n# (template_locality is unknown there; binpack_score is not in the spec's scorer).\n\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tupstream idle\thalf\tbusy\tours idle\thalf\tbusy\tours picks\t")
	for _, p := range Profiles {
		cfg := Config{Profile: p}.filled()
		ours := ourScores(t, c, cfg)
		row := p
		pc := cfg.Score.PluginConf[ScorerRealTimeWeightedAverage]
		for _, sm := range nodes {
			up, ok := upstreamRTWA(pc.EnableWeightFactors, cfg.Score.ResourceWeights, sm.upstream(), scoreReqCPU, scoreReqMem, c.t)
			if p == ProfileBinpackUtilization {
				ok = false
			}
			row += "\t" + cell(up, ok)
		}
		best := ""
		for _, sm := range nodes {
			row += "\t" + cell(ours[sm.name], true)
			if best == "" || ours[sm.name] > ours[best] {
				best = sm.name
			}
		}
		fmt.Fprintln(tw, row+"\t"+best+"\t")
	}
	tw.Flush()

	fmt.Fprintf(&b, "\n# Upstream quirks, fixed: each row's configuration scored both ways.\n\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "quirk\tupstream idle\thalf\tbusy\tours idle\thalf\tbusy\t")
	quirk := func(name string, E []string, w map[string]float64, cfg *Config) {
		row := name
		for _, sm := range nodes {
			up, ok := upstreamRTWA(E, w, sm.upstream(), scoreReqCPU, scoreReqMem, c.t)
			row += "\t" + cell(up, ok)
		}
		if cfg == nil {
			row += "\tload error\t\t"
		} else {
			ours := ourScores(t, c, *cfg)
			for _, sm := range nodes {
				row += "\t" + cell(ours[sm.name], true)
			}
		}
		fmt.Fprintln(tw, row+"\t")
	}
	rec := Default()
	recE := rec.Score.PluginConf[ScorerRealTimeWeightedAverage].EnableWeightFactors
	withReq := rec
	withReq.Score.ResourceWeights = map[string]float64{FactorMvmNum: 2, FactorLocalCreateNum: 3, FactorQuotaCPUUsage: 1, FactorQuotaMemUsage: 1, FactorReqCPU: 4}
	quirk("req_cpu weighted, not listed", recE, withReq.Score.ResourceWeights, &withReq)
	quirk("unknown name inflates denominator", append(slices.Clone(recE), "gpu_util"),
		map[string]float64{FactorMvmNum: 2, FactorLocalCreateNum: 3, FactorQuotaCPUUsage: 1, FactorQuotaMemUsage: 1, "gpu_util": 7}, nil)
	mixed := factorConfig(FactorMvmNum)
	mixed.Score.ResourceWeights = map[string]float64{FactorMvmNum: 1, FactorReqCPU: 1, FactorCreateConcurrentLim: 1}
	mixed.Score.PluginConf = map[string]PluginConf{ScorerRealTimeWeightedAverage: {Weight: 1, EnableWeightFactors: []string{FactorMvmNum, FactorReqCPU, FactorCreateConcurrentLim}}}
	quirk("mixed scales (0-100, 0-1, raw)", []string{FactorMvmNum, FactorReqCPU, FactorCreateConcurrentLim}, mixed.Score.ResourceWeights, &mixed)
	tw.Flush()
	testkit.Golden(t, "scores.golden", []byte(b.String()))
}

func cell(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.4f", v)
}

// TestScoreHandChecked pins a few entries of the tables by hand, so the golden file is not the
// only witness.
func TestScoreHandChecked(t *testing.T) {
	c := newClock()
	ours := ourScores(t, c, factorConfig(FactorMvmNum))
	// half: 250 reported + 10 in flight + this sandbox's own slot is not yet counted: 1 − 260/500.
	if want := 1 - 260.0/500; math.Abs(ours["half"]-want) > 1e-9 {
		t.Errorf("mvm_num on half: %g, want %g", ours["half"], want)
	}
	ours = ourScores(t, c, factorConfig(FactorLocalCreateNum))
	if want := 1 - 20.0/50; math.Abs(ours["busy"]-want) > 1e-9 {
		t.Errorf("local_create_num on busy: %g, want %g", ours["busy"], want)
	}
	ours = ourScores(t, c, factorConfig(FactorReqCPU))
	if want := 1 - (32000.0+2000)/64000; math.Abs(ours["half"]-want) > 1e-9 {
		t.Errorf("req_cpu on half: %g, want %g", ours["half"], want)
	}
	ours = ourScores(t, c, Default())
	if math.Abs(ours["idle"]-1) > 1e-9 {
		t.Errorf("recommended on an idle node: %g, want 1", ours["idle"])
	}
	// The metric factors read their own times: 100 ms and 50 ms old in a 2 s window.
	ours = ourScores(t, c, factorConfig(FactorMetricUpdate))
	if want := 1 - 0.1/2; math.Abs(ours["idle"]-want) > 1e-9 {
		t.Errorf("metric_update on idle: %g, want %g", ours["idle"], want)
	}
	ours = ourScores(t, c, factorConfig(FactorMetricLocalUpdateAt))
	if want := 1 - 0.05/2; math.Abs(ours["idle"]-want) > 1e-9 {
		t.Errorf("metric_local_update_at on idle: %g, want %g", ours["idle"], want)
	}
	if up, _ := upstreamRTWA([]string{"mvm_num"}, map[string]float64{"mvm_num": 1, "req_cpu": 1}, samples(c)[0].upstream(), 0, 0, c.t); up != 101 {
		t.Errorf("upstream's req_cpu quirk: %g, want 100 + 1", up)
	}
}
