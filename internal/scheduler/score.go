package scheduler

import (
	"math"
	"slices"
	"time"
)

// factor indexes the factors in a compiled plan. The binpack utilisation terms are factors too,
// so every scorer compiles to one linear blend: score = Σ coef[f]·s_f.
type factor int

const (
	fMvmNum factor = iota
	fCreates
	fQuotaCPU
	fQuotaMem
	fCPUUtil
	fMemUsage
	fCPULoad
	fDataDisk
	fStorageDisk
	fSysDisk
	fCreateLimit
	fUtilCPU // binpack: CPU in use / quota
	fUtilMem // binpack: memory in use / quota
	fUtilMvm // binpack: microVMs in use / limit
	// Factors that depend on the request or the clock: computed per decision.
	fMetricUpdate
	fMetricLocal
	fReqCPU
	fReqMem
	fTemplate
	numFactors
)

// numStatic is the number of factors that depend only on the node: they are summed into its
// cached base score whenever the node changes.
const numStatic = fMetricUpdate

// factorIndex maps each factor name to its index. local_create_num and realtime_create_num
// are one count here (every create in flight passes the one placement lane).
var factorIndex = map[string]factor{
	FactorMvmNum: fMvmNum, FactorLocalCreateNum: fCreates, FactorRealtimeCreateNum: fCreates,
	FactorQuotaCPUUsage: fQuotaCPU, FactorQuotaMemUsage: fQuotaMem, FactorCPUUtil: fCPUUtil,
	FactorMemUsage: fMemUsage, FactorCPULoad: fCPULoad, FactorDataDiskUsage: fDataDisk,
	FactorStorageDiskUsage: fStorageDisk, FactorSysDiskUsage: fSysDisk, FactorCreateConcurrentLim: fCreateLimit,
	FactorMetricUpdate: fMetricUpdate, FactorMetricLocalUpdateAt: fMetricLocal, FactorReqCPU: fReqCPU,
	FactorReqMem: fReqMem, FactorTemplateLocality: fTemplate,
}

// plan is a Config compiled for the decision loop.
type plan struct {
	cfg  Config
	coef [numFactors]float64 // Σ over scorers of (scorer weight / Σ weights) · (w(f) / Σ_{k∈E} w(k))
	// dynamic is true when a per-decision factor other than template_locality has a
	// coefficient (template_locality is added in the scan itself: tplCoef).
	dynamic bool
	tplCoef float64
	// dynUpper is the sum of the per-decision factors' coefficients: the most they can add.
	dynUpper                                                  float64
	cpuFilter, memFilter, diskFilter, tplFilter, createFilter bool
	window                                                    time.Duration
}

// compile turns a valid Config into its plan.
func compile(c Config) plan {
	p := plan{cfg: c, window: time.Duration(c.MetricUpdateTimeout)}
	for _, f := range c.Filter.EnableFilters {
		switch f {
		case FilterCPU:
			p.cpuFilter = true
		case FilterMem:
			p.memFilter = true
		case FilterDisk:
			p.diskFilter = true
		case FilterTemplateLocality:
			p.tplFilter = true
		case FilterRealtimeCreateNum:
			p.createFilter = true
		}
	}
	var total float64
	for _, name := range c.Score.EnableScorers {
		if pc := c.Score.PluginConf[name]; !pc.Disable {
			total += pc.Weight
		}
	}
	for _, name := range c.Score.EnableScorers {
		pc := c.Score.PluginConf[name]
		if pc.Disable || total == 0 {
			continue
		}
		share := pc.Weight / total
		if name == ScorerBinpack {
			for _, f := range []factor{fUtilCPU, fUtilMem, fUtilMvm} {
				p.coef[f] += share / 3
			}
			continue
		}
		var sum float64
		for _, f := range pc.EnableWeightFactors {
			sum += c.Score.ResourceWeights[f]
		}
		if sum == 0 {
			continue
		}
		for _, f := range pc.EnableWeightFactors {
			p.coef[factorIndex[f]] += share * c.Score.ResourceWeights[f] / sum
		}
	}
	p.tplCoef = p.coef[fTemplate]
	for _, c := range p.coef[numStatic:] {
		p.dynUpper += c
	}
	p.dynamic = slices.ContainsFunc(p.coef[numStatic:fTemplate], func(v float64) bool { return v != 0 })
	return p
}

