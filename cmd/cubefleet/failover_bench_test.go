package main_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

// BenchmarkPlacementGapAfterKill measures how long placement stops when the scheduler lease
// holder of three replicas on one PostgreSQL is killed with SIGKILL: creates arrive 8 a second
// round-robin over the two other replicas, and a create's wait is from its sending until it was
// placed (its answer when that says starting, else its placement time). Each kill's gap is the
// longest wait of the creates sent from 1 s before the kill to 3 s after it; the killed replica
// is started again on its address before the next kill. It reports the gaps' p50 and max over
// 10 kills (2 with -short), at the default settings (leases, heartbeat timeout, sync). b.N is not used: each run is the
// whole series.
func BenchmarkPlacementGapAfterKill(b *testing.B) {
	kills := 10
	if testing.Short() {
		kills = 2
	}
	f := newReplicatedFleet(b, 3, 2, nil)
	var gaps []time.Duration
	for range b.N {
		for k := range kills {
			holder := f.leaseHolder(f.replicas)
			if holder == nil {
				b.Fatalf("kill %d: no replica holds the scheduler lease", k)
			}
			var others []*cluster
			for _, c := range f.replicas {
				if c != holder {
					others = append(others, c)
				}
			}
			type sent struct {
				at, answered time.Time
				s            sandboxes.Sandbox
			}
			var (
				mu   sync.Mutex
				all  []sent
				wg   sync.WaitGroup
				stop = make(chan struct{})
			)
			var killed time.Time
			tick := time.NewTicker(125 * time.Millisecond)
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					wg.Go(func() {
						at := time.Now()
						s, err := f.createOn(others[i%len(others)], "/bin/sh", "-c", "sleep 0.1")
						if err != nil {
							b.Errorf("kill %d: a create through a live replica: %v", k, err)
							return
						}
						mu.Lock()
						all = append(all, sent{at, time.Now(), s})
						mu.Unlock()
					})
				}
			})
			time.Sleep(time.Second)
			killed = time.Now()
			holder.crash()
			f.api = f.replicaAPI(others[0])
			time.Sleep(3 * time.Second)
			close(stop)
			tick.Stop()
			wg.Wait()
			var gap time.Duration
			for _, c := range all {
				placed := c.answered
				if c.s.State == sandboxes.StatePending {
					got := f.wait(c.s.ID, 60*time.Second)
					for _, tr := range got.States {
						if tr.State == sandboxes.StateStarting {
							placed = time.UnixMilli(tr.At)
						}
					}
				}
				if c.at.After(killed.Add(-time.Second)) {
					gap = max(gap, placed.Sub(c.at))
				}
			}
			gaps = append(gaps, gap)
			f.restart(holder)
		}
	}
	slices.Sort(gaps)
	b.ReportMetric(float64(gaps[len(gaps)/2].Milliseconds()), "gap-p50-ms")
	b.ReportMetric(float64(gaps[len(gaps)-1].Milliseconds()), "gap-max-ms")
	b.Logf("placement gaps after %d kills: %v", len(gaps), gaps)
}
