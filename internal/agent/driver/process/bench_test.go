package process

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
)

// BenchmarkStart measures Start to the sandbox's process running (exec done), reported as p50
// and p99 besides the mean: "warm" with a spare supervisor ready (the steady state), "cold"
// without spares (a supervisor and its exec stage are started for the sandbox). Each sandbox is
// removed, untimed, before the next.
//
//	go test -run '^$' -bench BenchmarkStart -benchtime 200x ./internal/agent/driver/process/
func BenchmarkStart(b *testing.B) {
	for _, mode := range []struct {
		name   string
		spares int
	}{{"warm", 1}, {"cold", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := testConfig(b)
			cfg.Spares = mode.spares
			d := newDriver(b, cfg)
			ctx := context.Background()
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				for mode.spares > 0 && len(d.spares) < mode.spares {
					time.Sleep(time.Millisecond)
				}
				id := "bench-" + strconv.Itoa(i)
				b.StartTimer()
				began := time.Now()
				st, err := d.Start(ctx, driver.Spec{ID: id, Argv: []string{"/bin/sleep", "1000"}})
				took = append(took, time.Since(began))
				b.StopTimer()
				if err != nil || st.State != driver.StateRunning {
					b.Fatalf("Start = %+v, %v", st, err)
				}
				if err := d.Remove(ctx, id); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkClaim measures Claim of a warm sandbox to its command running (exec done), reported
// as p50 and p99 besides the mean. Each warm sandbox is made, and removed after its claim,
// untimed.
//
//	go test -run '^$' -bench BenchmarkClaim -benchtime 200x ./internal/agent/driver/process/
func BenchmarkClaim(b *testing.B) {
	d := newDriver(b, testConfig(b))
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		id := "claim-" + strconv.Itoa(i)
		if st, err := d.Warm(ctx, driver.Spec{ID: id}); err != nil || st.State != driver.StateWarm {
			b.Fatalf("Warm = %+v, %v", st, err)
		}
		b.StartTimer()
		began := time.Now()
		st, err := d.Claim(ctx, driver.Spec{ID: id, Argv: []string{"/bin/sleep", "1000"}})
		took = append(took, time.Since(began))
		b.StopTimer()
		if err != nil || st.State != driver.StateRunning {
			b.Fatalf("Claim = %+v, %v", st, err)
		}
		if err := d.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Microseconds())/1000, "p99-ms")
}
