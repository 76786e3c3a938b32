package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestRetention: the sweep deletes the rows older than the retention (90 days by default), in
// batches, and keeps the others; it runs on one replica at a time (the audit.retention lease).
func TestRetention(t *testing.T) {
	storetest.Each(t, []store.Module{store.LeaseModule, audit.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
		var b audit.Batch
		add := func(n int, age time.Duration) {
			for range n {
				b.Add(audit.Entry{At: now.Add(-age).UnixMilli(), TenantID: "root", PrincipalID: "p", Method: "m", Outcome: audit.OutcomeOK})
			}
		}
		add(25000, 91*24*time.Hour) // past the default retention
		add(3, 89*24*time.Hour)
		add(2, time.Minute)
		if err := b.Flush(ctx, db); err != nil {
			t.Fatal(err)
		}
		clock := func() time.Time { return now }
		other := &audit.Sweeper{DB: db, Holder: "replica-b", Now: clock}
		one := &audit.Sweeper{DB: db, Holder: "replica-a", Now: clock}
		held, deleted, err := one.Pass(ctx)
		if err != nil || !held || deleted != 25000 {
			t.Fatalf("the first sweep: held %v, deleted %d, %v; want 25000", held, deleted, err)
		}
		if held, deleted, err := other.Pass(ctx); err != nil || held || deleted != 0 {
			t.Fatalf("another replica's sweep: held %v, deleted %d, %v; want the lease refused", held, deleted, err)
		}
		var left int
		db.QueryRow(`SELECT count(*) FROM audit_log`).Scan(&left)
		if left != 5 {
			t.Fatalf("%d rows left, want the 5 younger than 90 days", left)
		}
		week := &audit.Sweeper{DB: db, Holder: "replica-a", Now: clock, Retention: 7 * 24 * time.Hour}
		if _, deleted, err := week.Pass(ctx); err != nil || deleted != 3 {
			t.Fatalf("a 7-day retention deleted %d (%v), want 3", deleted, err)
		}
		keep := &audit.Sweeper{DB: db, Holder: "replica-a", Now: clock, Retention: -1}
		if _, deleted, err := keep.Pass(ctx); err != nil || deleted != 0 {
			t.Fatalf("a negative retention deleted %d (%v), want nothing", deleted, err)
		}
	})
}
