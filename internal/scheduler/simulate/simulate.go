// Package simulate replays synthetic work against the real scheduler (package scheduler, not a
// copy): a fleet of nodes reporting every second with a lag, requests arriving as a workload,
// sandboxes starting and completing, and reservations released as the nodes' reports list the
// sandboxes. The report carries the placement-quality measures of CubeMaster's schedsim and
// E2B's placement benchmark (docs/scheduler.md, "Reading the simulate report"). The same
// options and seed give the same report, byte for byte.
package simulate

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/scheduler"
)

// Workloads.
const (
	// WorkloadBurst: every request arrives within one second, all of one size (1 vCPU, 2 GiB)
	// and one template every node holds.
	WorkloadBurst = "burst"
	// WorkloadTemplateReuse: requests over ten seconds draw 50 templates with a Zipf skew;
	// each node holds 8 of them.
	WorkloadTemplateReuse = "template-reuse"
	// WorkloadMixed: requests over thirty seconds, sizes from 0.5 vCPU / 512 MiB to 4 vCPU /
	// 8 GiB, 20 templates of which each node holds 5.
	WorkloadMixed = "mixed"
)

// Workloads lists the workloads.
var Workloads = []string{WorkloadBurst, WorkloadTemplateReuse, WorkloadMixed}

// The simulated node: 64 cores and 256 GiB, with a stock Cubelet's default overcommit (2×
// CPU, 1.25× memory) already in its quota, and max_mvm_num = quota_mem_mb / 512.
const (
	nodeQuotaCPU = 128000
	nodeQuotaMem = 327680
	nodeMaxMvm   = nodeQuotaMem / 512
	createTime   = 50 * time.Millisecond // from decision to the sandbox running on its node
	pool         = "pool_sim"
)

// Options configure a run. Nodes and Requests are required; the rest have defaults.
type Options struct {
	Nodes    int
	Requests int
	// Config is the scheduler configuration; the zero Config means scheduler.Default().
	Config scheduler.Config
	// Workload is one of Workloads; "" means burst.
	Workload string
	// ReportLag is how far a node's report lags behind its state; 0 means none.
	ReportLag time.Duration
	// ReportPeriod is how often each node reports, MinReportPeriod to MaxReportPeriod; 0 means
	// one second.
	ReportPeriod time.Duration
	// Seed seeds the workload and the scheduler's random picks; 0 means 1.
	Seed uint64
	// Timing adds the decision latency to the report (it varies from run to run).
	Timing bool
}

// Report is the result of a run: its inputs and the placement-quality measures. The JSON shape
// is documented in docs/scheduler.md.
type Report struct {
	Nodes        int     `json:"nodes"`
	Requests     int     `json:"requests"`
	Workload     string  `json:"workload"`
	ReportLagMs  int64   `json:"reportLagMs"`
	ReportEvery  int64   `json:"reportPeriodMs"`
	Seed         uint64  `json:"seed"`
	Profile      string  `json:"profile"`
	PrioritySel  int     `json:"prioritySelectNum"`
	LeastSelect  string  `json:"leastSelectName"`
	Placed       int     `json:"placed"`
	Unplaced     int     `json:"unplaced"`
	SuccessRate  float64 `json:"successRate"`
	Imbalance    float64 `json:"imbalance"`
	BusiestRatio float64 `json:"busiestToMean"`
	Jain         float64 `json:"jainFairness"`
	HerdingTop1  float64 `json:"herdingTop1Share"`
	TemplateHits float64 `json:"templateHitRate"`
	EmptyNodes   int     `json:"emptyNodes"`
	PeakRunning  int     `json:"peakRunningPerNode"`
	// Placements is the number of sandboxes placed on each node, in node order (node-00000 first).
	Placements []int `json:"placements"`
	// Unplaced reasons: how many refused requests named each reason for the most nodes.
	UnplacedReasons map[string]int `json:"unplacedReasons,omitempty"`
	// Latency is the decision latency; present only with Options.Timing.
	Latency *Latency `json:"latency,omitempty"`
	// latency is always measured, for the caller to print apart from the report.
	latency Latency
}

