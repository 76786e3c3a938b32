package audit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/audit"
)

// clock is an injected clock in Unix ms.
type clock struct{ at int64 }

func (c *clock) now() time.Time      { return time.UnixMilli(c.at) }
func (c *clock) add(d time.Duration) { c.at += d.Milliseconds() }

func refusal(c *clock, target string) audit.Entry {
	return audit.Entry{At: c.at, TenantID: "root", PrincipalID: "anonymous", Method: "node-agent.status", Outcome: "unauthenticated", Target: target, Message: "refused"}
}

// TestSummaryFirstAtOnceThenOnePerWindow: the first refusal of a key is written at once; the
// refusals after it in the same window are one row with their count when the window ends,
// and a key refused without pause costs one row a window, however its calls vary (the node
// id in the path, say). A key that goes quiet is forgotten after a quiet window.
func TestSummaryFirstAtOnceThenOnePerWindow(t *testing.T) {
	c := &clock{at: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC).UnixMilli()}
	s := audit.NewSummary(time.Minute, 100, c.now)
	var rows []audit.Entry
	note := func(key, target string) {
		if e, ok := s.Note(key, refusal(c, target)); ok {
			rows = append(rows, e)
		}
	}
	note("127.0.0.1 not_allowed", "n0")
	if len(rows) != 1 || rows[0].Count != 1 || rows[0].Target != "n0" {
		t.Fatalf("the first refusal: %+v, want one row at once", rows)
	}
	// Ten minutes of refusals, one every 10 ms, each naming another node.
	for i := range 60000 {
		c.add(10 * time.Millisecond)
		note("127.0.0.1 not_allowed", fmt.Sprintf("n%d", i+1))
		if i%1000 == 0 {
			rows = append(rows, s.Flush()...)
		}
	}
	if len(rows) < 10 || len(rows) > 12 {
		t.Fatalf("ten minutes of refusals wrote %d rows, want one a minute", len(rows))
	}
	c.add(2 * time.Minute)
	rows = append(rows, s.Flush()...)
	total := int64(0)
	for _, r := range rows {
		total += r.Count
	}
	if total != 60001 {
		t.Fatalf("the rows count %d refusals, want 60001", total)
	}
	summary := rows[1]
	if summary.Count != 5999 || summary.Target != "n5999" || summary.Message == "refused" {
		t.Errorf("the first minute's summary row: %+v, want count 5999, the last call's target and a message saying so", summary)
	}
	if s.Len() != 0 {
		t.Errorf("%d keys remembered after a quiet window", s.Len())
	}
	// Quiet again: the next refusal is written at once.
	note("127.0.0.1 not_allowed", "again")
	if got := rows[len(rows)-1]; got.Target != "again" || got.Count != 1 {
		t.Errorf("a refusal after a quiet window: %+v, want it written at once", got)
	}
}

// TestSummaryBoundsItsKeys: past its bound of keys, new keys count into one summary, so a
// caller with ever new keys (peers) still costs a bounded number of rows.
func TestSummaryBoundsItsKeys(t *testing.T) {
	c := &clock{at: 1e12}
	s := audit.NewSummary(time.Minute, 10, c.now)
	written := 0
	for i := range 10000 {
		if _, ok := s.Note(fmt.Sprintf("10.0.%d.%d not_allowed", i/256, i%256), refusal(c, "n")); ok {
			written++
		}
	}
	c.add(time.Minute)
	flushed := s.Flush()
	if written > 11 || len(flushed) > 11 {
		t.Fatalf("10,000 keys wrote %d rows at once and %d at the window's end, want at most 11 each", written, len(flushed))
	}
	total := int64(written)
	for _, r := range flushed {
		total += r.Count
	}
	if total != 10000 {
		t.Fatalf("the rows count %d refusals, want 10000", total)
	}
}

// TestSummaryDrain: a process that stops writes the windows still open, so the refusals they
// counted are not lost.
func TestSummaryDrain(t *testing.T) {
	c := &clock{at: 1e12}
	s := audit.NewSummary(time.Minute, 10, c.now)
	for i := range 5 {
		s.Note("127.0.0.1 not_allowed", refusal(c, fmt.Sprint(i)))
		s.Note("127.0.0.2 not_allowed", refusal(c, fmt.Sprint(i)))
	}
	if rows := s.Flush(); len(rows) != 0 {
		t.Fatalf("Flush within the window wrote %d rows", len(rows))
	}
	rows := s.Drain()
	total := int64(0)
	for _, r := range rows {
		total += r.Count
	}
	if len(rows) != 2 || total != 8 {
		t.Fatalf("Drain: %d rows counting %d refusals, want 2 rows counting the 8 after the first of each peer", len(rows), total)
	}
	if s.Len() != 0 || len(s.Drain()) != 0 {
		t.Errorf("keys left after Drain")
	}
}
