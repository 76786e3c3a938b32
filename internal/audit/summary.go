package audit

import (
	"fmt"
	"sync"
	"time"
)

// Summary rate-limits the audit rows of refused calls, so that a caller without credentials
// (or with a revoked key) costs the database a bounded number of rows however fast it calls
// and however it varies its calls. Refusals are grouped by a key the caller chooses (a peer
// address and a reason, a key id and a reason):
//
//   - the first refusal of a key that has been quiet is written at once (Count 1);
//   - the refusals after it, until its window (a minute) ends, only count; when the window
//     ends, one row stands for them all (Count n, the last one's details), written by the
//     next Note of the key or by Flush, whichever comes first;
//   - a key refused again in the next window stays summarized: a steady stream costs one row
//     a window, and a key is forgotten after a window without refusals.
//
// At most maxKeys keys are tracked one by one; past that, refusals of new keys are summarized
// together under one key. Summary is safe for concurrent use.
type Summary struct {
	window  int64 // ms
	maxKeys int
	now     func() time.Time
	mu      sync.Mutex
	keys    map[string]*summarized
}

// summarized is one key's current window.
type summarized struct {
	start int64 // Unix ms the window opened
	count int64 // refusals in it not written yet
	last  Entry // the last of them
}

// overflowKey summarizes the keys past maxKeys.
const overflowKey = "\x00more keys than are tracked one by one"

// NewSummary returns a Summary of windows of window (zero: a minute) tracking at most maxKeys
// keys one by one (zero: 10,000), on the clock now (nil: time.Now).
func NewSummary(window time.Duration, maxKeys int, now func() time.Time) *Summary {
	if window <= 0 {
		window = time.Minute
	}
	if maxKeys <= 0 {
		maxKeys = 10000
	}
	if now == nil {
		now = time.Now
	}
	return &Summary{window: window.Milliseconds(), maxKeys: maxKeys, now: now, keys: map[string]*summarized{}}
}

// Note counts e, a refusal of key at e.At (Unix ms), and returns the row to write now, if any:
// e itself when the key was quiet, or the summary of the key's window that just ended.
func (s *Summary) Note(key string, e Entry) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if k == nil && len(s.keys) >= s.maxKeys {
		key = overflowKey
		k = s.keys[key]
	}
	if k == nil {
		s.keys[key] = &summarized{start: e.At}
		e.Count = 1
		return e, true
	}
	if e.At < k.start+s.window {
		k.count++
		k.last = e
		return Entry{}, false
	}
	row, ok := k.row(key)
	if !ok { // a quiet window: e opens the next one, and is written at once
		k.start = e.At
		e.Count = 1
		return e, true
	}
	k.start, k.count, k.last = e.At, 1, e
	return row, true
}

// Flush returns the summary rows of the windows that have ended (and forgets the keys whose
// last window was quiet). Call it every few seconds, so that the last refusals of a stream
// that stopped are written within about a window.
func (s *Summary) Flush() []Entry {
	now := s.now().UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	for key, k := range s.keys {
		for now >= k.start+s.window {
			row, ok := k.row(key)
			if !ok {
				delete(s.keys, key)
				break
			}
			out = append(out, row)
			k.start += s.window
			k.count, k.last = 0, Entry{}
		}
	}
	return out
}

// Drain returns the summary rows of every window, ended or not, and forgets every key: what
// a process that stops writes last, so no counted refusal is lost.
func (s *Summary) Drain() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	for key, k := range s.keys {
		if row, ok := k.row(key); ok {
			out = append(out, row)
		}
	}
	clear(s.keys)
	return out
}

// Len returns how many keys are tracked.
func (s *Summary) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// row is the summary of k's window, if it counted any refusal.
func (k *summarized) row(key string) (Entry, bool) {
	if k.count == 0 {
		return Entry{}, false
	}
	e := k.last
	e.ID = ""
	e.Count = k.count
	what := "refusals like it"
	if key == overflowKey {
		what = "refusals of callers past those tracked one by one"
	}
	e.Message = fmt.Sprintf("%s (the last of %d %s since %s, in one row)", e.Message, k.count, what, time.UnixMilli(k.start).UTC().Format(time.RFC3339))
	return e, true
}
