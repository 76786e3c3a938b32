package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// clock is an injected clock tests move by hand.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time      { return c.t }
func (c *clock) Add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.UnixMilli(1_790_000_000_000)} }
func (c *clock) fresh(st *NodeState) {
	st.ReadyUntil, st.MetricsReceivedAt, st.MetricTime = c.t.Add(15*time.Second), c.t, c.t
}

// node returns a Ready cubefleet node of pool "pool_a" with cpu millicores, mem MiB and mvm
// microVM slots, reported now on c.
func node(c *clock, id string, cpu, mem, mvm int64) NodeState {
	st := NodeState{
		ID: id, Pool: "pool_a", Cubefleet: true, ReportedSinceStart: true, Ready: true,
		QuotaCPU: cpu, QuotaMemMiB: mem, MaxMvmNum: mvm, HasMetrics: true,
		ReportPeriod: time.Second, SandboxesReported: true,
	}
	c.fresh(&st)
	return st
}

// newScheduler returns a Scheduler on c with cfg (zero: the default) and seed 1.
func newScheduler(t testing.TB, c *clock, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(Options{Config: cfg, Now: c.Now, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func req(id string, cpu, mem int64) Request {
	return Request{SandboxID: id, Pool: "pool_a", CPU: cpu, MemoryMiB: mem}
}

func mustDecide(t testing.TB, s *Scheduler, r Request) Decision {
	t.Helper()
	d, err := s.Decide(context.Background(), r)
	if err != nil {
		t.Fatalf("decide %s: %v", r.SandboxID, err)
	}
	return d
}

func sbx(i int) string { return fmt.Sprintf("sbx_%06d", i) }
