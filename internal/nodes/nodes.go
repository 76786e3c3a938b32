// Package nodes is the node registry of the control plane: compute nodes ("Cubes") register
// and report their status every second through the node-agent API, byte-compatible with a stock
// Cube Sandbox Cubelet (specs/cubesandbox-node-agent.md §1); operators and CubeMaster-shaped
// readers list, cordon, label and delete them through the internal nodes API (§2) and the
// public API (nodes.*).
//
// Live state is in memory. Registrations are durable; heartbeats are coalesced in memory and
// flushed to the database at least every second by one writer, so a report never waits on a
// disk write and a registration answers within a second even while a long transaction holds the
// database. Health is one function, [Health], used by every reader and by the loop that turns
// state changes into lifecycle events (table events_log) and metrics.
package nodes

import (
	"time"
)

// Defaults of Config.
const (
	// DefaultHeartbeatTimeout is --node-heartbeat-timeout: a node whose last report is older is
	// not Ready (CubeOps' 15 s, spec §2.4).
	DefaultHeartbeatTimeout = 15 * time.Second
	// DefaultLostAfter is --node-lost-after: a node silent this long is Lost.
	DefaultLostAfter = 5 * time.Minute
	// DefaultFlushEvery is how often coalesced reports are written to the database.
	DefaultFlushEvery = time.Second
	// DefaultRegisterWait is how long a registration waits for its row to be durable before it
	// answers anyway from memory (the write stays queued).
	DefaultRegisterWait = 800 * time.Millisecond
	// DefaultMaxBodyBytes bounds a node-agent request body (4 MiB); larger is 413.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultJoinTokenTTL is a join token's lifetime when none is given.
	DefaultJoinTokenTTL = time.Hour
	// MaxJoinTokenTTL bounds a join token's lifetime.
	MaxJoinTokenTTL = 7 * 24 * time.Hour
	// MaxJoinTokenUses bounds a join token's uses.
	MaxJoinTokenUses = 10000
)

// Agent kinds: what sits on the node.
const (
	// AgentCubefleet is `cubefleet agent`: it joined with a join token and authenticates with
	// its node credential; it serves the work API, so it can receive sandboxes.
	AgentCubefleet = "cubefleet"
	// AgentCubelet is a stock Cubelet: no credentials (accepted only from the CIDRs the
	// operator allows), registry-only.
	AgentCubelet = "cubelet"
)

// State is a node's health, from [Health].
type State string

// The health states, in the order a silent node walks through them.
const (
	// StateReady: last report within the heartbeat timeout and its Ready condition True.
	StateReady State = "Ready"
	// StateNotReady: last report within the heartbeat timeout, but Ready was not True.
	StateNotReady State = "NotReady"
	// StateSuspect: one heartbeat timeout missed.
	StateSuspect State = "Suspect"
	// StateDown: two heartbeat timeouts missed.
	StateDown State = "Down"
	// StateLost: no report for the lost-after duration.
	StateLost State = "Lost"
)

// States lists every State, for metrics and validation.
var States = []State{StateReady, StateNotReady, StateSuspect, StateDown, StateLost}

// Health is the one health function of the control plane (issue 3, "Health, done right"):
// the state of a node whose last report arrived at last (on the control plane's clock) with
// Ready condition ready, at now. Age within timeout: Ready, or NotReady when ready is false;
// more than one timeout: Suspect; more than two: Down; lostAfter or more: Lost. A report from
// the future (clock steps) counts as fresh. Only Ready nodes may receive work; the wire's
// Healthy is exactly state == Ready.
func Health(now, last time.Time, ready bool, timeout, lostAfter time.Duration) State {
	age := now.Sub(last)
	switch {
	case age >= lostAfter:
		return StateLost
	case age > 2*timeout:
		return StateDown
	case age > timeout:
		return StateSuspect
	case !ready:
		return StateNotReady
	}
	return StateReady
}

// Unhealthy reasons on the wire (spec §2.2): the heartbeat is checked first.
const (
	ReasonHeartbeatExpired = "HeartbeatExpired"
	ReasonReportedNotReady = "ReportedNotReady"
)

// unhealthyReason is the wire's UnhealthyReason of a node in state s ("" when Ready).
func unhealthyReason(s State) string {
	switch s {
	case StateReady:
		return ""
	case StateNotReady:
		return ReasonReportedNotReady
	}
	return ReasonHeartbeatExpired
}

// Event types of node lifecycle changes, in events_log (subject: the node id) and in the
// metric cubefleet_node_events_total{type}.
const (
	EventJoined     = "node.joined"
	EventNotReady   = "node.notReady"
	EventSuspect    = "node.suspect"
	EventDown       = "node.down"
	EventLost       = "node.lost"
	EventRecovered  = "node.recovered"
	EventCordoned   = "node.cordoned"
	EventUncordoned = "node.uncordoned"
	// EventDraining: a drain was asked (nodes.drain) of a node that was not draining.
	EventDraining = "node.draining"
	// EventDrained: a draining node reports no sandboxes (at once when it already ran none).
	EventDrained = "node.drained"
	EventDeleted = "node.deleted"
)

// EventTypes lists every node event type.
var EventTypes = []string{EventJoined, EventNotReady, EventSuspect, EventDown, EventLost, EventRecovered, EventCordoned, EventUncordoned,
	EventDraining, EventDrained, EventDeleted}

// Pool is a pool a node can belong to: ID (`pool_...`), the tenant that owns it, its fleet name
// (what a stock Cubelet's cluster_label is matched against; "" when it has none), and whether
// it is archived.
type Pool struct {
	ID       string
	TenantID string
	Name     string
	Archived bool
}
