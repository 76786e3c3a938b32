package nodehttp_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodesim"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// BenchmarkStatusHTTP is the ingestion ceiling over real HTTP: 32 keep-alive connections on
// 127.0.0.1 (load generator and server share this machine's cores) reporting for 10,000 nodes
// as fast as they are answered.
func BenchmarkStatusHTTP(b *testing.B) {
	env := nodetest.Bench(b, storetest.SQLite(b, nodetest.Modules...))
	addr, nodes := env.Addr, env.Nodes
	body := nodesim.StatusBody(nodetest.StatusTemplate())
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
			if status, out, err := c.Do(http.MethodPost, nodeapi.StatusPath(nodes[i].ID), "", buf); err != nil || status != 200 {
				b.Errorf("status: %d %v %s", status, err, out)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

// BenchmarkListNodes is GET /internal/v1/nodes for 10,000 nodes (target <= 100 ms), read to
// the last byte over HTTP: "build" encodes the list for every call (as after a change to the
// node set: each call relabels a node with nothing, which changes the list's generation),
// "cached" answers from the listing cache (as between changes).
func BenchmarkListNodes(b *testing.B) {
	env := nodetest.Bench(b, storetest.SQLite(b, nodetest.Modules...))
	reg, addr, first := env.Reg, env.Addr, env.Nodes[0].ID
	ctx := context.Background()
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
					if _, err := reg.Label(ctx, first, nil, nil); err != nil {
						b.Fatal(err)
					}
				}
				status, out, err := c.Do(http.MethodGet, nodeapi.NodesPrefix, "", nil)
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
