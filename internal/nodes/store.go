package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"

	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Store is the registry's persistence (nodestore.Store in production): what it loaded at start,
// the writes it queues, and the lease that decides which server replica emits health events.
// Writes are coalesced and flushed at least every second by one writer, so a report never
// waits on the database; a registration waits for its row (Commit) or, when the database is
// busy, for the journal (Journal). Methods other than Open, Run and Close do no I/O except
// LoadNode. It must be safe for concurrent use.
type Store interface {
	// Open attaches the store to reg (the registry it flushes from and syncs into, and whose
	// JoinedEvent gives the event of a node the journal restores), replays what a crash left
	// in the journal, announces this replica, takes the health lease if it is free, and
	// returns every stored node. New calls it once.
	Open(ctx context.Context, reg *Registry) ([]Record, error)
	// LoadNode returns node id as stored (a node another replica registered), or nil when it
	// is not stored.
	LoadNode(ctx context.Context, id string) (*Record, error)
	// Save queues the registration row reg for the next flush; a later Save of the same node
	// replaces it. The registry calls it under the node's lock, so rows queue in the order the
	// node changed.
	Save(reg Registration)
	// Commit is Save for a registration that is answered once it is durable, and asks for a
	// flush now. join is the join token use it spends (nil for none): the row is written only
	// if the token still has that use, else spent runs (the registry forgets the node) and the
	// channel receives ErrTokenSpent. Otherwise the channel receives nil once the row is
	// committed. Called under the node's lock.
	Commit(reg Registration, join *JoinUse, spent func()) <-chan error
	// Journal makes a committed registration durable on local disk before the database takes
	// it (the database is busy), and restores it at the next start should the process die
	// first. ErrNoJournal when the store keeps no journal.
	Journal(reg Registration, join *JoinUse) error
	// Delete queues the deletion of node id at (Unix ms): its rows go, and a tombstone tells
	// the other replicas.
	Delete(id string, at int64)
	// Emit queues an event row (events_log).
	Emit(e events.Event)
	// Leader reports whether this replica holds the health lease: only the leader writes
	// health states and emits health events, so each change is one event.
	Leader() bool
	// Run runs the store's loops (the flusher, replica sync, the lease) until ctx ends.
	Run(ctx context.Context) error
	// Close writes what is queued (the final flush) and retires this replica. The registry
	// calls it after its own loops stopped.
	Close(ctx context.Context) error
}

// JoinTokenStore spends join tokens (nodestore.Store in production): it reads a token's state
// on every use and keeps the uses this replica took but has not written yet.
type JoinTokenStore interface {
	// TakeJoin checks join token hash (HashToken) for a registration from peer of node nodeID
	// at address host (its host_ip) and takes one use of it. A *Refusal says why it cannot be
	// used (unknown, revoked, expired, used up, bound to another address, or bound to an
	// address the registration does not name).
	TakeJoin(ctx context.Context, hash string, peer, host netip.Addr, nodeID string) (JoinUse, error)
	// ReleaseJoin gives back a use TakeJoin took, for a registration that failed before
	// Commit, and the binding that use made.
	ReleaseJoin(u JoinUse)
}

// JoinUse is one use of a join token, taken by TakeJoin: the token (TokenID, Hash), the pool the
// node joins, the address the use came from (IP, which binds an unbound token), and whether
// this use bound it (Bound, undone by ReleaseJoin).
type JoinUse struct {
	TokenID string
	PoolID  string
	IP      string
	Hash    string
	Bound   bool
}

var (
	// ErrTokenSpent is a join whose token another replica used up between TakeJoin and the
	// write: the registration is refused (401).
	ErrTokenSpent = errors.New("the join token was used up concurrently")
	// ErrNoJournal is Journal's answer when the store keeps no registration journal.
	ErrNoJournal = errors.New("no registration journal is configured")
)

// Registration is a node's durable registration (table nodes_registrations): what it
// registered with (nodeapi.RegisterRequest's fields; CPU in thousandths of a core, memory in
// MiB), how it joined (Agent, PoolID, CredentialHash: the hex SHA-256 of its node credential,
// "" for a stock Cubelet), the operator's cordon (CordonDetail, CordonBy), labels and drain
// (DrainAt, DrainedAt), and its last known health State (never Unknown). Times are Unix
// milliseconds. Labels and Versions are shared, never modified in place.
type Registration struct {
	NodeID              string
	HostIP              string
	Agent               string
	PoolID              string
	ClusterLabel        string
	Labels              map[string]string
	GRPCPort            int64
	Capacity            nodeapi.Resources
	Allocatable         nodeapi.Resources
	InstanceType        string
	QuotaCPU            int64
	QuotaMemMB          int64
	CreateConcurrentNum int64
	MaxMVMNum           int64
	PausedReleaseRatio  *float64
	Versions            []nodeapi.ComponentVersion
	HostFacts           nodeapi.HostFacts
	CredentialHash      string
	CordonDetail        string
	CordonBy            string
	State               State
	RegisteredAt        int64
	UpdatedAt           int64
	DrainReason         string
	DrainBy             string
	DrainAt             int64
	DrainedAt           int64
	// DrainDeadline is when the drain stops the sandboxes still running (Unix ms); 0: none.
	DrainDeadline int64
}

// Status is a node's last report (table nodes_status): when it arrived (ReportedAt, on the
// control plane's clock) and the node's heartbeat time (clamped), its Ready condition, the
// conditions as sent, what it allocated and how full its disks are (nil when it never
// reported them) as of MetricAt (the node's clock) and MetricLocalAt (ours), and its observed
// report interval (ReportInterval, ms; 0 while not observed). Times are Unix milliseconds.
// Live is false when only the times and readiness are known (a stored row whose
// live record does not parse), and the fields from Conditions on are to be left as they are.
// Sandboxes are the sandbox ids the report of cubefleet agent listed (nil when the node never
// listed any: a stock Cubelet).
// Inventory is nil when it did not change since it was last written (and, when loading, when
// none was ever reported).
type Status struct {
	NodeID         string
	ReportedAt     int64
	HeartbeatAt    int64
	Ready          bool
	Live           bool
	Conditions     []nodeapi.Condition
	Allocated      *nodeapi.Allocated
	DiskUsage      *nodeapi.DiskUsage
	MetricAt       int64
	MetricLocalAt  int64
	ReportInterval int64
	Sandboxes      []string
	Inventory      *Inventory
}

// Inventory is what a node holds, as canonical JSON (encoding/json): Images a
// []nodeapi.Image, Templates a []nodeapi.LocalTemplate (nil when never reported), and whether
// the templates were reported.
type Inventory struct {
	Images            json.RawMessage
	Templates         json.RawMessage
	TemplatesReported bool
}

// Record is a stored node: its registration and, once it reported, its status.
type Record struct {
	Registration
	Status *Status
}

// Deletion is a node deleted at At (Unix ms).
type Deletion struct {
	ID string
	At int64
}

// Changes is what the other server replicas wrote since the last sync (nodestore reads it,
// Apply takes it in): deletions, registrations as they are now stored, and newer reports.
type Changes struct {
	Deletions     []Deletion
	Registrations []Record
	Statuses      []Status
}
