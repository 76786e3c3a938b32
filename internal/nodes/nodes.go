// Package nodes is the node registry of the control plane, in memory: compute nodes ("Cubes")
// register and report their status every second (the node-agent contract, internal/nodeapi),
// and operators list, cordon, label, drain and delete them. It holds each node's state, the one
// health function ([Health], used by every reader and by the loop that turns state changes into
// lifecycle events and metrics), the pools nodes belong to, and the node's answers on the wire
// (NodeSnapshot, SchedulerNode), written by hand so that a report never waits on reflection.
//
// The registry does no I/O of its own. Its persistence is a [Store] (nodestore.Store): what it
// loads at start, the coalesced writes it queues (registrations durable before they are answered,
// heartbeats at least every second, events), join tokens, and the health lease among server
// replicas. Its HTTP routes are nodehttp's. A report changes memory only, so it never waits on a
// disk write.
package nodes

import (
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Defaults of Config.
const (
	// DefaultHeartbeatTimeout is --node-heartbeat-timeout: the shortest heartbeat window; a node
	// whose last report is older than its window is not Ready (CubeOps' 15 s, docs/nodes.md,
	// "Health").
	DefaultHeartbeatTimeout = 15 * time.Second
	// DefaultLostAfter is --node-lost-after: a node silent this long is Lost.
	DefaultLostAfter = 5 * time.Minute
	// DefaultRegisterWait is how long a registration waits for its row to be durable before it
	// is journaled and answered (the write stays queued).
	DefaultRegisterWait = 800 * time.Millisecond
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

// The health states, in the order a silent node walks through them; Unknown is the state of a
// node that has not reported since this server started.
const (
	// StateReady: last report within the heartbeat window and its Ready condition True.
	StateReady State = "Ready"
	// StateNotReady: last report within the heartbeat window, but Ready was not True.
	StateNotReady State = "NotReady"
	// StateSuspect: one heartbeat window missed.
	StateSuspect State = "Suspect"
	// StateDown: two heartbeat windows missed.
	StateDown State = "Down"
	// StateLost: no report for the lost-after duration.
	StateLost State = "Lost"
	// StateUnknown: no report since this server started, and less than one heartbeat window
	// since the start: what the node does is not known yet.
	StateUnknown State = "Unknown"
)

// States lists every State, for metrics and validation.
var States = []State{StateReady, StateNotReady, StateSuspect, StateDown, StateLost, StateUnknown}

// StateNames lists the health states for messages: "Ready, NotReady, Suspect, Down, Lost,
// Unknown".
func StateNames() string {
	names := make([]string, len(States))
	for i, s := range States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// unhealthyReason is the wire's UnhealthyReason of a node in state s ("" when Ready).
func unhealthyReason(s State) string {
	switch s {
	case StateReady:
		return ""
	case StateNotReady:
		return nodeapi.ReasonReportedNotReady
	case StateUnknown:
		return nodeapi.ReasonNoReportSinceStart
	}
	return nodeapi.ReasonHeartbeatExpired
}

// Event types of node lifecycle changes, in events_log (subject: the node id) and in the
// metric cubefleet_node_events_total{type}.
const (
	EventJoined     = "node.joined"     // a node registered that was not registered
	EventNotReady   = "node.notReady"   // a node that had been Ready reported Ready False
	EventSuspect    = "node.suspect"    // one heartbeat window passed without a report
	EventDown       = "node.down"       // two heartbeat windows passed without a report
	EventLost       = "node.lost"       // the lost-after duration passed without a report
	EventRecovered  = "node.recovered"  // a node that had been Ready is Ready again
	EventCordoned   = "node.cordoned"   // a node was cordoned (isolation, drain)
	EventUncordoned = "node.uncordoned" // a node's cordon was lifted (which ends a drain)
	// EventDraining: a drain was asked (nodes.drain) of a node that was not draining.
	EventDraining = "node.draining"
	// EventDrained: a draining node reports no sandboxes (at once when it already ran none).
	EventDrained = "node.drained"
	EventDeleted = "node.deleted" // a node was deleted (its credential revoked)
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

// Actor names who asked for an operation, for events and audit rows: an API principal's id,
// "node:<id>" for a node credential, "anonymous@<ip>" for an allowed unauthenticated caller.
type Actor string

// nodeActorPrefix starts the Actor of a node credential.
const nodeActorPrefix = "node:"

// NodeActor is the Actor of node id acting with its own credential ("node:<id>").
func NodeActor(id string) Actor { return Actor(nodeActorPrefix + id) }

// IsNode reports whether a is a node acting with its own credential ("node:<id>"); every other
// actor (an API key, the public API, the CLI, an allowed unauthenticated caller) is an
// operator.
func (a Actor) IsNode() bool { return strings.HasPrefix(string(a), nodeActorPrefix) }
