package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// The sandboxes of the node: what the agent does with the control plane's assignments (see
// docs/agent.md, "The work loop"). Every sandbox the agent takes gets a record in the state
// directory (SandboxesDir), written once its driver holds it (or once it was refused); it
// outlives the driver's copy by TombstoneRetention, so that a sandbox id starts at most once
// however often its start is delivered, also after its result was accepted and its directory
// removed. Every state a sandbox reaches becomes an event in the outbox; once its final event is
// accepted, the driver removes it (its directory and user are free again).

// SandboxesDir is the directory of the state directory that holds the record of each sandbox
// the agent took (mode 0600, no environment value): its template, limits, and how far its events
// went.
const SandboxesDir = "sandboxes"

// TemplatesFile is the file of the state directory that lists the templates prepared on the
// node (reported as local_templates).
const TemplatesFile = "templates.json"

// TombstoneRetention is how long the record of a sandbox is kept after the driver removed it.
const TombstoneRetention = 24 * time.Hour

// sandboxRecord is what the agent keeps of a sandbox it took: never its environment.
type sandboxRecord struct {
	ID            string    `json:"id"`
	TemplateID    string    `json:"template_id,omitempty"`
	Warm          bool      `json:"warm,omitempty"` // taken by a warm assignment
	CPUMillicores int64     `json:"cpu_millicores,omitempty"`
	MemoryMiB     int64     `json:"memory_mib,omitempty"`
	DiskMiB       int64     `json:"disk_mib,omitempty"`
	At            time.Time `json:"at"`
	// Sent lists the keys of its events the control plane accepted (pendingEvent.Key).
	Sent []string `json:"sent,omitempty"`
	// Removed is when the driver forgot it; the record is a tombstone from then on.
	Removed time.Time `json:"removed,omitzero"`
}

// ended reports whether the control plane accepted the sandbox's final event.
func (rec *sandboxRecord) ended() bool { return slices.ContainsFunc(rec.Sent, final) }

// tracked is a sandbox the agent knows of.
type tracked struct {
	rec  sandboxRecord
	live bool // warm or running, by the driver's last word
	warm bool // warm, not claimed
	// changed is closed, and replaced, whenever the control plane accepts an event of it.
	changed chan struct{}
	// writeMu is held while its record is written, so that the last write holds the last word.
	writeMu sync.Mutex
}

func newTracked(rec sandboxRecord) *tracked {
	return &tracked{rec: rec, changed: make(chan struct{})}
}

// accepted reports whether the control plane accepted one of the sandbox's events with keys
// (with none: its final event). Requires r.mu.
func (t *tracked) accepted(keys ...string) bool {
	if t.rec.ended() {
		return true
	}
	return slices.ContainsFunc(t.rec.Sent, func(k string) bool { return slices.Contains(keys, k) })
}

// runner carries out assignments on the driver and keeps what the node reports about its
// sandboxes. Safe for concurrent use.
type runner struct {
	drv         driver.Driver // nil: the runtime has no driver in this build
	noDriver    string        // why, for the events of sandboxes that cannot run
	dir         string        // <state>/SandboxesDir
	templates   string        // <state>/TemplatesFile
	log         *slog.Logger
	now         func() time.Time
	outputLimit int64 // bytes per stream when a spec sets none
	box         *outbox
	queue       serial
	completed   chan struct{}  // signalled when an assignment was carried out
	wg          sync.WaitGroup // the watchers and assignments in progress
	// drainChanged is called when the node starts or stops draining (nil: nothing).
	drainChanged func()
	// runtime is the node's sandbox runtime: an assignment for another is refused.
	runtime Runtime
	// controlPlane holds the addresses a public sandbox never reaches (nil: none known).
	controlPlane *controlPlane

	mu       sync.Mutex
	ctx      context.Context // the agent's: watchers and assignments run in it
	boxes    map[string]*tracked
	prepared []nodeapi.LocalTemplate
	draining bool
	inflight map[string]bool // assignment ids being carried out
	done     []string        // assignment ids carried out, not yet acknowledged
}

