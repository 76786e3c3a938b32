package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestLeaseHolders: one holder at a time; Held ends Margin before the expiry of the last renewal; a
// holder that stops renewing is replaced once its lease expired; OnTake runs before Held and an
// error from it leaves the replica not holding; Release hands over at once.
func TestLeaseHolders(t *testing.T) {
	storetest.Each(t, []store.Module{store.LeaseModule}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var mu sync.Mutex
		now := time.UnixMilli(1_800_000_000_000)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		var events []string
		lease := func(holder string, take error) *store.Lease {
			l, err := db.NewLease(store.LeaseConfig{Name: "loops", Holder: holder, TTL: time.Second, Margin: 300 * time.Millisecond, Now: clock,
				OnTake: func(context.Context) error { events = append(events, holder+" take"); return take },
				OnLose: func() { events = append(events, holder+" lose") }})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		a, b, c := lease("a", nil), lease("b", nil), lease("c", errors.New("cannot read its state"))
		if held, err := a.Try(ctx); !held || err != nil {
			t.Fatalf("a: %v %v", held, err)
		}
		if held, _ := b.Try(ctx); held {
			t.Fatal("b holds a lease a holds")
		}
		advance(800 * time.Millisecond)
		if a.Held() {
			t.Error("a counts itself the holder past TTL - Margin")
		}
		if held, _ := b.Try(ctx); held {
			t.Error("b took a lease that has not expired")
		}
		advance(300 * time.Millisecond) // a stopped renewing: its lease expired
		if held, _ := c.Try(ctx); held {
			t.Error("c holds although its OnTake failed")
		}
		if held, _ := b.Try(ctx); held {
			t.Error("b took the lease c's failed take renewed")
		}
		advance(1100 * time.Millisecond)
		if held, _ := b.Try(ctx); !held {
			t.Fatal("b did not take the expired lease over")
		}
		if held, _ := a.Try(ctx); held {
			t.Error("a still holds after b took over")
		}
		b.Release(ctx)
		if held, _ := a.Try(ctx); !held {
			t.Error("a did not take the released lease")
		}
		want := "a take,c take,b take,a lose,b lose,a take"
		if got := strings.Join(events, ","); got != want {
			t.Errorf("events %s, want %s", got, want)
		}
	})
}
