package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// sandboxBench is a --dev control plane on SQLite serving on 127.0.0.1 with a pool, a flavor,
// template "py" (warm: its warm pool, nil for none) and agents joined and prepared.
type sandboxBench struct {
	api    *client.Client
	db     *store.DB
	agents []*sandboxtest.Agent
}

func newSandboxBench(b *testing.B, agents int, warm map[string]int) *sandboxBench {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := b.TempDir()
	db := storetest.SQLite(b, controlplane.Modules()...)
	// No tenant cap: a benchmark's creates may run ahead of the agents.
	srv, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: dir, DB: db, Dev: true, TenantMaxSandboxes: 1 << 30}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	token, err := privatefile.Read(filepath.Join(dir, controlplane.AdminTokenFile))
	if err != nil {
		b.Fatal(err)
	}
	// The clients of a benchmark keep their connections, as a load generator would (the
	// default transport keeps 2 idle connections per host).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	b.Cleanup(tr.CloseIdleConnections)
	e := &sandboxBench{api: client.New(srv.URL(), strings.TrimSpace(string(token)), &http.Client{Transport: tr}), db: db}
	var site, pool, flavor struct{ ID string }
	tpl := map[string]any{"tenantId": "root", "poolId": &pool.ID, "flavorId": &flavor.ID, "name": "py", "imageId": "python-3.12", "network": "private"}
	if warm != nil {
		tpl["warm"] = warm
	}
	for _, c := range []struct {
		method string
		in     map[string]any
		out    any
	}{
		{"compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}, &site},
		{"compute.pools.create", map[string]any{"tenantId": "root", "siteId": &site.ID, "class": "vps-host"}, &pool},
		{"compute.flavors.create", map[string]any{"tenantId": "root", "poolId": &pool.ID, "name": "small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}, &flavor},
		{"compute.sandboxTemplates.create", tpl, nil},
	} {
		if err := e.api.Call(ctx, c.method, c.in, c.out); err != nil {
			b.Fatalf("%s: %v", c.method, err)
		}
	}
	for i := range agents {
		id := fmt.Sprintf("127.0.0.%d", 10+i)
		var join struct{ Token string }
		if err := e.api.Call(ctx, "nodes.joinTokens.create", map[string]any{"pool": pool.ID, "ip": id}, &join); err != nil {
			b.Fatal(err)
		}
		a := sandboxtest.Join(b, srv.URL(), join.Token, id, 100000)
		a.Start(time.Second)
		e.agents = append(e.agents, a)
	}
	testkit.WaitFor(b, 20*time.Second, "the template prepared on every node", func() bool {
		for _, a := range e.agents {
			var n struct{ LocalTemplates []string }
			if e.api.Call(ctx, "nodes.get", map[string]any{"nodeId": a.ID}, &n) != nil || len(n.LocalTemplates) == 0 {
				return false
			}
		}
		return true
	})
	return e
}

// BenchmarkSandboxCreates measures committed creates through the API (async: admitted, placed
// by the scheduler and committed with their node's assignment) on SQLite with 10 agents on
// loopback, which take the work and run each sandbox for a millisecond: creates/s is the rate
// the API committed them at, ended/s the rate they went through to their end on the agents
// (from the first create until the last one ended).
func BenchmarkSandboxCreates(b *testing.B) {
	e := newSandboxBench(b, 10, nil)
	ctx := context.Background()
	b.SetParallelism(16)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := e.api.Call(ctx, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "command": []string{"true"}, "async": true}, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
	testkit.WaitFor(b, time.Minute, "every sandbox ended", func() bool {
		var live int
		return e.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE ended_at = 0`).Scan(&live) == nil && live == 0
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ended/s")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/sandbox")
}

// cpuTime returns the CPU time (user and system) the process has used: the control plane, its
// agents and its clients, which a benchmark runs in one process. On a machine shared with other
// work, creates/s depends on what the others take; the CPU time a sandbox costs does not.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSandboxStart measures sandboxes.create (synchronous: it answers once the sandbox
// runs) one at a time: cold (placed and started) and warm (a warm sandbox claimed), with p50 and
// p99.
func BenchmarkSandboxStart(b *testing.B) {
	for _, c := range []struct {
		name string
		warm map[string]int
	}{{"cold", nil}, {"warm", map[string]int{"min": 4, "max": 8}}} {
		b.Run(c.name, func(b *testing.B) {
			e := newSandboxBench(b, 1, c.warm)
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				if c.warm != nil {
					b.StopTimer()
					testkit.WaitFor(b, 10*time.Second, "a warm sandbox ready", func() bool {
						var l struct{ Items []sandboxes.Sandbox }
						e.api.Call(ctx, "sandboxes.list", map[string]any{"tenantId": "root", "warm": true, "state": "running"}, &l)
						return len(l.Items) > 0
					})
					b.StartTimer()
				}
				start := time.Now()
				var s sandboxes.Sandbox
				if err := e.api.Call(ctx, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "command": []string{"true"}}, &s); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if s.State != sandboxes.StateRunning && !s.State.Final() || c.warm != nil && s.ClaimedAt == 0 {
					b.Fatalf("created: %+v", s)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
