package nodes

import (
	"context"
	"maps"
)

// What the sandboxes' control loops and the work API read of the registry: each node's health,
// pool, drain, room and the sandboxes and templates its last report listed, and who may call
// the work API for a node (docs/sandboxes.md).

// WorkNode is a node as the sandboxes read it. Times are Unix ms on the control plane's clock;
// CPU in thousandths of a core, memory in MiB. Sandboxes and Templates are shared: never modify
// them.
type WorkNode struct {
	ID string
	// PoolID is the node's pool; "" while it has none it can use (unknown, archived).
	PoolID string
	// Cubefleet is true for `cubefleet agent` (it serves the work API); a stock Cubelet is
	// registry-only.
	Cubefleet bool
	// State is the node's health now (Health).
	State State
	// Cordoned and Draining: the node takes no new work; Draining also means it is to be
	// emptied.
	Cordoned, Draining bool
	// DrainDeadline is when the drain stops the sandboxes still running there (0: none).
	DrainDeadline int64
	// ReportedAt is when its last report arrived; RegisteredAt when it registered (Unix ms;
	// a node deleted and registered again is a new registration).
	ReportedAt, RegisteredAt int64
	// SandboxesReported says a report listed the sandboxes the agent runs; Sandboxes are they.
	SandboxesReported bool
	Sandboxes         []string
	// TemplatesReported says a report listed local_templates; Templates are their ids.
	TemplatesReported bool
	Templates         []string
	// QuotaCPU, QuotaMemMiB and MaxMVM are what the node offers the scheduler.
	QuotaCPU, QuotaMemMiB, MaxMVM int64
	// Labels are the node's labels (a sandbox's nodeSelector names some of them); read only.
	Labels map[string]string
}

// workNode renders n at now. Requires n.mu.
func (r *Registry) workNode(n *node, now int64, pools *poolIndex) WorkNode {
	w := WorkNode{
		ID: n.id, Cubefleet: n.agent == AgentCubefleet, State: r.health.state(n, now), Cordoned: n.cordoned(), Draining: n.drainAt != 0, DrainDeadline: n.drainDeadline,
		ReportedAt: n.reportedAt, RegisteredAt: n.registeredAt, SandboxesReported: n.sandboxesReported, Sandboxes: n.sandboxIDs,
		TemplatesReported: n.templatesReported, Templates: n.templateIDs,
		QuotaCPU: quotaCPU(n), QuotaMemMiB: quotaMem(n), MaxMVM: n.maxMVM, Labels: maps.Clone(n.labels),
	}
	if p, reason := pools.of(n.poolID, n.clusterLabel); reason == "" {
		w.PoolID = p.ID
	}
	return w
}

// WorkNodes returns every registered node as the sandboxes read it, sorted by id.
func (r *Registry) WorkNodes() []WorkNode {
	now, pools := r.now(), r.pools.Load()
	all := r.set.sorted()
	out := make([]WorkNode, 0, len(all))
	for _, n := range all {
		n.mu.Lock()
		if !n.deleted {
			out = append(out, r.workNode(n, now, pools))
		}
		n.mu.Unlock()
	}
	return out
}

// WorkNode returns node id as the sandboxes read it (from the store when another replica
// registered it); ok is false when it is not registered.
func (r *Registry) WorkNode(ctx context.Context, id string) (w WorkNode, ok bool, err error) {
	n, err := r.find(ctx, id)
	if err != nil || n == nil {
		return WorkNode{}, false, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.deleted {
		return WorkNode{}, false, nil
	}
	return r.workNode(n, r.now(), r.pools.Load()), true, nil
}

// AuthenticateWork checks a call of the work API (nodeapi.RouteWork, RouteSandboxEvent) for node
// id made with cred, and returns the node's credential hash: the hex form of
// nodeapi.CredentialKey, which keys the control plane's proofs. Errors: a *Refusal
// (UNAUTHENTICATED) for a credential that is not the node's (unknown, another node's, revoked
// with a deleted node) or none for a node that has one; FORBIDDEN for a stock Cubelet's node
// (registry-only: it receives no work); NOT_FOUND for a node that is not registered, called
// without a credential.
func (r *Registry) AuthenticateWork(ctx context.Context, id string, cred Credential) (string, error) {
	n, err := r.find(ctx, id)
	if err != nil {
		return "", err
	}
	if n == nil {
		if cred.Kind == CredentialNode {
			return "", r.set.credentialRefusal(id, cred.Hash)
		}
		return "", errNodeNotFound
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.deleted && cred.Kind == CredentialNode:
		return "", r.set.credentialRefusal(id, cred.Hash)
	case n.deleted:
		return "", errNodeNotFound
	case cred.Kind == CredentialNode && (n.credHash == "" || !sameHash(n.credHash, cred.Hash)):
		return "", r.set.credentialRefusal(id, cred.Hash)
	case n.agent != AgentCubefleet || n.credHash == "":
		return "", Forbidden("registry_only", "node %s is a stock Cubelet, %s", id, RegistryOnlyReason)
	case cred.Kind != CredentialNode:
		return "", Unauthenticated("credential_required", "node %s joined with a join token and authenticates with its node credential", id)
	}
	return n.credHash, nil
}
