package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/api"
	"github.com/cubefleet/cubefleet/internal/fleet/fleettest"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

type benchEnv struct {
	srv   *Server
	admin *iam.Principal
}

func newBenchEnv(b *testing.B, db *store.DB) *benchEnv {
	b.Helper()
	ctx := context.Background()
	srv, err := New(ctx, Config{DB: db, DataDir: b.TempDir(), Listen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	_, token, err := iam.Bootstrap(ctx, db, api.Catalogue(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	p, err := iam.Authenticate(ctx, db, token, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{srv: srv, admin: p}
}

func (e *benchEnv) call(b *testing.B, method string, in map[string]any) any {
	b.Helper()
	raw, _ := json.Marshal(in)
	out, err := e.srv.api.Call(context.Background(), e.admin, "bench", method, raw)
	if err != nil {
		b.Fatalf("%s: %v", method, err)
	}
	return out
}

func benchDatabases(b *testing.B, fn func(b *testing.B, open func() *store.DB)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, func() *store.DB { return storetest.SQLite(b, Modules()...) }) })
	b.Run("postgres", func(b *testing.B) { fn(b, func() *store.DB { return storetest.Postgres(b, Modules()...) }) })
}

// BenchmarkFleetPlan plans the limits document against an empty fleet (5,000 creates) and
// against the fleet it made (5,000 unchanged). Target: p95 <= 100 ms.
func BenchmarkFleetPlan(b *testing.B) {
	doc := json.RawMessage(fleettest.LimitsDocument())
	benchDatabases(b, func(b *testing.B, open func() *store.DB) {
		e := newBenchEnv(b, open())
		in := map[string]any{"tenantId": "root", "config": doc}
		b.Run("empty", func(b *testing.B) { benchP95(b, func() { e.call(b, "fleet.plan", in) }) })
		e.call(b, "fleet.apply", in)
		b.Run("converged", func(b *testing.B) { benchP95(b, func() { e.call(b, "fleet.plan", in) }) })
	})
}

// BenchmarkFleetApply applies the limits document to an empty fleet in one transaction: 5,000
// calls with their audit rows. Target: <= 2 s.
func BenchmarkFleetApply(b *testing.B) {
	doc := json.RawMessage(fleettest.LimitsDocument())
	benchDatabases(b, func(b *testing.B, open func() *store.DB) {
		for range b.N {
			b.StopTimer()
			e := newBenchEnv(b, open())
			b.StartTimer()
			e.call(b, "fleet.apply", map[string]any{"tenantId": "root", "config": doc})
		}
	})
}

// benchP95 runs fn b.N times and reports the 95th percentile in ms as "p95-ms".
func benchP95(b *testing.B, fn func()) {
	d := make([]time.Duration, 0, b.N)
	for range b.N {
		start := time.Now()
		fn()
		d = append(d, time.Since(start))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[(len(d)*95)/100].Microseconds())/1000, "p95-ms")
}
