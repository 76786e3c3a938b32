package nodes

import (
	"fmt"
	"sync"
	"testing"
)

// TestNodesListSeesEveryNode adds nodes while other goroutines list them: the cached sorted
// list must never keep missing a node added while it was being built.
func TestNodesListSeesEveryNode(t *testing.T) {
	r := fuzzRegistry()
	for i := range r.shards {
		r.shards[i].m = map[string]*node{}
	}
	r.creds, r.misses = map[string]string{}, map[string]int64{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					r.nodes()
				}
			}
		})
	}
	const n = 5000
	for i := range n {
		r.regMu.Lock()
		r.add(&node{id: fmt.Sprintf("10.9.%d.%d", i/250, i%250)})
		r.regMu.Unlock()
	}
	close(stop)
	wg.Wait()
	if got := len(r.nodes()); got != n {
		t.Fatalf("nodes() lists %d nodes, want %d", got, n)
	}
}