func newRunner(stateDir string, drv driver.Driver, noDriver string, outputLimit int64, log *slog.Logger, now func() time.Time) (*runner, error) {
	box, err := openOutbox(filepath.Join(stateDir, EventsDir))
	if err != nil {
		return nil, fmt.Errorf("sandbox events: %w", err)
	}
	r := &runner{
		drv: drv, noDriver: noDriver, dir: filepath.Join(stateDir, SandboxesDir), templates: filepath.Join(stateDir, TemplatesFile),
		log: log, now: now, outputLimit: outputLimit, box: box, completed: make(chan struct{}, 1),
		ctx: context.Background(), boxes: map[string]*tracked{}, inflight: map[string]bool{},
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, err
	}
	if data, err := os.ReadFile(r.templates); err == nil {
		if err := json.Unmarshal(data, &r.prepared); err != nil {
			return nil, fmt.Errorf("%s: %w", r.templates, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return r, nil
}

// recover is what the agent does before it asks for work: it reads its records and its
// driver's sandboxes. Running (and warm) ones are watched again; ended ones get their final
// event (or, when it was accepted before, are removed); ones the driver no longer holds, whose
// end never reached the control plane, are reported lost. Records of removed sandboxes older
// than TombstoneRetention are deleted.
func (r *runner) recover(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !driver.ValidID(id) {
			continue
		}
		var rec sandboxRecord
		data, err := os.ReadFile(filepath.Join(r.dir, e.Name()))
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil || rec.ID != id {
			return fmt.Errorf("%s: not a sandbox record (%v): move it away", filepath.Join(r.dir, e.Name()), err)
		}
		if !rec.Removed.IsZero() && r.now().Sub(rec.Removed) > TombstoneRetention {
			os.Remove(filepath.Join(r.dir, e.Name()))
			continue
		}
		r.boxes[id] = newTracked(rec)
	}
	var list []driver.Status
	if r.drv != nil {
		if list, err = r.drv.List(ctx); err != nil && len(list) == 0 {
			return fmt.Errorf("list the driver's sandboxes: %w", err)
		} else if err != nil {
			r.log.Warn("the driver could not read every sandbox", "error", err.Error())
		}
	}
	held := map[string]bool{}
	var live, ended, lost int
	for _, st := range list {
		held[st.ID] = true
		t := r.boxes[st.ID]
		if t == nil { // the driver took it, the agent stopped before recording it
			t = newTracked(sandboxRecord{ID: st.ID, At: r.now().UTC(), Warm: st.State == driver.StateWarm})
			if err := r.write(t.rec); err != nil {
				return err
			}
			r.boxes[st.ID] = t
		}
		switch {
		case !st.Ended():
			live++
			t.live, t.warm = true, st.State == driver.StateWarm
			// The events it reached that may not have been sent (the agent stopped between
			// the start and queueing them): sending one twice is harmless.
			r.queueRunning(t, st)
			r.watch(st.ID)
		case t.rec.ended():
			r.remove(st.ID)
		default:
			ended++
			r.queueRunning(t, st)
			r.queueFinal(st, true)
		}
	}
	for id, t := range r.boxes {
		if held[id] || t.rec.ended() || !t.rec.Removed.IsZero() || r.box.has(id) {
			continue
		}
		lost++
		msg := "the sandbox vanished from the node's runtime while the agent was away"
		if r.drv == nil {
			msg = "the node's runtime has no sandbox driver (" + r.noDriver + ")"
		}
		r.queue1(id, string(nodeapi.StateLost), nodeapi.SandboxEvent{State: nodeapi.StateLost, At: nodeapi.WireTime{Time: r.now().UTC()}, Reason: string(driver.ReasonLost), Message: msg}, false)
	}
	r.log.Info("sandboxes recovered", "running", live, "ended", ended, "lost", lost, "templates", len(r.prepared))
	return nil
}

// close waits for the watchers and the assignments in progress, which end once the agent's
// context is done; then the driver may be closed.
func (r *runner) close() { r.wg.Wait() }

func (r *runner) recordPath(id string) string { return filepath.Join(r.dir, id+".json") }

// write stores rec (mode 0600).
func (r *runner) write(rec sandboxRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(r.recordPath(rec.ID), data, 0o600); err != nil {
		return fmt.Errorf("record sandbox %s: %w", rec.ID, err)
	}
	return nil
}

// persist writes t's record as it is now. Writes of one sandbox take turns, each with the
// record as it is when its turn comes, so the file never goes back to an older word.
func (r *runner) persist(t *tracked) error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	r.mu.Lock()
	rec := t.rec
	rec.Sent = slices.Clone(rec.Sent)
	r.mu.Unlock()
	return r.write(rec)
}

// watch waits, in the background, for the end of sandbox id and queues its final event.
func (r *runner) watch(id string) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		st, err := r.drv.Wait(r.ctx, id)
		if r.ctx.Err() != nil { // the agent stops: the next one watches it
			return
		}
		if err != nil {
			r.log.Error("cannot wait for a sandbox", "sandbox", id, "error", err.Error())
			return
		}
		// What it reached before its end comes first: a claim's command may end before the
		// claim's own running event is queued.
		if t := r.known(id); t != nil {
			r.queueRunning(t, st)
		}
		r.queueFinal(st, true)
	}()
}

