package microvm

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
)

// BenchmarkStart measures, under TCG, a cold start (Start: the VMM's start, the guest's boot,
// the claim, until the command runs) and a warm claim (Claim of a booted guest, until the
// command runs), reporting p50-ms and p99-ms, and the host memory of an idle warm guest's VMM
// (its resident set, vmm-rss-MiB, for a 256 MiB guest). Each cold iteration is a boot: seconds
// under TCG; -benchtime 1x runs one of each.
func BenchmarkStart(b *testing.B) {
	d := newTestDriver(b, "")
	ctx := context.Background()
	spec := func(id string) driver.Spec {
		return driver.Spec{ID: id, Image: "busybox", MemoryMiB: MinMemoryMiB, Argv: []string{"true"}}
	}
	report := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	// timed runs start (Start or Claim) until the command runs, then lets it end and removes it.
	timed := func(b *testing.B, id string, start func() (driver.Status, error)) time.Duration {
		t0 := time.Now()
		st, err := start()
		if err != nil || st.State != driver.StateRunning {
			b.Fatalf("%s: %+v, %v", id, st, err)
		}
		took := time.Since(t0)
		b.StopTimer()
		waitEnd(b, d, id, time.Minute)
		d.Remove(ctx, id)
		b.StartTimer()
		return took
	}
	b.Run("cold", func(b *testing.B) {
		var lat []time.Duration
		for i := range b.N {
			id := fmt.Sprintf("cold-%d-%d", b.N, i)
			lat = append(lat, timed(b, id, func() (driver.Status, error) { return d.Start(ctx, spec(id)) }))
		}
		report(b, lat)
	})
	b.Run("warm", func(b *testing.B) {
		var lat []time.Duration
		var rss []float64
		for i := range b.N {
			id := fmt.Sprintf("warm-%d-%d", b.N, i)
			b.StopTimer()
			w := spec(id)
			w.Argv = nil
			if st, err := d.Warm(ctx, w); err != nil || st.State != driver.StateWarm {
				b.Fatalf("warm: %+v, %v", st, err)
			}
			time.Sleep(time.Second) // idle: the boot's page faults are over
			st, _ := d.Status(ctx, id)
			rss = append(rss, float64(st.Stats.MemoryBytes)/(1<<20))
			b.StartTimer()
			lat = append(lat, timed(b, id, func() (driver.Status, error) { return d.Claim(ctx, spec(id)) }))
		}
		report(b, lat)
		slices.Sort(rss)
		b.ReportMetric(rss[len(rss)/2], "vmm-rss-MiB")
	})
}
