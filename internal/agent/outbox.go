package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// EventsDir is the directory of the state directory that holds the sandbox events the control
// plane has not accepted yet, one file each (mode 0600): what the agent sends again after a
// restart. An event is removed once the control plane answers it 200 with a valid proof.
const EventsDir = "events"

// pendingEvent is one event waiting in the outbox. It holds no output (the output is read from
// the driver when the event is sent, so it is never copied to the state directory) and no
// environment value (no event does).
type pendingEvent struct {
	Seq       uint64               `json:"seq"`
	SandboxID string               `json:"sandbox_id"`
	Event     nodeapi.SandboxEvent `json:"event"`
	// Output is set on a final event of a sandbox the driver holds: its captured stdout and
	// stderr are attached when it is sent.
	Output bool `json:"output,omitempty"`
}

// key identifies an event: a sandbox reaches each state once (the control plane's idempotency
// key too).
func (p *pendingEvent) key() string { return p.SandboxID + "/" + string(p.Event.State) }

// outbox is the durable queue of sandbox events: a file per event in its directory, sent in
// the order they were queued (see Agent.sendEvents). Safe for concurrent use.
type outbox struct {
	dir string

	mu      sync.Mutex
	next    uint64
	pending map[string]*pendingEvent // by key
	wake    chan struct{}            // signalled when an event is queued
}

// openOutbox reads the events left in dir (created with mode 0700 when missing). A file that
// does not decode is an error naming it.
func openOutbox(dir string) (*outbox, error) {
	o := &outbox{dir: dir, next: 1, pending: map[string]*pendingEvent{}, wake: make(chan struct{}, 1)}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		p := new(pendingEvent)
		if err := json.Unmarshal(data, p); err != nil || p.SandboxID == "" || p.Seq == 0 {
			return nil, fmt.Errorf("%s: not a queued sandbox event (%v): move it away", filepath.Join(dir, e.Name()), err)
		}
		o.pending[p.key()] = p
		o.next = max(o.next, p.Seq+1)
	}
	return o, nil
}

func (o *outbox) path(seq uint64) string {
	return filepath.Join(o.dir, fmt.Sprintf("%020d.json", seq))
}

// add queues ev about sandbox id, durably, unless an event of the same sandbox and state is
// queued already (then it changes nothing). An event that cannot be written to the directory is
// queued in memory all the same, and the error says why it would not survive a restart.
func (o *outbox) add(id string, ev nodeapi.SandboxEvent, output bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := &pendingEvent{SandboxID: id, Event: ev, Output: output}
	if _, ok := o.pending[p.key()]; ok {
		return nil
	}
	p.Seq = o.next
	o.next++
	data, err := json.Marshal(p)
	if err == nil {
		err = atomicfile.WriteFile(o.path(p.Seq), data, 0o600)
	}
	o.pending[p.key()] = p
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return err
}

// has reports whether an event of sandbox id in state is queued.
func (o *outbox) has(id string, state nodeapi.SandboxState) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.pending[id+"/"+string(state)]
	return ok
}

// queued returns the queued events, oldest first.
func (o *outbox) queued() []*pendingEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*pendingEvent, 0, len(o.pending))
	for _, p := range o.pending {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pendingEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// done removes p, which the control plane accepted.
func (o *outbox) done(p *pendingEvent) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.pending, p.key())
	if err := os.Remove(o.path(p.Seq)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