// queueRunning queues what t reached that st shows and that the control plane has not
// accepted or been sent yet: running (its process started, or, warm, it is ready; At the
// start, or now), and, for a warm sandbox whose claim's command started, claimed.
func (r *runner) queueRunning(t *tracked, st driver.Status) {
	r.mu.Lock()
	warmReady := !t.accepted(keyRunning) && st.State == driver.StateWarm
	started := !t.accepted(keyRunning) && !t.rec.Warm && !st.StartedAt.IsZero()
	claimed := !t.accepted(keyClaimed) && t.rec.Warm && !st.StartedAt.IsZero()
	r.mu.Unlock()
	switch {
	case warmReady:
		r.queue1(st.ID, keyRunning, nodeapi.SandboxEvent{State: nodeapi.StateRunning, At: nodeapi.WireTime{Time: r.now().UTC()}, Message: "warm: ready for a claim"}, false)
	case started:
		r.queue1(st.ID, keyRunning, nodeapi.SandboxEvent{State: nodeapi.StateRunning, At: nodeapi.WireTime{Time: st.StartedAt}}, false)
	case claimed:
		r.queue1(st.ID, keyClaimed, nodeapi.SandboxEvent{State: nodeapi.StateRunning, At: nodeapi.WireTime{Time: st.StartedAt}, Message: "claimed: its command runs"}, false)
	}
}

// queueFinal marks the sandbox st describes as ended and queues its final event, unless one is
// queued or accepted already (a sandbox has one end).
func (r *runner) queueFinal(st driver.Status, output bool) {
	r.mu.Lock()
	t := r.boxes[st.ID]
	if t != nil {
		t.live, t.warm = false, false
	}
	sent := t != nil && t.rec.ended()
	r.mu.Unlock()
	if sent || r.box.has(st.ID) {
		return
	}
	at := st.EndedAt
	if at.IsZero() {
		at = r.now().UTC()
	}
	ev := nodeapi.SandboxEvent{
		State: nodeapi.SandboxState(st.State), At: nodeapi.WireTime{Time: at}, Reason: string(st.Reason), Message: st.Message,
		Signal: st.Signal, CPUMillis: st.Stats.CPU.Milliseconds(), PeakMemoryBytes: st.Stats.PeakMemoryBytes,
	}
	if st.State == driver.StateExited && st.ExitCode >= 0 {
		code := st.ExitCode
		ev.ExitCode = &code
	}
	r.log.Info("sandbox ended", "sandbox", st.ID, "state", st.State, "reason", st.Reason, "message", st.Message)
	r.queue1(st.ID, string(ev.State), ev, output)
}

// queue1 queues ev about sandbox id under key, its message fit for the contract (at most
// nodeapi.MaxEventMessageRunes characters without control characters). When the state
// directory cannot take it, the event is sent all the same, but would not survive a restart of
// the agent: the log says so.
func (r *runner) queue1(id, key string, ev nodeapi.SandboxEvent, output bool) {
	ev.Message = eventText(ev.Message, maxEventMessage)
	if err := r.box.add(id, key, ev, output); errors.Is(err, errSentEventLeft) {
		r.log.Error("cannot remove a sent sandbox event from the state directory: it is sent again after a restart", "sandbox", id, "error", err.Error())
	} else if err != nil {
		r.log.Error("cannot store a sandbox event in the state directory: it is sent, but a restart of the agent before it is accepted loses it", "sandbox", id, "state", ev.State, "error", err.Error())
	}
}

// maxEventMessage is the most characters of a sandbox event's message (the control plane's
// limit, nodeapi's MaxEventMessageRunes).
const maxEventMessage = 1024

// eventText returns s with its control characters (newlines, tabs, ...) as spaces, cut to max
// characters (the last one then "…").
func eventText(s string, max int) string {
	out := []rune(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s))
	if len(out) > max {
		out = append(out[:max-1], '…')
	}
	return string(out)
}

// sent is called once the control plane accepted p (or refused it for good): its waiters are
// released at once; in the background, the sandbox's record says so and, after its final
// event, it is removed from the driver (a restart in between sends the event again, which the
// control plane takes without harm).
func (r *runner) sent(p *pendingEvent) {
	r.mu.Lock()
	t := r.boxes[p.SandboxID]
	if t == nil {
		r.mu.Unlock()
		return
	}
	if !slices.Contains(t.rec.Sent, p.Key) {
		t.rec.Sent = append(t.rec.Sent, p.Key)
	}
	isFinal := final(p.Key)
	if isFinal {
		t.live, t.warm = false, false
	}
	close(t.changed)
	t.changed = make(chan struct{})
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.persist(t); err != nil {
			r.log.Error("cannot record that a sandbox's event was accepted", "sandbox", p.SandboxID, "error", err.Error())
		}
		if isFinal {
			r.remove(p.SandboxID)
		}
	}()
}

