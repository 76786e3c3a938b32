package audit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestBatchWritesEveryEntryInOrder(t *testing.T) {
	storetest.Each(t, []store.Module{audit.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var b audit.Batch
		const n = 1201 // 25 INSERTs, the last one short
		for i := range n {
			b.Add(audit.Entry{At: int64(i), TenantID: "root", PrincipalID: "svc_x", Method: fmt.Sprintf("m%04d", i), Permission: "p", Scope: "s", Outcome: audit.OutcomeOK})
		}
		if err := b.Flush(ctx, db); err != nil {
			t.Fatal(err)
		}
		if b.Len() != 0 {
			t.Fatalf("batch holds %d entries after Flush", b.Len())
		}
		var got []audit.Entry
		cursor := ""
		for {
			page, next, err := audit.List(ctx, db, audit.Filter{TenantID: "root", Limit: 1000, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page...)
			if next == "" {
				break
			}
			cursor = next
		}
		if len(got) != n {
			t.Fatalf("listed %d rows, want %d", len(got), n)
		}
		for i, e := range got {
			if e.Method != fmt.Sprintf("m%04d", i) {
				t.Fatalf("row %d is %s: order lost", i, e.Method)
			}
		}
		if err := b.Flush(ctx, db); err != nil {
			t.Fatalf("flushing an empty batch: %v", err)
		}
	})
}
