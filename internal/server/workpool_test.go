package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// granted reports whether c has been granted a slot within a moment.
func granted(c <-chan func()) (func(), bool) {
	select {
	case f := <-c:
		return f, true
	case <-time.After(100 * time.Millisecond):
		return nil, false
	}
}

// want starts acquiring a slot of kind and returns where its release func arrives.
func want(t *testing.T, p *workPool, kind int) <-chan func() {
	c := make(chan func(), 1)
	go func() {
		f, err := p.acquire(context.Background(), kind)
		if err != nil {
			t.Error(err)
			return
		}
		c <- f
	}()
	time.Sleep(20 * time.Millisecond) // queued in this order
	return c
}

// TestWorkPoolOrder: the pool runs at most its slots; a freed slot goes to a waiting write
// before waiting reads while writes hold less than half the slots, and to a read once they
// hold their half.
func TestWorkPoolOrder(t *testing.T) {
	p := newWorkPool(2)
	r1, r2 := want(t, p, workRead), want(t, p, workRead)
	rel1, ok1 := granted(r1)
	rel2, ok2 := granted(r2)
	if !ok1 || !ok2 {
		t.Fatal("two reads in a pool of two do not both run")
	}
	r3 := want(t, p, workRead)
	w1 := want(t, p, workWrite)
	w2 := want(t, p, workWrite)
	r4 := want(t, p, workRead)
	if _, ok := granted(r3); ok {
		t.Fatal("a third read runs in a pool of two")
	}
	rel1()
	relW1, ok := granted(w1)
	if !ok {
		t.Fatal("the slot a read freed did not go to the waiting write")
	}
	rel2()
	// Writes hold their half (one slot): the next slot goes to the oldest read, not to w2.
	relR3, ok := granted(r3)
	if !ok {
		t.Fatal("with writes at their share, the freed slot did not go to the oldest read")
	}
	if _, ok := granted(w2); ok {
		t.Fatal("a second write ran while writes held their share and reads waited")
	}
	relW1()
	relW2, ok := granted(w2) // writes below their share again: the write goes first
	if !ok {
		t.Fatal("the slot the first write freed did not go to the second")
	}
	relR3()
	relR4, ok := granted(r4)
	if !ok {
		t.Fatal("the last read never ran")
	}
	relW2()
	relR4()
	if p.running != [2]int{} || len(p.queue[workRead])+len(p.queue[workWrite]) != 0 {
		t.Fatalf("after every release: running %v, queued %d and %d", p.running, len(p.queue[workRead]), len(p.queue[workWrite]))
	}
}

// TestWorkPoolLimits: a call whose context ends while it waits leaves the queue; a call that
// finds maxQueued waiting is RESOURCE_EXHAUSTED.
func TestWorkPoolLimits(t *testing.T) {
	p := newWorkPool(1)
	rel, err := p.acquire(context.Background(), workWrite)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.acquire(ctx, workRead); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its context = %v", err)
	}
	if n := len(p.queue[workRead]); n != 0 {
		t.Fatalf("%d calls left in the queue after their context ended", n)
	}
	var wg sync.WaitGroup
	stop, cancelAll := context.WithCancel(context.Background())
	for range maxQueued {
		wg.Go(func() { p.acquire(stop, workRead) })
	}
	for p.queued() < maxQueued {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := p.acquire(context.Background(), workRead); !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) {
		t.Fatalf("a call past a full queue = %v, want RESOURCE_EXHAUSTED", err)
	}
	cancelAll()
	wg.Wait()
	rel()
}

func (p *workPool) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue[workRead]) + len(p.queue[workWrite])
}

// TestAPICallsShareThePool: API calls run in the work pool: with two slots, twenty concurrent
// reads run two at a time, and a write sent after them runs in the first slot a read frees.
func TestAPICallsShareThePool(t *testing.T) {
	e := mustStart(t, nil, func(c *Config) { c.APIWorkers = 2 })
	gate := make(chan struct{})
	var inside, most atomic.Int32
	var order []string
	var mu sync.Mutex
	e.srv.hooks.working = func(method string) {
		mu.Lock()
		order = append(order, method)
		mu.Unlock()
		if method != "iam.tenants.list" {
			return
		}
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-gate
		inside.Add(-1)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { e.post(e.admin, "iam.tenants.list", map[string]any{}) })
	}
	testkit.WaitFor(t, 30*time.Second, "two reads running and eighteen queued", func() bool {
		return inside.Load() == 2 && e.srv.pool.queued() == 18
	})
	if n := most.Load(); n != 2 {
		t.Fatalf("%d reads ran at once with --api-workers 2", n)
	}
	created := make(chan int)
	go func() {
		status, _ := e.post(e.admin, "iam.tenants.create", map[string]any{"id": "t-pool"})
		created <- status
	}()
	testkit.WaitFor(t, 30*time.Second, "the write queued", func() bool { return e.srv.pool.queued() == 19 })
	gate <- struct{}{} // one read ends: its slot goes to the write
	select {
	case status := <-created:
		if status != http.StatusOK {
			t.Fatalf("iam.tenants.create: %d", status)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not get the slot a read freed")
	}
	close(gate)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i, m := range order {
		if m == "iam.tenants.create" && i != 2 {
			t.Errorf("the write ran %dth of %d calls, want 3rd (in the first freed slot)", i+1, len(order))
		}
	}
}