// waitFor waits until the control plane accepted an event of t with one of keys (none: its
// final event), and reports whether it did before the agent stopped.
func (r *runner) waitFor(t *tracked, keys ...string) bool {
	for {
		r.mu.Lock()
		ok, changed := t.accepted(keys...), t.changed
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-r.ctx.Done():
			return false
		}
	}
}

// remove makes the driver forget a sandbox whose end the control plane holds, and keeps its
// record as a tombstone; a failure is retried a minute later.
func (r *runner) remove(id string) {
	if r.drv != nil {
		err := r.drv.Remove(r.ctx, id)
		if err != nil && !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			if r.ctx.Err() == nil {
				r.log.Error("cannot remove an ended sandbox; retrying in a minute", "sandbox", id, "error", err.Error())
				time.AfterFunc(time.Minute, func() { r.remove(id) })
			}
			return
		}
	}
	r.mu.Lock()
	t := r.boxes[id]
	if t == nil {
		r.mu.Unlock()
		return
	}
	t.rec.Removed = r.now().UTC()
	r.mu.Unlock()
	if err := r.persist(t); err != nil {
		r.log.Error("cannot record a removed sandbox", "sandbox", id, "error", err.Error())
	}
}

// setDraining records whether the node drains. When a drain begins, the idle warm sandboxes are
// stopped: they run nothing of a tenant's, and would hold the drain open.
func (r *runner) setDraining(on bool) {
	r.mu.Lock()
	was := r.draining
	r.draining = on
	var idle []string
	for id, t := range r.boxes {
		if on && !was && t.live && t.warm {
			idle = append(idle, id)
		}
	}
	r.mu.Unlock()
	switch {
	case on && !was:
		r.log.Info("the node drains: it takes no new sandbox, and stops its idle warm ones", "warm_stopped", len(idle))
	case !on && was:
		r.log.Info("the node's drain ended: it takes new sandboxes again")
	}
	if on != was && r.drainChanged != nil {
		r.drainChanged()
	}
	for _, id := range idle {
		r.queue.do(id, func() { r.stopWarm(id) })
	}
}

// stopWarm stops sandbox id if it is still warm (not claimed meanwhile).
func (r *runner) stopWarm(id string) {
	r.mu.Lock()
	t := r.boxes[id]
	idle := t != nil && t.live && t.warm
	r.mu.Unlock()
	if idle {
		if _, err := r.drv.Stop(r.ctx, id); err != nil && r.ctx.Err() == nil {
			r.log.Error("cannot stop a warm sandbox", "sandbox", id, "error", err.Error())
		}
	}
}

// isDraining reports whether the node drains.
func (r *runner) isDraining() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.draining
}

// live returns the ids of the sandboxes the node holds (warm or running), sorted; [] when none.
func (r *runner) live() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := []string{}
	for id, t := range r.boxes {
		if t.live {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// allocated returns what the node's live sandboxes hold: their CPU and memory limits, their
// count (mvm_num) and how many of them run a command (mvm_running_num; the rest are warm).
func (r *runner) allocated() nodeapi.Allocated {
	r.mu.Lock()
	defer r.mu.Unlock()
	var a nodeapi.Allocated
	for _, t := range r.boxes {
		if !t.live {
			continue
		}
		a.MVMNum++
		if !t.warm {
			a.MVMRunningNum++
		}
		a.MilliCPU += t.rec.CPUMillicores
		a.MemoryMB += t.rec.MemoryMiB
	}
	return a
}

// localTemplates returns the templates prepared on the node ([] when none).
func (r *runner) localTemplates() []nodeapi.LocalTemplate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]nodeapi.LocalTemplate{}, r.prepared...)
}

// serial runs functions one after the other per key, each key in a goroutine of its own: the
// assignments about one sandbox are carried out in the order they came.
type serial struct {
	mu     sync.Mutex
	queues map[string][]func()
}

// do runs f after the functions queued before it under key.
func (s *serial) do(key string, f func()) {
	s.mu.Lock()
	if s.queues == nil {
		s.queues = map[string][]func(){}
	}
	q, busy := s.queues[key]
	s.queues[key] = append(q, f)
	s.mu.Unlock()
	if busy {
		return
	}
	go func() {
		for {
			s.mu.Lock()
			q := s.queues[key]
			if len(q) == 0 {
				delete(s.queues, key)
				s.mu.Unlock()
				return
			}
			f := q[0]
			s.queues[key] = q[1:]
			s.mu.Unlock()
			f()
		}
	}()
}
