package nodes

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// HealthPolicy is what Health judges every node by: the configured thresholds and when this
// server started.
type HealthPolicy struct {
	// Timeout is --node-heartbeat-timeout: the shortest heartbeat window.
	Timeout time.Duration
	// LostAfter is --node-lost-after: a node silent this long is Lost. It exceeds 2*Timeout.
	LostAfter time.Duration
	// Started is when this server started (New): a node with no report since is Unknown for
	// one window.
	Started time.Time
}

// Heartbeats is what Health judges one node by: when its last report (or registration)
// arrived, on the control plane's clock; its last Ready condition (true: "True"); and its
// observed report interval (a smoothed estimate, ReportInterval; 0 while not observed).
type Heartbeats struct {
	Last     time.Time
	Ready    bool
	Interval time.Duration
}

// Window is the heartbeat window of a node whose observed report interval is interval: twice
// the interval, at least Timeout, and at most a third of LostAfter (so a silent node is Down
// before it is Lost) unless Timeout is longer. Until an interval is observed (0) the window is
// Timeout itself: a node that reported once and went silent stops getting work one timeout
// after that report, not two.
func (p HealthPolicy) Window(interval time.Duration) time.Duration {
	if interval <= 0 {
		return p.Timeout
	}
	return max(p.Timeout, min(2*interval, p.LostAfter/3))
}

// Health is the one health function of the control plane (docs/nodes.md):
// the state of a node with heartbeats h at now, under
// p. A node whose last report is older than p.Started (none since this server started) is
// Unknown until one window has passed since the start; then, and for every other node, its
// age decides: within its window (Window of its interval) Ready, or NotReady when its Ready
// condition is not True; more than one window: Suspect; more than two: Down; LostAfter or
// more: Lost. A report from the future (clock steps) counts as fresh. Only Ready nodes may
// receive work; the wire's Healthy is exactly state == Ready.
func Health(now time.Time, h Heartbeats, p HealthPolicy) State {
	w := p.Window(h.Interval)
	if !p.since(h.Last) && now.Sub(p.Started) <= w {
		return StateUnknown
	}
	age := now.Sub(h.Last)
	switch {
	case age >= p.LostAfter:
		return StateLost
	case age > 2*w:
		return StateDown
	case age > w:
		return StateSuspect
	case !h.Ready:
		return StateNotReady
	}
	return StateReady
}

// heartbeats is what Health judges n by. Requires n.mu.
func (n *node) heartbeats() Heartbeats {
	return Heartbeats{Last: time.UnixMilli(n.reportedAt), Ready: n.ready, Interval: time.Duration(n.interval) * time.Millisecond}
}

// state returns n's state at now (Unix ms). Requires n.mu.
func (p HealthPolicy) state(n *node, now int64) State {
	return Health(time.UnixMilli(now), n.heartbeats(), p)
}

// since reports whether a report that arrived at last arrived since this server started (at
// or after Started): the one rule of "reported since the start" that Health, the views and the
// scheduler's ReportedSinceStart share.
func (p HealthPolicy) since(last time.Time) bool { return !last.Before(p.Started) }

// reportedSinceStart reports whether n's last report (or registration) arrived since this
// server started: only such a node can be Ready or a scheduling candidate. Requires n.mu.
func (p HealthPolicy) reportedSinceStart(n *node) bool {
	return p.since(time.UnixMilli(n.reportedAt))
}

// readyUntil is the last instant (Unix ms) at which Health calls n Ready for what it reported,
// or 0 when it does not call it Ready at all: Health is Ready exactly while the node reported
// since the start, its Ready condition is True and now - Last <= its window (which is shorter
// than LostAfter), TestReadyUntilIsHealth. Requires n.mu.
func (p HealthPolicy) readyUntil(n *node) int64 {
	if !n.ready || !p.reportedSinceStart(n) {
		return 0
	}
	return n.reportedAt + p.Window(time.Duration(n.interval)*time.Millisecond).Milliseconds()
}

// observeInterval folds the gap between n's previous status report and this one, at now
// (Unix ms), into n.interval, its observed report interval: a smoothed estimate of the gaps
// (an exponentially weighted moving average, as TCP smooths round-trip times) that follows a
// longer gap at once by half the difference and a shorter one slowly by an eighth, so a
// node whose reports grow slower widens its window before it flaps, and one bad gap does not
// narrow it. The first gap is taken as it is; a gap of more than two windows is an outage, not
// the interval, and is left out. Requires n.mu.
func (p HealthPolicy) observeInterval(n *node, now int64) {
	if prev := n.statusAt; prev > 0 && now > prev {
		gap := now - prev
		switch {
		case gap > 2*p.Window(time.Duration(n.interval)*time.Millisecond).Milliseconds():
		case n.interval == 0:
			n.interval = gap
		case gap > n.interval:
			n.interval += (gap - n.interval + 1) / 2
		default:
			n.interval -= (n.interval - gap) / 8
		}
	}
	n.statusAt = max(n.statusAt, now)
}