// Latency is the decision latency, in microseconds.
type Latency struct {
	P50 float64 `json:"p50Us"`
	P95 float64 `json:"p95Us"`
	P99 float64 `json:"p99Us"`
}

// Timing returns the decision latency of the run, measured whether or not Options.Timing put it in the report.
func (r *Report) Timing() Latency { return r.latency }

// sandbox is one placed sandbox on its node.
type sandbox struct {
	id         string
	cpu, mem   int64
	start, end int64 // simulated ns
}

type simNode struct {
	id        string
	templates []string
	boxes     []sandbox
	placed    int
	peak      int
}

type event struct {
	at   int64 // simulated ns
	seq  int64
	kind int // evArrive, evReport
	i    int // request index or node index
}

const (
	evReport = iota // reports first at equal times: a decision sees what was reported at its instant
	evArrive
)

type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	if q[i].kind != q[j].kind {
		return q[i].kind < q[j].kind
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type request struct {
	at       int64
	cpu, mem int64
	life     int64
	template string
}

// Run replays the workload and returns its report. Errors: INVALID_INPUT for options out of
// range (nodes 1..100000, requests 1..10000000, a known workload, lag >= 0, period 1ms..1h) or a
// configuration that is not valid.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	epoch := time.UnixMilli(1_790_000_000_000)
	var now int64 // simulated ns since epoch
	clock := func() time.Time { return epoch.Add(time.Duration(now)) }
	s, err := scheduler.New(scheduler.Options{Config: o.Config, Now: clock, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	nodes, templates := makeNodes(o, rng)
	reqs := makeRequests(o, rng, templates)

	q := &queue{}
	var seq int64
	push := func(at int64, kind, i int) {
		seq++
		heap.Push(q, event{at: at, seq: seq, kind: kind, i: i})
	}
	period := int64(o.ReportPeriod)
	for i := range nodes {
		s.Update(nodes[i].state(0, 0, o, epoch)) // every node has reported once at the start
		push(1+rng.Int64N(period), evReport, i)
	}
	for i, r := range reqs {
		push(r.at, evArrive, i)
	}
	last := reqs[len(reqs)-1].at
	byID := make(map[string]int, len(nodes))
	for i := range nodes {
		byID[nodes[i].id] = i
	}
	rep := &Report{
		Nodes: o.Nodes, Requests: o.Requests, Workload: o.Workload, ReportLagMs: o.ReportLag.Milliseconds(),
		ReportEvery: o.ReportPeriod.Milliseconds(), Seed: o.Seed, Profile: o.Config.Profile,
		PrioritySel: o.Config.PrioritySelectNum, LeastSelect: o.Config.LeastSelectName,
		UnplacedReasons: map[string]int{},
	}
	lat := make([]time.Duration, 0, len(reqs))
	withTpl, hits := 0, 0
	for q.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e := heap.Pop(q).(event)
		if e.at > last {
			break
		}
		now = e.at
		switch e.kind {
		case evReport:
			n := &nodes[e.i]
			s.Update(n.state(now, int64(o.ReportLag), o, epoch))
			n.prune(now - int64(o.ReportLag))
			push(now+period, evReport, e.i)
		case evArrive:
			r := reqs[e.i]
			id := fmt.Sprintf("sbx_%08d", e.i)
			t0 := time.Now()
			d, err := s.Decide(ctx, scheduler.Request{SandboxID: id, Pool: pool, Template: r.template, CPU: r.cpu, MemoryMiB: r.mem})
			lat = append(lat, time.Since(t0))
			if err != nil {
				var ce *cubefleet.Error
				if !errors.As(err, &ce) || ce.Code != cubefleet.CodeResourceExhausted {
					return nil, err
				}
				rep.Unplaced++
				rep.UnplacedReasons[mainReason(ce)]++
				continue
			}
			n := &nodes[byID[d.NodeID]]
			start := now + int64(createTime)
			n.boxes = append(n.boxes, sandbox{id: id, cpu: r.cpu, mem: r.mem, start: start, end: start + r.life})
			n.placed++
			n.peak = max(n.peak, n.running(now))
			rep.Placed++
			if r.template != "" {
				withTpl++
				if slices.Contains(n.templates, r.template) {
					hits++
				}
			}
		}
	}
	rep.measure(nodes, withTpl, hits, lat)
	if o.Timing {
		rep.Latency = &rep.latency
	}
	if len(rep.UnplacedReasons) == 0 {
		rep.UnplacedReasons = nil
	}
	return rep, nil
}

// The range of Options.ReportPeriod.
const (
	MinReportPeriod = time.Millisecond
	MaxReportPeriod = time.Hour
)

// reportPeriodRange is the message of a report period out of range.
const reportPeriodRange = "must be 1ms to 1h"

func (o *Options) defaults() error {
	if o.Workload == "" {
		o.Workload = WorkloadBurst
	}
	if o.ReportPeriod == 0 {
		o.ReportPeriod = time.Second
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Config.Profile == "" {
		o.Config = scheduler.Default()
	}
	var errs []cubefleet.FieldError
	add := func(path, msg string) { errs = append(errs, cubefleet.FieldError{Path: path, Message: msg}) }
	if o.Nodes < 1 || o.Nodes > 100000 {
		add("nodes", "must be 1 to 100000")
	}
	if o.Requests < 1 || o.Requests > 10_000_000 {
		add("requests", "must be 1 to 10000000")
	}
	if !slices.Contains(Workloads, o.Workload) {
		add("workload", fmt.Sprintf("unknown workload %q: want burst, template-reuse or mixed", o.Workload))
	}
	if o.ReportLag < 0 {
		add("report-lag", "must be >= 0")
	}
	if o.ReportPeriod < MinReportPeriod || o.ReportPeriod > MaxReportPeriod {
		add("report-period", reportPeriodRange)
	}
	if len(errs) > 0 {
		return cubefleet.InvalidAll(errs)
	}
	return nil
}

// makeNodes builds the fleet and the workload's templates.
func makeNodes(o Options, rng *rand.Rand) ([]simNode, []string) {
	var templates []string
	perNode := 0
	switch o.Workload {
	case WorkloadBurst:
		templates, perNode = []string{"tpl_burst"}, 1
	case WorkloadTemplateReuse:
		templates, perNode = names("tpl_", 50), 8
	case WorkloadMixed:
		templates, perNode = names("tpl_", 20), 5
	}
	nodes := make([]simNode, o.Nodes)
	for i := range nodes {
		nodes[i].id = fmt.Sprintf("node-%05d", i)
		held := slices.Clone(templates)
		rng.Shuffle(len(held), func(a, b int) { held[a], held[b] = held[b], held[a] })
		nodes[i].templates = held[:perNode]
		slices.Sort(nodes[i].templates)
	}
	return nodes, templates
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// makeRequests draws the workload's requests, sorted by arrival.
func makeRequests(o Options, rng *rand.Rand, templates []string) []request {
	reqs := make([]request, o.Requests)
	span := map[string]time.Duration{WorkloadBurst: time.Second, WorkloadTemplateReuse: 10 * time.Second, WorkloadMixed: 30 * time.Second}[o.Workload]
	meanLife := map[string]time.Duration{WorkloadBurst: 20 * time.Second, WorkloadTemplateReuse: 15 * time.Second, WorkloadMixed: 15 * time.Second}[o.Workload]
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(templates)-1))
	sizes := [][2]int64{{500, 512}, {1000, 2048}, {2000, 4096}, {4000, 8192}}
	for i := range reqs {
		r := &reqs[i]
		r.at = 1 + int64(span)*int64(i)/int64(o.Requests)
		if o.Workload == WorkloadMixed {
			r.at = 1 + rng.Int64N(int64(span))
		}
		r.life = int64(rng.ExpFloat64() * float64(meanLife))
		r.cpu, r.mem = 1000, 2048
		switch o.Workload {
		case WorkloadBurst:
			r.template = templates[0]
		case WorkloadTemplateReuse:
			r.template = templates[zipf.Uint64()]
		case WorkloadMixed:
			sz := sizes[rng.IntN(len(sizes))]
			r.cpu, r.mem = sz[0], sz[1]
			r.template = templates[rng.IntN(len(templates))]
		}
	}
	slices.SortStableFunc(reqs, func(a, b request) int { return int(a.at - b.at) })
	return reqs
}

// state is the node's report at now (simulated ns): its sandboxes as they were lag ago.
func (n *simNode) state(now, lag int64, o Options, epoch time.Time) scheduler.NodeState {
	at := epoch.Add(time.Duration(now))
	st := scheduler.NodeState{
		ID: n.id, Pool: pool, Cubefleet: true, ReportedSinceStart: true, Ready: true,
		ReadyUntil: at.Add(15 * time.Second), QuotaCPU: nodeQuotaCPU, QuotaMemMiB: nodeQuotaMem, MaxMvmNum: nodeMaxMvm,
		HasMetrics: true, MetricTime: at.Add(-time.Duration(lag)), MetricsReceivedAt: at, ReportPeriod: o.ReportPeriod,
		Templates: n.templates, SandboxesReported: true,
	}
	seen := now - lag
	for _, b := range n.boxes {
		if b.start <= seen && seen < b.end {
			st.AllocatedCPU += b.cpu
			st.AllocatedMemMiB += b.mem
			st.MvmNum++
			st.Sandboxes = append(st.Sandboxes, b.id)
		}
	}
	return st
}

// prune forgets the sandboxes that ended before seen: no report shows them again.
func (n *simNode) prune(seen int64) {
	n.boxes = slices.DeleteFunc(n.boxes, func(b sandbox) bool { return b.end <= seen })
}

// running counts the node's sandboxes placed and not ended at now.
func (n *simNode) running(now int64) int {
	c := 0
	for _, b := range n.boxes {
		if b.end > now {
			c++
		}
	}
	return c
}

// mainReason is the reason a refusal names for the most nodes.
func mainReason(e *cubefleet.Error) string {
	counts, _ := e.Details["reasons"].(map[string]int)
	best, bestN := "no nodes", 0
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		if counts[r] > bestN {
			best, bestN = r, counts[r]
		}
	}
	return best
}

