package fleet_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/fleet/fleettest"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchDBs(b *testing.B, fn func(b *testing.B, db *store.DB)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, storetest.SQLite(b, driftModules...)) })
	b.Run("postgres", func(b *testing.B) { fn(b, storetest.Postgres(b, driftModules...)) })
}

// BenchmarkDriftCheck re-plans and records the drift of one tenant whose applied document holds
// 5,000 objects (the limits document), converged. Target: <= 50 ms CPU per check ("cpu-ms").
// The document's provider accounts read env://IONOS_TOKEN, so the root tenant is let use env://
// references to IONOS_ variables, as --env-ref-allow IONOS_ does.
func BenchmarkDriftCheck(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *store.DB) {
		e := newDriftEnv(b, db)
		var err error
		if e.svc.EnvRefs, err = fieldrules.ParseEnvRefs([]string{"IONOS_"}); err != nil {
			b.Fatal(err)
		}
		e.apply("root", string(fleettest.LimitsDocument()))
		r := e.reconciler()
		ctx := context.Background()
		runtime.GC() // the apply's garbage is not the checks' to collect
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuTime()
		for range b.N {
			if n, err := r.CheckAll(ctx); err != nil || n != 0 {
				b.Fatalf("check: %d drifted, %v", n, err)
			}
		}
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms")
	})
}

// BenchmarkDriftPass1000Tenants runs one reconciler pass over 1,000 tenants, each with an
// applied document of 1 site, 2 pools, 2 owner quotas, 1 offer and 1 flavor, on SQLite.
// Target: the whole pass in <= 60 s ("pass-s").
func BenchmarkDriftPass1000Tenants(b *testing.B) {
	db := storetest.SQLite(b, driftModules...)
	e := newDriftEnv(b, db)
	ctx := context.Background()
	for i := range 1000 {
		tenant := fmt.Sprintf("t%04d", i)
		if _, err := iam.CreateTenant(ctx, db, tenant, time.Now()); err != nil {
			b.Fatal(err)
		}
		e.apply(tenant, `{"version":1,"sites":[{"name":"fra","kind":"shared","region":"eu"}],
			"pools":[{"name":"a","site":"fra","class":"vps-host","gpuModel":"L40S","ownerQuota":{"gpu":8},"offers":[{"tenant":"acme","quota":{"vcpu":8}}]},
			         {"name":"b","site":"fra","class":"vps-host","ownerQuota":{"vcpu":64}}],
			"flavors":[{"pool":"a","name":"g1","vcpu":2,"memoryGiB":4,"diskGiB":40}]}`)
	}
	r := e.reconciler()
	b.ResetTimer()
	for range b.N {
		e.clock.Add(r.Every)
		start := time.Now()
		if _, drifted, err := r.Pass(ctx); err != nil || drifted != 0 {
			b.Fatalf("pass: %d drifted, %v", drifted, err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "pass-s")
	}
}