// CheckHealth evaluates every node's health now: each change of state becomes an event
// (node.suspect, node.down, node.lost, node.notReady, node.recovered) on the replica that holds
// the health lease, and the state gauges are updated. Run calls it every HealthEvery; tests
// call it after moving their clock.
func (r *Registry) CheckHealth(ctx context.Context) {
	now := r.now()
	leader := r.store.Leader()
	for _, n := range r.set.sorted() {
		r.observe(n, now, leader)
	}
	r.countStates()
}

// observe records n's health as of now (Unix ms) and, on a change, emits its event (on the
// leader, which also writes the state, so a restart knows it). Unknown is no event: the next
// known state is compared with the last known one (n.known, which a restart keeps), so a node
// that was Down before a restart and is Down after it makes no second node.down.
func (r *Registry) observe(n *node, now int64, leader bool) {
	n.mu.Lock()
	if n.deleted {
		n.mu.Unlock()
		return
	}
	s := r.health.state(n, now)
	if s == n.state {
		n.mu.Unlock()
		return
	}
	n.state, n.stateAt = s, now
	prev := n.known
	if s == StateUnknown || s == prev {
		n.mu.Unlock()
		r.listGen.Add(1)
		return
	}
	n.known = s
	typ := transitionEvent(prev, s, n.wasReady)
	if s == StateReady {
		n.wasReady = true
	}
	data := n.event(r.pools.Load())
	data.From, data.To, data.LastReportAt = prev, s, n.reportedAt
	if leader {
		n.save(r.store)
	}
	n.mu.Unlock()
	r.listGen.Add(1)
	if leader && typ != "" { // otherwise another replica emits the event
		r.emit(now, typ, data)
	}
}

// transitionEvent names the event of a change from prev to s ("" for none). A node that
// joined is not "recovered" or "notReady" until it has been Ready once (wasReady); silence is
// always an event.
func transitionEvent(prev, s State, wasReady bool) string {
	switch s {
	case StateReady:
		if prev == "" || !wasReady {
			return ""
		}
		return EventRecovered
	case StateNotReady:
		if prev == "" || !wasReady {
			return ""
		}
		return EventNotReady
	case StateSuspect:
		return EventSuspect
	case StateDown:
		return EventDown
	case StateLost:
		return EventLost
	}
	return ""
}

// countStates sets the cubefleet_nodes{state} gauges.
func (r *Registry) countStates() {
	counts := map[State]int{}
	for _, n := range r.set.sorted() {
		n.mu.Lock()
		if !n.deleted {
			counts[n.state]++
		}
		n.mu.Unlock()
	}
	for _, s := range States {
		r.m.nodes.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

// eventData is the data of a node event.
type eventData struct {
	NodeID       string `json:"nodeId"`
	IP           string `json:"ip,omitempty"`
	Pool         string `json:"poolId,omitempty"`
	Agent        string `json:"agent,omitempty"`
	From         State  `json:"from,omitempty"`
	To           State  `json:"to,omitempty"`
	LastReportAt int64  `json:"lastReportAt,omitempty"`
	By           string `json:"by,omitempty"`
	Detail       string `json:"detail,omitempty"`
	Force        bool   `json:"force,omitempty"`
	Sandboxes    int64  `json:"sandboxes,omitempty"` // node.draining: the sandboxes it still runs
}

// event is the data every event of n carries: its id, IP, pool (the pool of its join token,
// or for a stock Cubelet the pool its cluster_label names; absent when it has none) and agent.
// Requires n.mu.
func (n *node) event(pools *poolIndex) eventData {
	p, _ := pools.of(n.poolID, n.clusterLabel)
	return eventData{NodeID: n.id, IP: n.hostIP, Pool: p.ID, Agent: n.agent}
}

// newEvent is the events_log row of a node event of type typ at now (Unix ms).
func newEvent(now int64, typ string, d eventData) events.Event {
	data, err := json.Marshal(d)
	if err != nil {
		data = nil
	}
	return events.Event{At: now, TenantID: iam.RootTenant, Type: typ, Subject: d.NodeID, Data: data}
}

// emit records a node event: a row for the store, a metric and a log line.
func (r *Registry) emit(now int64, typ string, d eventData) {
	r.store.Emit(newEvent(now, typ, d))
	r.m.events.WithLabelValues(typ).Inc()
	r.log.Info("node event", "type", typ, "node", d.NodeID, "ip", d.IP, "from", string(d.From), "to", string(d.To), "by", d.By)
}

// JoinedEvent is the node.joined event of a registration at its UpdatedAt, for a node the
// store restores from its journal after a crash lost the event.
func (r *Registry) JoinedEvent(reg Registration) events.Event {
	p, _ := r.pools.Load().of(reg.PoolID, reg.ClusterLabel)
	d := eventData{NodeID: reg.NodeID, IP: reg.HostIP, Pool: p.ID, Agent: reg.Agent}
	return newEvent(reg.UpdatedAt, EventJoined, d)
}
