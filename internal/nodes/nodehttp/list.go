package nodehttp

import (
	"sync"
	"sync/atomic"
	"time"
)

// appendList appends the SchedulerNode array of the nodes in want (nil: every node), timed.
func (h *Handler) appendList(dst []byte, want map[string]bool, scoreOnly bool) []byte {
	start := time.Now()
	dst = h.reg.AppendList(dst, want, scoreOnly)
	h.m.listTime.Observe(time.Since(start).Seconds())
	return dst
}

// Listing cache. CubeMaster-style readers poll the whole list every second; encoding 10,000
// nodes takes tens of milliseconds of CPU, and longer on a busy machine. So the full list is
// kept encoded: a GET answers it while it reflects the current set of nodes and their static
// fields (nodes.Registry.ListGeneration) and is at most listMaxAge old, and Run rebuilds it every
// listRefresh, off the request path, from the start (so even the first GET after a start or
// a quiet spell finds it ready). A node added, removed, cordoned, relabelled or changing state
// makes the next GET build afresh unless the loop got there first. Two buffers take turns
// (some 18 MB each for 10,000 nodes), so rebuilding makes no garbage; keeping the list warm
// costs about 2% of one core at 10,000 nodes.
const (
	// listBytesPerNode is the room a listed node's JSON takes (a Cubelet's is some 1.8 KB).
	listBytesPerNode = 2048
	listMaxAge       = time.Second
	listRefresh      = 500 * time.Millisecond
)

// listCache is the encoded full list: the current snapshot and a spare buffer.
type listCache struct {
	build sync.Mutex // serializes builds; guards spare
	cur   atomic.Pointer[listSnapshot]
	spare *listSnapshot
}

// listSnapshot is one encoded list. Readers hold mu (shared) while they write body out; a
// build holds it (exclusive) while it refills a spare snapshot.
type listSnapshot struct {
	mu   sync.RWMutex
	gen  uint64
	at   time.Time
	body []byte
}

func (s *listSnapshot) fresh(gen uint64, maxAge time.Duration) bool {
	return s.gen == gen && time.Since(s.at) <= maxAge
}

// cachedList returns the full list, from the cache when it is current, read-locked: the caller
// writes s.body out and then calls s.mu.RUnlock.
func (h *Handler) cachedList() *listSnapshot {
	if s := h.listing.cur.Load(); s != nil {
		s.mu.RLock()
		if s.fresh(h.reg.ListGeneration(), listMaxAge) {
			return s
		}
		s.mu.RUnlock()
	}
	return h.buildList(false, true)
}

// buildList encodes the full list into the spare buffer and makes it current. Concurrent
// callers share one build; refresh (the background loop) builds only when the current list is
// older than listRefresh. With rlock the current snapshot is returned read-locked.
func (h *Handler) buildList(refresh, rlock bool) *listSnapshot {
	c := &h.listing
	c.build.Lock()
	defer c.build.Unlock()
	gen := h.reg.ListGeneration()
	maxAge := listMaxAge
	if refresh {
		maxAge = listRefresh
	}
	if s := c.cur.Load(); s != nil && s.fresh(gen, maxAge) {
		if rlock {
			s.mu.RLock()
		}
		return s // built while this caller waited
	}
	next := c.spare
	if next == nil || !next.mu.TryLock() { // still being written out: take a new buffer
		next = &listSnapshot{}
		next.mu.Lock()
	}
	next.gen, next.at = gen, time.Now()
	if want := h.reg.Len()*listBytesPerNode + 64; cap(next.body) < want {
		next.body = make([]byte, 0, want) // sized once, so appending never doubles it
	}
	next.body = h.appendList(next.body[:0], nil, false)
	c.spare = c.cur.Swap(next)
	next.mu.Unlock()
	if rlock {
		next.mu.RLock()
	}
	return next
}

// refreshList rebuilds the cached list unless it is current (Run calls it at the start and
// every listRefresh).
func (h *Handler) refreshList() {
	if h.reg.Len() > 0 {
		h.buildList(true, false)
	}
}
