package cubes

import (
	"context"
	"time"
)

// ControlPlane is what the fleet workflows (roundtrip, scale) ask of the cubefleet control
// plane the Cubes join (the profile's control_plane). Node ids are as the registry has them;
// a cubefleet agent on a Cube registers with its private IP. Errors are the control plane's
// (*cubefleet.Error for an API error, wrapped transport errors otherwise).
type ControlPlane interface {
	// Members lists the nodes of pool (a pool id or fleet name; "" for every pool), each with
	// its running sandboxes.
	Members(ctx context.Context, pool string) ([]Member, error)
	// Member reads one node; NOT_FOUND when it is not registered.
	Member(ctx context.Context, nodeID string) (Member, error)
	// Cordon stops new work reaching the node, saying why (at most 200 characters).
	Cordon(ctx context.Context, nodeID, reason string) error
	// Uncordon lets new work reach the node again (and ends a drain).
	Uncordon(ctx context.Context, nodeID string) error
	// Drain cordons the node and marks it draining; a positive deadline evicts what still
	// runs once it has passed (killed, reason node_drained, results kept).
	Drain(ctx context.Context, nodeID, reason string, deadline time.Duration) error
	// DeleteNode removes the node from the registry (its agent's credential is refused from
	// then on). The node must be cordoned, Ready and run no sandboxes; NOT_FOUND when it is
	// not registered.
	DeleteNode(ctx context.Context, nodeID string) error
	// CreateJoinToken makes a one-time join token for pool, accepted only from ip, valid for
	// ttl. The token is a secret: never log it.
	CreateJoinToken(ctx context.Context, pool, ip string, ttl time.Duration) (string, error)
	// CreateSandbox starts a sandbox of tenant's template running command (nil: the
	// template's idle command) pinned to node (its kubernetes.io/hostname label) without
	// waiting, and returns the sandbox's id.
	CreateSandbox(ctx context.Context, tenant, template, node string, command []string) (string, error)
	// Sandbox reads one of tenant's sandboxes: its state (pending, starting, running, exited,
	// failed, killed, lost).
	Sandbox(ctx context.Context, tenant, id string) (string, error)
}

// Member is one registered node as the workflows need it: its id and IP, the pool's fleet
// name and id, its health State (Ready, NotReady, Suspect, Down, Lost, Unknown), whether it is
// cordoned or draining, and Running, the sandboxes the control plane runs there (running or
// placed and not yet running), whose ids SandboxIDs lists.
type Member struct {
	ID       string `json:"id"`
	IP       string `json:"ip"`
	Pool     string `json:"pool,omitempty"`
	PoolID   string `json:"poolId,omitempty"`
	State    string `json:"state"`
	Cordoned bool   `json:"cordoned"`
	Draining bool   `json:"draining"`
	Running  int    `json:"running"`
	// SandboxIDs are the ids of the Running sandboxes.
	SandboxIDs []string `json:"sandboxIds,omitempty"`
}
