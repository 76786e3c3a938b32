package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestIndexMatchesFullScan: the index never changes a decision. Two schedulers with one seed,
// one scanning every node and one through the index, take the same random fleet, configuration
// and sequence of decisions, releases and reports, and must answer every decision alike.
func TestIndexMatchesFullScan(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := newClock()
		cfg := Config{
			Profile:           rapid.SampledFrom(Profiles).Draw(rt, "profile"),
			PrioritySelectNum: rapid.SampledFrom([]int{1, 2, 3, 5, -1}).Draw(rt, "n"),
			LeastSelectName:   rapid.SampledFrom(Selections).Draw(rt, "select"),
		}.filled()
		if rapid.Bool().Draw(rt, "dynamic") {
			cfg.Score.ResourceWeights[FactorReqCPU] = 2
			cfg.Score.ResourceWeights[FactorMetricUpdate] = 1
			pc := cfg.Score.PluginConf[ScorerRealTimeWeightedAverage]
			pc.Weight = 1
			pc.EnableWeightFactors = append(pc.EnableWeightFactors, FactorReqCPU, FactorMetricUpdate)
			cfg.Score.PluginConf = map[string]PluginConf{ScorerRealTimeWeightedAverage: pc}
			cfg.Score.EnableScorers = []string{ScorerRealTimeWeightedAverage}
		}
		full, err := New(Options{Config: cfg, Now: c.Now, Seed: 9})
		if err != nil {
			rt.Fatal(err)
		}
		full.fullScan = true
		idx, _ := New(Options{Config: cfg, Now: c.Now, Seed: 9})
		both := func(f func(s *Scheduler)) { f(full); f(idx) }

		nodeGen := func(id string) NodeState {
			st := node(c, id, rapid.Int64Range(0, 8000).Draw(rt, "cpu"), rapid.Int64Range(0, 16384).Draw(rt, "mem"), rapid.Int64Range(1, 20).Draw(rt, "mvm"))
			st.Pool = rapid.SampledFrom([]string{"pool_a", "pool_a", "pool_b"}).Draw(rt, "pool")
			st.AllocatedCPU = rapid.Int64Range(0, 4000).Draw(rt, "acpu")
			st.AllocatedMemMiB = rapid.Int64Range(0, 8192).Draw(rt, "amem")
			st.MvmNum = rapid.Int64Range(0, 10).Draw(rt, "amvm")
			st.Cordoned = rapid.IntRange(0, 9).Draw(rt, "cordon") == 0
			st.Ready = rapid.IntRange(0, 9).Draw(rt, "notready") != 0
			st.MetricTime = c.t.Add(-time.Duration(rapid.IntRange(0, 1500).Draw(rt, "age")) * time.Millisecond)
			if rapid.Bool().Draw(rt, "tpl") {
				st.Templates = []string{"tpl_x"}
			}
			return st
		}
		count := rapid.IntRange(1, 200).Draw(rt, "nodes")
		for i := range count {
			st := nodeGen(fmt.Sprintf("n%03d", i))
			both(func(s *Scheduler) { s.Update(st) })
		}
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0: // a report
				st := nodeGen(fmt.Sprintf("n%03d", rapid.IntRange(0, count-1).Draw(rt, "which")))
				both(func(s *Scheduler) { s.Update(st) })
			case 1:
				id := sbx(rapid.IntRange(0, i).Draw(rt, "release"))
				both(func(s *Scheduler) { s.Release(id) })
			case 2:
				id := fmt.Sprintf("n%03d", rapid.IntRange(0, count-1).Draw(rt, "remove"))
				both(func(s *Scheduler) { s.Remove(id) })
			default:
				r := Request{
					SandboxID: sbx(i), Pool: rapid.SampledFrom([]string{"pool_a", "pool_b"}).Draw(rt, "rpool"),
					CPU: rapid.Int64Range(0, 2000).Draw(rt, "rcpu"), MemoryMiB: rapid.Int64Range(0, 4096).Draw(rt, "rmem"),
				}
				if rapid.Bool().Draw(rt, "rtpl") {
					r.Template = "tpl_x"
				}
				d1, e1 := full.Decide(context.Background(), r)
				d2, e2 := idx.Decide(context.Background(), r)
				if fmt.Sprint(d1, e1) != fmt.Sprint(d2, e2) {
					rt.Fatalf("step %d: full scan %v %v, index %v %v", i, d1, e1, d2, e2)
				}
			}
		}
	})
}
