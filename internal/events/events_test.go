package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestAppendAndList(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var evs []events.Event
		for i := range 120 {
			typ := "node.suspect"
			if i%3 == 0 {
				typ = "node.lost"
			}
			evs = append(evs, events.Event{At: int64(1000 + i), TenantID: "root", Type: typ, Subject: fmt.Sprintf("10.0.0.%d", i%4),
				Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		}
		evs = append(evs, events.Event{At: 5000, TenantID: "acme", Type: "node.lost", Subject: "x"})
		if err := events.Append(ctx, db, evs...); err != nil {
			t.Fatal(err)
		}
		// Paging returns every root event once, oldest first.
		var got []events.Event
		cursor := ""
		for {
			page, next, err := events.List(ctx, db, events.Filter{TenantID: "root", Limit: 50, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page...)
			if next == "" {
				break
			}
			cursor = next
		}
		if len(got) != 120 {
			t.Fatalf("got %d events, want 120", len(got))
		}
		for i, e := range got {
			if e.At != int64(1000+i) || string(e.Data) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Fatalf("event %d = %+v", i, e)
			}
		}
		for _, c := range []struct {
			f    events.Filter
			want int
		}{
			{events.Filter{TenantID: "root", Type: "node.lost"}, 40},
			{events.Filter{TenantID: "root", Type: "node."}, 100}, // default limit
			{events.Filter{TenantID: "root", Type: "node.", Limit: 1000}, 120},
			{events.Filter{TenantID: "root", Subject: "10.0.0.1", Limit: 1000}, 30},
			{events.Filter{TenantID: "root", Since: 1100, Limit: 1000}, 20},
			{events.Filter{TenantID: "acme"}, 1},
			{events.Filter{TenantID: "root", Type: "sandbox."}, 0},
		} {
			page, _, err := events.List(ctx, db, c.f)
			if err != nil || len(page) != c.want {
				t.Errorf("List(%+v) = %d events (%v), want %d", c.f, len(page), err, c.want)
			}
		}

		// Newest: the tail of what matches, oldest first, and whether older events match.
		for _, c := range []struct {
			f          events.Filter
			first, n   int // the first event's i and the count
			olderExist bool
		}{
			{events.Filter{TenantID: "root", Limit: 10}, 110, 10, true},
			{events.Filter{TenantID: "root", Limit: 120}, 0, 120, false},
			{events.Filter{TenantID: "root", Type: "node.lost", Limit: 5}, 105, 5, true}, // i = 105, 108, ..., 117
			{events.Filter{TenantID: "root", Since: 1115, Limit: 10, Cursor: "ignored"}, 115, 5, false},
		} {
			page, older, err := events.Newest(ctx, db, c.f)
			if err != nil || len(page) != c.n || older != c.olderExist || page[0].At != int64(1000+c.first) {
				t.Fatalf("Newest(%+v) = %d events from %v, older %v (%v); want %d from i=%d, older %v", c.f, len(page), page[0].At, older, err, c.n, c.first, c.olderExist)
			}
			for i := 1; i < len(page); i++ {
				if page[i].ID <= page[i-1].ID {
					t.Fatalf("Newest(%+v) is not oldest first at %d", c.f, i)
				}
			}
		}
	})
}

// TestAppendRetried: appending events again with the ids they got (a batch retried after a
// commit whose outcome was unknown) writes nothing twice and fails nothing.
func TestAppendRetried(t *testing.T) {
	storetest.Each(t, []store.Module{events.Module}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		evs := []events.Event{{At: 1, TenantID: "root", Type: "node.joined", Subject: "a"}, {At: 2, TenantID: "root", Type: "node.lost", Subject: "a"}}
		if err := events.Append(ctx, db, evs...); err != nil {
			t.Fatal(err)
		}
		if evs[0].ID == "" || evs[1].ID == "" {
			t.Fatalf("ids not assigned in place: %+v", evs)
		}
		if err := events.Append(ctx, db, evs...); err != nil {
			t.Fatalf("the retried batch: %v", err)
		}
		got, _, err := events.List(ctx, db, events.Filter{TenantID: "root"})
		if err != nil || len(got) != 2 {
			t.Fatalf("%d events after the retry (%v), want 2", len(got), err)
		}
	})
}