// measure fills the quality measures from the per-node placements.
func (r *Report) measure(nodes []simNode, withTpl, hits int, lat []time.Duration) {
	r.Placements = make([]int, len(nodes))
	var sum, sumSq float64
	most := 0
	for i, n := range nodes {
		r.Placements[i] = n.placed
		x := float64(n.placed)
		sum += x
		sumSq += x * x
		most = max(most, n.placed)
		if n.placed == 0 {
			r.EmptyNodes++
		}
		r.PeakRunning = max(r.PeakRunning, n.peak)
	}
	cnt := float64(len(nodes))
	mean := sum / cnt
	r.SuccessRate = round(float64(r.Placed) / float64(r.Requests))
	if mean > 0 {
		r.Imbalance = round(math.Sqrt(max(sumSq/cnt-mean*mean, 0)) / mean)
		r.BusiestRatio = round(float64(most) / mean)
		r.Jain = round(sum * sum / (cnt * sumSq))
		r.HerdingTop1 = round(float64(most) / sum)
	}
	if withTpl > 0 {
		r.TemplateHits = round(float64(hits) / float64(withTpl))
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		at := func(p float64) float64 {
			return round(float64(lat[min(int(p*float64(len(lat))), len(lat)-1)].Nanoseconds()) / 1000)
		}
		r.latency = Latency{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
	}
}

// round keeps 4 decimals, so reports print the same on every platform.
func round(v float64) float64 { return math.Round(v*1e4) / 1e4 }
