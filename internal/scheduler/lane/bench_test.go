package lane

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// BenchmarkPlaceDurable measures committed placements: the decision on 1,000 nodes and the
// group commit of its reservation, from 64 concurrent callers; each reservation is then
// released (also written).
func BenchmarkPlaceDurable(b *testing.B) {
	for _, dbName := range []string{"sqlite", "postgres"} {
		b.Run(dbName, func(b *testing.B) {
			var db *store.DB
			if dbName == "sqlite" {
				db = storetest.SQLite(b, modules...)
			} else {
				db = storetest.Postgres(b, modules...)
			}
			l, err := New(Config{DB: db, Holder: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			for i := range 1000 {
				st := nodeState(fmt.Sprintf("node-%04d", i), 64000, 1000)
				l.Scheduler().Update(st)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go l.Run(ctx)
			for !l.Holding() {
				time.Sleep(time.Millisecond)
			}
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("s%d", n.Add(1))
					if _, err := l.Place(ctx, scheduler.Request{SandboxID: id, Pool: "pool_a", CPU: 100, MemoryMiB: 64}); err != nil {
						b.Fatal(err)
					}
					if _, err := l.Release(ctx, id); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}
