package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchFleet returns a scheduler on c over n Ready nodes of mixed sizes, every one holding the
// template "tpl_bench", with some load reported.
func benchFleet(b *testing.B, c *clock, n int, cfg Config) *Scheduler {
	s := newScheduler(b, c, cfg)
	for i := range n {
		st := node(c, fmt.Sprintf("node-%05d", i), int64(32000+(i%4)*16000), int64(131072+(i%3)*65536), 500)
		st.AllocatedCPU = int64(i%7) * 1000
		st.AllocatedMemMiB = int64(i%5) * 2048
		st.MvmNum = int64(i % 11)
		st.Templates = []string{"tpl_bench", fmt.Sprintf("tpl_%d", i%10)}
		st.ReadyUntil = c.t.Add(time.Hour)
		st.MetricsReceivedAt = c.t.Add(time.Hour)
		st.ReportPeriod = 0
		s.Update(st)
	}
	return s
}

// BenchmarkDecide measures one whole decision: the scan of every node of the pool, the
// filters, the score, the top-N pick and the reservation; the reservation is then released
// by sandbox id (measured too) so the fleet stays in a steady state. p50/p99 are the
// per-decision latencies.
func BenchmarkDecide(b *testing.B) {
	for _, profile := range Profiles {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", profile, n), func(b *testing.B) {
				c := newClock()
				s := benchFleet(b, c, n, Config{Profile: profile, Filter: FilterConfig{}, Score: ScoreConfig{}}.filled())
				ctx := context.Background()
				ids := make([]string, 4096)
				for i := range ids {
					ids[i] = sbx(i)
				}
				lat := make([]time.Duration, 0, b.N)
				cpu0 := cpuTime()
				r := Request{Pool: "pool_a", Template: "tpl_bench", CPU: 1000, MemoryMiB: 2048}
				b.ResetTimer()
				for i := range b.N {
					r.SandboxID = ids[i%len(ids)]
					t0 := time.Now()
					if _, err := s.Decide(ctx, r); err != nil {
						b.Fatal(err)
					}
					s.Release(r.SandboxID)
					lat = append(lat, time.Since(t0))
				}
				b.StopTimer()
				cpu := cpuTime() - cpu0
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				// The process's CPU time per decision: what a decision costs whatever else
				// the machine runs (benchmark figures on a shared machine are wall-clock).
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the CPU time the process has used (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecideParallel measures decisions from concurrent callers (the server's case) on
// 1,000 nodes with the default configuration.
func BenchmarkDecideParallel(b *testing.B) {
	c := &lockedClock{clock: newClock()}
	s := benchFleet(b, c.clock, 1000, Default())
	s.now = c.Now
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		r := Request{Pool: "pool_a", Template: "tpl_bench", CPU: 1000, MemoryMiB: 2048}
		for pb.Next() {
			r.SandboxID = sbx(int(next.Add(1)))
			if _, err := s.Decide(ctx, r); err != nil {
				b.Fatal(err)
			}
			s.Release(r.SandboxID)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