// clamp01 bounds v to [0,1] (NaN becomes 0).
func clamp01(v float64) float64 {
	switch {
	case v > 1:
		return 1
	case v >= 0:
		return v
	}
	return 0
}

// frac returns used/total in [0,1]; a total of 0 or less counts as full.
func frac(used, total int64) float64 {
	if total <= 0 {
		return 1
	}
	return clamp01(float64(used) / float64(total))
}

// staticFactors computes the request- and clock-independent factors of a node.
func (s *Scheduler) staticFactors(in *nodeInfo, out *[numStatic]float64) {
	st := &in.st
	cpuUsed := st.AllocatedCPU + in.resCPU
	memUsed := st.AllocatedMemMiB + in.resMem
	mvmUsed := st.MvmNum + in.resMvm
	out[fMvmNum] = 1 - frac(mvmUsed, in.mvmLimit)
	out[fCreates] = 1 - frac(int64(in.inflight), in.createLimit)
	out[fQuotaCPU] = 1 - frac(cpuUsed, st.QuotaCPU)
	out[fQuotaMem] = 1 - frac(memUsed, st.QuotaMemMiB)
	out[fCPUUtil] = 1 - clamp01(st.CPUUtil/100)
	out[fMemUsage] = 1 - clamp01(float64(st.MemUsageMiB)/float64(max(in.memTotal, 1)))
	out[fCPULoad] = 1 - clamp01(st.CPULoad/math.Max(float64(st.QuotaCPU)/1000, 1e-9))
	out[fDataDisk] = 1 - clamp01(st.DataDiskUsage/100)
	out[fStorageDisk] = 1 - clamp01(st.StorageDiskUsage/100)
	out[fSysDisk] = 1 - clamp01(st.SysDiskUsage/100)
	out[fCreateLimit] = clamp01(float64(in.createLimit) / float64(max(s.maxCreateLimit, 1)))
	out[fUtilCPU] = frac(cpuUsed, st.QuotaCPU)
	out[fUtilMem] = frac(memUsed, st.QuotaMemMiB)
	out[fUtilMvm] = frac(mvmUsed, in.mvmLimit)
}

// baseScore is a node's score from its static factors.
func (s *Scheduler) baseScore(in *nodeInfo) float64 {
	var f [numStatic]float64
	s.staticFactors(in, &f)
	var sum float64
	for i, c := range s.plan.coef[:numStatic] {
		sum += c * f[i]
	}
	return sum
}

// dynamicScore adds the per-decision factors of a node: metric ages at now (Unix ms), the
// room left after the request (template_locality is added by the scan).
func (s *Scheduler) dynamicScore(in *nodeInfo, req *Request, now int64) float64 {
	c := &s.plan.coef
	var sum float64
	if c[fMetricUpdate] != 0 || c[fMetricLocal] != 0 {
		w := float64(in.window.Milliseconds())
		sum += c[fMetricUpdate] * (1 - clamp01(float64(now-in.st.MetricTime.UnixMilli())/w))
		sum += c[fMetricLocal] * (1 - clamp01(float64(now-in.st.MetricsReceivedAt.UnixMilli())/w))
	}
	if c[fReqCPU] != 0 {
		sum += c[fReqCPU] * (1 - frac(in.st.AllocatedCPU+in.resCPU+req.CPU, in.st.QuotaCPU))
	}
	if c[fReqMem] != 0 {
		sum += c[fReqMem] * (1 - frac(in.st.AllocatedMemMiB+in.resMem+req.MemoryMiB, in.st.QuotaMemMiB))
	}
	return sum
}
