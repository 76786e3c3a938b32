package nodes_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodesim"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// BenchmarkReport is the status hot path without HTTP: decode a Cubelet-shaped report with a
// pooled decoder, apply it to one of 10,000 nodes, encode the answer. reports/s is the
// registry's ceiling on this machine's cores.
func BenchmarkReport(b *testing.B) {
	env := nodetest.Bench(b, storetest.SQLite(b, nodetest.Modules...))
	reg, ns := env.Reg, env.Nodes
	body := nodesim.StatusBody(nodetest.StatusTemplate())(0, 0, nil)
	var decoders nodeapi.DecoderPool
	var next atomic.Int64
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var out []byte
		var sr nodeapi.StatusRequest
		for pb.Next() {
			id := ns[int(next.Add(1))%len(ns)].ID
			dc := decoders.Get()
			dc.Write(body)
			sr.Reset()
			if err := dc.Status(&sr); err != nil {
				b.Fatal(err)
			}
			var err error
			if out, err = reg.Report(ctx, id, &sr, nodes.Credential{}, out[:0]); err != nil {
				b.Fatal(err)
			}
			decoders.Put(dc)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}
