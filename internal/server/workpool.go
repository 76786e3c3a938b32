package server

import (
	"context"
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cubefleet/cubefleet"
)

// The API's work pool bounds how many API calls run at once (Config.APIWorkers, by default
// one per CPU the Go runtime uses, at least two), so fifty clients listing objects in a loop
// cannot each take an equal share of the machine from a fleet apply. Calls wait their turn in
// two queues, reads and writes, each first come first served; a freed slot goes to the oldest
// waiting write while writes hold less than their share (half the slots, rounded up), else to
// the oldest waiting read, so a long write keeps its share against any number of readers and
// writes never shut reads out. Only the call's own work holds a slot: reading the body before
// and writing the answer after do not, so a slow client holds none.

// maxQueued bounds the calls waiting for a slot; one more is RESOURCE_EXHAUSTED.
const maxQueued = 1024

// errBusy is the answer to a call that finds the queue full.
var errBusy = &cubefleet.Error{Code: cubefleet.CodeResourceExhausted,
	Message: "the server has as many API calls waiting as it queues: retry shortly"}

// workPool is the API's work pool. The zero value is not usable; use newWorkPool.
type workPool struct {
	mu         sync.Mutex
	slots      int // how many calls run at once
	writeShare int // the slots writes are first in line for
	running    [2]int
	queue      [2][]chan struct{} // waiting calls by kind, oldest first; a grant closes the channel
	gauge      *prometheus.GaugeVec
}

// Kinds of work.
const (
	workRead  = 0
	workWrite = 1
)

var workKinds = [2]string{"read", "write"}

// newWorkPool returns a pool of slots slots; slots <= 0 means one per GOMAXPROCS, at least 2.
func newWorkPool(slots int) *workPool {
	if slots <= 0 {
		slots = max(2, runtime.GOMAXPROCS(0))
	}
	p := &workPool{slots: slots, writeShare: (slots + 1) / 2,
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cubefleet_api_calls",
			Help: "API calls in the work pool by kind (read, write) and state: running (holding one of --api-workers slots) or queued.",
		}, []string{"kind", "state"})}
	p.observe()
	return p
}

// acquire waits for a slot for a call of kind (workRead or workWrite) and returns the func
// that gives it back. Errors: RESOURCE_EXHAUSTED when maxQueued calls wait already, ctx's error
// when it ends first.
func (p *workPool) acquire(ctx context.Context, kind int) (func(), error) {
	p.mu.Lock()
	if len(p.queue[workRead])+len(p.queue[workWrite]) >= maxQueued {
		p.mu.Unlock()
		return nil, errBusy
	}
	ready := make(chan struct{})
	p.queue[kind] = append(p.queue[kind], ready)
	p.dispatch()
	p.mu.Unlock()
	release := func() {
		p.mu.Lock()
		p.running[kind]--
		p.dispatch()
		p.mu.Unlock()
	}
	select {
	case <-ready:
		return release, nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-ready: // granted meanwhile: give it back
		p.running[kind]--
		p.dispatch()
	default:
		for i, c := range p.queue[kind] {
			if c == ready {
				p.queue[kind] = append(p.queue[kind][:i], p.queue[kind][i+1:]...)
				break
			}
		}
		p.observe()
	}
	return nil, ctx.Err()
}

// dispatch grants free slots to waiting calls, writes first while they hold less than their
// share. p.mu is held.
func (p *workPool) dispatch() {
	for p.running[workRead]+p.running[workWrite] < p.slots {
		kind := workRead
		if len(p.queue[workWrite]) > 0 && (p.running[workWrite] < p.writeShare || len(p.queue[workRead]) == 0) {
			kind = workWrite
		} else if len(p.queue[workRead]) == 0 {
			break
		}
		close(p.queue[kind][0])
		p.queue[kind] = p.queue[kind][1:]
		p.running[kind]++
	}
	p.observe()
}

// observe sets the gauge. p.mu is held.
func (p *workPool) observe() {
	for k, name := range workKinds {
		p.gauge.WithLabelValues(name, "running").Set(float64(p.running[k]))
		p.gauge.WithLabelValues(name, "queued").Set(float64(len(p.queue[k])))
	}
}
