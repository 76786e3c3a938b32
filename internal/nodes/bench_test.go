package nodes

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodes/nodesim"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// benchNodes is how many nodes the benchmarks register.
const benchNodes = 10000

// statusTemplate is the golden status body with its times as nodesim's placeholder.
func statusTemplate(tb testing.TB) []byte {
	b := testdata(tb, "status.json")
	b = bytes.ReplaceAll(b, []byte("2026-05-04T10:00:00Z"), []byte("2006-01-02T15:04:05Z"))
	return bytes.ReplaceAll(b, []byte("2026-05-04T09:59:59Z"), []byte("2006-01-02T15:04:05Z"))
}

// benchRegistry is a running registry on db with benchNodes stock nodes that reported once,
// served over HTTP on 127.0.0.1; it returns the registry, the server's address and the nodes.
func benchRegistry(b *testing.B, db *store.DB) (*Registry, string, []nodesim.Node) {
	reg, addr, nodes, _ := benchRegistryStop(b, db)
	return reg, addr, nodes
}

// benchRegistryStop is benchRegistry that also returns a function stopping the registry's
// loops (so a benchmark can call Flush alone).
func benchRegistryStop(b *testing.B, db *store.DB) (*Registry, string, []nodesim.Node, func()) {
	b.Helper()
	reg, err := New(context.Background(), Config{DB: db, AllowUnauthenticated: []netip.Prefix{loopback}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	b.Cleanup(func() {
		srv.Close()
		stop()
	})
	addr := strings.TrimPrefix(srv.URL, "http://")
	reg1 := testdata(b, "register.json")
	nodes, err := nodesim.RegisterAll(context.Background(), addr, nodesim.IDs(benchNodes), "", 64, func(id string) []byte {
		return bytes.ReplaceAll(reg1, []byte("10.0.0.7"), []byte(id))
	})
	if err != nil {
		b.Fatal(err)
	}
	body := nodesim.StatusBody(statusTemplate(b))
	c, err := nodesim.Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var buf []byte
	for i, n := range nodes {
		buf = body(i, 0, buf)
		if status, out, err := c.Do(http.MethodPost, nodesim.StatusPath(n.ID), "", buf); err != nil || status != 200 {
			b.Fatalf("status %s: %d %v %s", n.ID, status, err, out)
		}
	}
	reg.CheckHealth(context.Background())
	return reg, addr, nodes, stop
}

// BenchmarkReport is the status hot path without HTTP: decode a Cubelet-shaped report with a
// pooled decoder, apply it to one of 10,000 nodes, encode the answer. reports/s is the
// registry's ceiling on this machine's cores.
func BenchmarkReport(b *testing.B) {
	reg, _, nodes := benchRegistry(b, storetest.SQLite(b, modules...))
	body := nodesim.StatusBody(statusTemplate(b))(0, 0, nil)
	peer := netip.MustParseAddr("127.0.0.1")
	var next atomic.Int64
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var out []byte
		for pb.Next() {
			id := nodes[int(next.Add(1))%len(nodes)].ID
			dc := reg.dec.get()
			dc.buf.Write(body)
			sr := reg.statusRequest()
			if err := decodeStatus(dc, sr); err != nil {
				b.Fatal(err)
			}
			var err error
			if out, err = reg.report(ctx, id, sr, creds{}, peer, out[:0]); err != nil {
				b.Fatal(err)
			}
			reg.statuses.Put(sr)
			reg.dec.put(dc)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

// BenchmarkStatusHTTP is the ingestion ceiling over real HTTP: 32 keep-alive connections on
// 127.0.0.1 (load generator and server share this machine's cores) reporting for 10,000 nodes
// as fast as they are answered.
func BenchmarkStatusHTTP(b *testing.B) {
	_, addr, nodes := benchRegistry(b, storetest.SQLite(b, modules...))
	body := nodesim.StatusBody(statusTemplate(b))
	var next atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := nodesim.Dial(addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		var buf []byte
		for pb.Next() {
			i := int(next.Add(1)) % len(nodes)
			buf = body(i, 0, buf)
			if status, out, err := c.Do(http.MethodPost, nodesim.StatusPath(nodes[i].ID), "", buf); err != nil || status != 200 {
				b.Errorf("status: %d %v %s", status, err, out)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

// BenchmarkListNodes is GET /internal/v1/nodes for 10,000 nodes (target <= 100 ms), read to
// the last byte over HTTP: "build" encodes the list for every call (as after a change to the
// node set), "cached" answers from the listing cache (as between changes).
func BenchmarkListNodes(b *testing.B) {
	reg, addr, _ := benchRegistry(b, storetest.SQLite(b, modules...))
	for _, mode := range []string{"build", "cached"} {
		b.Run(mode, func(b *testing.B) {
			c, err := nodesim.Dial(addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var size int
			for b.Loop() {
				if mode == "build" {
					reg.listGen.Add(1)
				}
				status, out, err := c.Do(http.MethodGet, NodesPrefix, "", nil)
				if err != nil || status != 200 {
					b.Fatalf("list: %d %v", status, err)
				}
				size = len(out)
			}
			b.ReportMetric(float64(size)/1e6, "MB/list")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
		})
	}
}

// BenchmarkFlush writes the coalesced status of 10,000 nodes that all reported since the last
// flush: what the flusher does every second under full load.
func BenchmarkFlush(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			db := storetest.SQLite(b, modules...)
			if dialect == "postgres" {
				db = storetest.Postgres(b, modules...)
			}
			reg, _, _, stop := benchRegistryStop(b, db)
			stop()
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				for _, n := range reg.nodes() {
					n.statusDirty.Store(true)
				}
				if err := reg.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
