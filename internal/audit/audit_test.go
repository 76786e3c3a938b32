package audit_test

import (
	"context"
	"fmt"
	"strings"
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

// TestNewestIsTheTailOfTheLog: Newest returns the newest Limit rows oldest first and whether
// older ones match, ignoring a cursor; List pages forward from a cursor to the same rows.
func TestNewestIsTheTailOfTheLog(t *testing.T) {
	storetest.Each(t, []store.Module{audit.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var b audit.Batch
		for i := range 5 {
			b.Add(audit.Entry{At: int64(i), TenantID: "root", PrincipalID: "svc_x", Method: fmt.Sprintf("m%d", i), Permission: "p", Scope: "s", Outcome: audit.OutcomeOK})
		}
		b.Add(audit.Entry{At: 9, TenantID: "acme", PrincipalID: "svc_x", Method: "other", Permission: "p", Scope: "s", Outcome: audit.OutcomeOK})
		if err := b.Flush(ctx, db); err != nil {
			t.Fatal(err)
		}
		methods := func(es []audit.Entry) string {
			var s []string
			for _, e := range es {
				s = append(s, e.Method)
			}
			return strings.Join(s, ",")
		}
		for _, c := range []struct {
			limit     int
			want      string
			wantOlder bool
		}{{2, "m3,m4", true}, {4, "m1,m2,m3,m4", true}, {5, "m0,m1,m2,m3,m4", false}, {1000, "m0,m1,m2,m3,m4", false}} {
			got, older, err := audit.Newest(ctx, db, audit.Filter{TenantID: "root", Limit: c.limit, Cursor: "aud_ignored"})
			if err != nil || methods(got) != c.want || older != c.wantOlder {
				t.Errorf("Newest(limit %d) = %s, older %v, %v; want %s, older %v", c.limit, methods(got), older, err, c.want, c.wantOlder)
			}
		}
		first, next, err := audit.List(ctx, db, audit.Filter{TenantID: "root", Limit: 3})
		if err != nil || methods(first) != "m0,m1,m2" || next != first[2].ID {
			t.Fatalf("List first page = %s, next %q, %v", methods(first), next, err)
		}
		rest, next, err := audit.List(ctx, db, audit.Filter{TenantID: "root", Limit: 3, Cursor: next})
		if err != nil || methods(rest) != "m3,m4" || next != "" {
			t.Errorf("List after the cursor = %s, next %q, %v; want m3,m4 and no next page", methods(rest), next, err)
		}
	})
}
