package nodes

import (
	"context"
	"encoding/json"

	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/iam"
)

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
// leader, which also writes the state: Lost stays Lost across restarts).
func (r *Registry) observe(n *node, now int64, leader bool) {
	n.mu.Lock()
	if n.deleted {
		n.mu.Unlock()
		return
	}
	s := r.health.state(n, now)
	prev := n.state
	if s == prev {
		n.mu.Unlock()
		return
	}
	n.state, n.stateAt = s, now
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
