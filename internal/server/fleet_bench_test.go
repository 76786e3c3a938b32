package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// limitsDocument is a document at the limits: 1000 items in every list (1000 sites, provider
// accounts, pools, flavors and templates: 5,000 objects).
func limitsDocument() json.RawMessage {
	type m = map[string]any
	var sites, accounts, pools, flavors, templates []m
	for i := range 1000 {
		sites = append(sites, m{"name": fmt.Sprintf("site-%04d", i), "kind": "shared", "region": "eu-central"})
		accounts = append(accounts, m{"name": fmt.Sprintf("acct-%04d", i), "provider": "ionos-cloud", "config": m{"location": "de/fra", "token": "env://IONOS_TOKEN"}})
		pools = append(pools, m{"name": fmt.Sprintf("pool-%04d", i), "site": fmt.Sprintf("site-%04d", i), "class": "vps-host", "gpuModel": "L40S", "policy": m{"disruptionBudget": 0.1}})
		flavors = append(flavors, m{"pool": fmt.Sprintf("pool-%04d", i), "name": "g1.small", "vcpu": 2, "memoryGiB": 4, "diskGiB": 40})
		templates = append(templates, m{"name": fmt.Sprintf("tpl-%04d", i), "pool": fmt.Sprintf("pool-%04d", i), "flavor": "g1.small", "imageId": "ubuntu-24.04", "network": "private", "warm": m{"min": 0, "max": 2}})
	}
	doc, _ := json.Marshal(m{"version": 1, "sites": sites, "providerAccounts": accounts, "pools": pools, "flavors": flavors, "sandboxTemplates": templates})
	return doc
}

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
	_, token, err := iam.Bootstrap(ctx, db, time.Now())
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
	out, err := e.srv.deps.registry.Call(context.Background(), e.admin, "bench", method, raw)
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
	doc := limitsDocument()
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
	doc := limitsDocument()
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
