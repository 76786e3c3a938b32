package nodestore_test

import (
	"context"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// BenchmarkFlush writes the coalesced status of 10,000 nodes that all reported since the last
// flush: what the flusher does every second under full load. (Each round marks every node
// reported again, as a failed flush's retry does.)
func BenchmarkFlush(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			db := storetest.SQLite(b, nodetest.Modules...)
			if dialect == "postgres" {
				db = storetest.Postgres(b, nodetest.Modules...)
			}
			env := nodetest.Bench(b, db)
			env.Stop()
			all := make([]nodes.Status, len(env.Nodes))
			for i, n := range env.Nodes {
				all[i].NodeID = n.ID
			}
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				nodestore.Retry(env.Store, all)
				if err := env.Store.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
