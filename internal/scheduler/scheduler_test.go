package scheduler

import (
	"context"
	"testing"

	"github.com/cubefleet/cubefleet"
)

func TestDecideSpreadsAndReserves(t *testing.T) {
	c := newClock()
	s := newScheduler(t, c, Config{})
	for _, id := range []string{"n1", "n2", "n3"} {
		s.Update(node(c, id, 4000, 16384, 10))
	}
	counts := map[string]int{}
	for i := range 30 {
		d := mustDecide(t, s, req(sbx(i), 100, 256))
		counts[d.NodeID]++
	}
	for id, n := range counts {
		if n != 10 {
			t.Errorf("node %s got %d of 30 sandboxes, want 10 each: %v", id, n, counts)
		}
	}
	// Every microVM slot is reserved now: the next decision is refused with the reason.
	_, err := s.Decide(context.Background(), req("sbx_x", 100, 256))
	if !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
		t.Fatalf("31st decision: %v, want RESOURCE_EXHAUSTED", err)
	}
	if want := "no node can take the sandbox: 3 nodes: 3 microVM limit reached"; err.(*cubefleet.Error).Message != want {
		t.Errorf("message %q, want %q", err.(*cubefleet.Error).Message, want)
	}
}
