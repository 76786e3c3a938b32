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
	Seq       uint64 `json:"seq"`
	SandboxID string `json:"sandbox_id"`
	// Key is what the event says of the sandbox, once per sandbox: keyRunning (it runs, or, for
	// a warm sandbox, is ready), keyClaimed (a warm sandbox's claim runs: a second running
	// event), or the final state.
	Key   string               `json:"key"`
	Event nodeapi.SandboxEvent `json:"event"`
	// Output is set on a final event of a sandbox the driver holds: its captured stdout and
	// stderr are attached when it is sent.
	Output bool `json:"output,omitempty"`

	// writing is set while add writes the event's file, and sentEarly once the event was
	// accepted meanwhile: the writer then removes the file it wrote. Both under outbox.mu.
	writing, sentEarly bool
}

// The keys of the events of a sandbox besides its final state.
const (
	keyRunning = "running" // state running: its process runs (or, warm, it is ready)
	keyClaimed = "claimed" // state running again: a warm sandbox's claim runs
)

// final reports whether key is a final state's.
func final(key string) bool { return key != keyRunning && key != keyClaimed }

// id identifies an event in the outbox.
func (p *pendingEvent) id() string { return p.SandboxID + "/" + p.Key }

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
		if err := json.Unmarshal(data, p); err != nil || p.SandboxID == "" || p.Key == "" || p.Seq == 0 {
			return nil, fmt.Errorf("%s: not a queued sandbox event (%v): move it away", filepath.Join(dir, e.Name()), err)
		}
		o.pending[p.id()] = p
		o.next = max(o.next, p.Seq+1)
	}
	return o, nil
}

func (o *outbox) path(seq uint64) string {
	return filepath.Join(o.dir, fmt.Sprintf("%020d.json", seq))
}

// add queues ev about sandbox id under key, durably, unless an event of the same sandbox and
// key is queued already (then it changes nothing). The sender is woken first: the event is
// sent while its file is written and synced (the file is what a restarted agent sends again,
// and the control plane takes an event twice without harm), and add returns once the file is
// written. An event that cannot be written to the directory is queued in memory all the same,
// and the error says why it would not survive a restart.
func (o *outbox) add(id, key string, ev nodeapi.SandboxEvent, output bool) error {
	o.mu.Lock()
	p := &pendingEvent{SandboxID: id, Key: key, Event: ev, Output: output}
	if _, ok := o.pending[p.id()]; ok {
		o.mu.Unlock()
		return nil
	}
	p.Seq = o.next
	o.next++
	p.writing = true
	o.pending[p.id()] = p
	select {
	case o.wake <- struct{}{}:
	default:
	}
	data, err := json.Marshal(p) // p's exported fields do not change once queued
	o.mu.Unlock()
	if err == nil {
		err = atomicfile.WriteFile(o.path(p.Seq), data, 0o600)
	}
	o.mu.Lock()
	p.writing = false
	accepted := p.sentEarly
	o.mu.Unlock()
	if accepted && err == nil {
		if err := o.remove(p); err != nil {
			return fmt.Errorf("%w: %w", errSentEventLeft, err)
		}
	}
	return err
}

// errSentEventLeft is add's error when the file of an event the control plane accepted while it
// was written cannot be removed: a restarted agent sends it again.
var errSentEventLeft = errors.New("cannot remove a sent sandbox event from the state directory: it is sent again after a restart")

// has reports whether an event of sandbox id with one of keys is queued; with none, whether any
// final one is.
func (o *outbox) has(id string, keys ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.pending {
		if p.SandboxID == id && (len(keys) == 0 && final(p.Key) || slices.Contains(keys, p.Key)) {
			return true
		}
	}
	return false
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

// done removes p, which the control plane accepted. While add still writes p's file, add
// removes it once written.
func (o *outbox) done(p *pendingEvent) error {
	o.mu.Lock()
	delete(o.pending, p.id())
	if p.writing {
		p.sentEarly = true
		o.mu.Unlock()
		return nil
	}
	o.mu.Unlock()
	return o.remove(p)
}

// remove deletes p's file.
func (o *outbox) remove(p *pendingEvent) error {
	if err := os.Remove(o.path(p.Seq)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
