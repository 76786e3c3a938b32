package nodes

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestNodesListSeesEveryNode adds nodes while other goroutines list them: the cached sorted
// list must never keep missing a node added while it was being built.
func TestNodesListSeesEveryNode(t *testing.T) {
	r := fuzzRegistry()
	r.set.init(r.seed, new(atomic.Uint64))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					r.set.sorted()
				}
			}
		})
	}
	const n = 5000
	for i := range n {
		r.regMu.Lock()
		r.set.add(&node{id: fmt.Sprintf("10.9.%d.%d", i/250, i%250)})
		r.regMu.Unlock()
	}
	close(stop)
	wg.Wait()
	if got := len(r.set.sorted()); got != n {
		t.Fatalf("sorted() lists %d nodes, want %d", got, n)
	}
}
