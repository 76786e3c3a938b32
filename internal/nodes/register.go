package nodes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// Registered is the outcome of a registration: the node's NodeSnapshot appended to the buffer
// the caller gave, the new node credential of a join (shown once; "" otherwise), the join token
// use it spent (nil without one), and whether it was answered from the journal because the
// database was busy.
type Registered struct {
	Answer     []byte
	Credential string
	Join       *JoinUse
	Journaled  bool
}

// Register runs a registration (docs/nodes.md, "Node-agent API", with cubefleet's auth): cred is
// the caller's credential (the HTTP edge has refused calls without one from outside the allowed
// networks), peer its address. It answers once the registration is durable: written, or journaled
// when the database does not take it within RegisterWait. A refusal is a *Refusal (UNAUTHENTICATED;
// FORBIDDEN for a join token bound to an address other than the registration's host_ip, or a node
// credential changing its node's host_ip; CONFLICT for a join token naming a registered node); bad
// input is INVALID_INPUT (the reserved label, the label rules).
func (r *Registry) Register(ctx context.Context, req *nodeapi.RegisterRequest, cred Credential, peer netip.Addr, dst []byte) (Registered, error) {
	var out Registered
	if _, ok := req.Labels[nodeapi.ReservedLabel]; ok {
		return out, cubefleet.Invalid("labels."+nodeapi.ReservedLabel, "label %s is reserved: only isolation sets it", nodeapi.ReservedLabel)
	}
	if cred.Kind == CredentialAPIKey {
		return out, Unauthenticated("api_key", "API keys cannot register nodes: send a join token or the node credential")
	}
	addr, err := req.Addr() // checked by the decoder; this is the parsed form
	if err != nil {
		return out, err
	}
	if _, err := r.find(ctx, req.NodeID); err != nil { // loads a node another replica registered
		return out, err
	}
	var done <-chan error
	n, created, err := func() (*node, bool, error) {
		r.regMu.Lock()
		defer r.regMu.Unlock()
		existing := r.set.get(req.NodeID)
		if cred.Kind == CredentialJoin { // the token first, so a bad one learns nothing about node ids
			if r.tokens == nil {
				return nil, false, Unauthenticated("join_token_unknown", "unknown join token")
			}
			use, err := r.tokens.TakeJoin(ctx, cred.Hash, peer, addr, req.NodeID)
			if err != nil {
				return nil, false, err
			}
			out.Join = &use
		}
		release := func() {
			if out.Join != nil {
				r.tokens.ReleaseJoin(*out.Join)
			}
		}
		if f := r.set.checkRegistrant(existing, req.NodeID, addr, cred); f != nil {
			release()
			return nil, false, f
		}
		var stored map[string]string
		if existing != nil {
			existing.mu.Lock()
			stored = existing.labels
			existing.mu.Unlock()
		}
		labels := mergeLabels(stored, req.Labels)
		if err := nodeapi.CheckLabels(labels); err != nil {
			release()
			return nil, false, err
		}
		now := r.now()
		n := existing
		if n == nil {
			n = &node{id: req.NodeID, agent: AgentCubelet, registeredAt: now}
			if out.Join != nil {
				secret, err := newSecret(nodeapi.CredentialPrefix)
				if err != nil {
					release()
					return nil, false, err
				}
				out.Credential = secret
				n.agent, n.poolID, n.credHash = AgentCubefleet, out.Join.PoolID, HashToken(secret)
			}
		}
		n.mu.Lock()
		applyRegistration(n, req, labels, now)
		// Should another replica use the token up first, the node and its credential are
		// forgotten (the store queues the deletion).
		done = r.store.Commit(n.registration(), out.Join, func() {
			r.regMu.Lock()
			defer r.regMu.Unlock()
			n.mu.Lock()
			n.deleted = true
			cred := n.credHash
			n.mu.Unlock()
			r.set.remove(n, cred)
		})
		n.mu.Unlock()
		if existing == nil {
			r.set.add(n)
		}
		r.listGen.Add(1)
		n.statusDirty.Store(true)
		return n, existing == nil, nil
	}()
	if err != nil {
		return Registered{}, err
	}
	if out.Join != nil {
		r.knowPools(ctx, out.Join.PoolID)
	}
	wait := time.NewTimer(r.cfg.RegisterWait)
	defer wait.Stop()
	select {
	case err := <-done:
		if errors.Is(err, ErrTokenSpent) {
			return Registered{}, Unauthenticated("join_token_used", "join token was already used")
		}
	case <-wait.C:
		// The database is busy (a long transaction holds it): the registration stays queued
		// for the flusher, and is journaled to disk so that it is durable when answered.
		if out.Journaled, err = r.journal(ctx, n, out.Join, done); err != nil {
			return Registered{}, err
		}
	case <-ctx.Done():
		return Registered{}, ctx.Err()
	}
	now := r.now()
	n.mu.Lock()
	d := n.event(r.pools.Load())
	out.Answer = n.appendSnapshot(dst, r.health.state(n, now))
	n.mu.Unlock()
	if created {
		r.emit(now, EventJoined, d)
	}
	r.notify(n)
	return out, nil
}

// journal makes a registration the database has not taken within RegisterWait durable in the
// store's journal, then lets it be answered (journaled true). When the journal cannot be
// written it waits for the database instead (done, or ctx ends): an answer always means
// durable.
func (r *Registry) journal(ctx context.Context, n *node, join *JoinUse, done <-chan error) (bool, error) {
	n.mu.Lock()
	reg := n.registration()
	n.mu.Unlock()
	err := r.store.Journal(reg, join)
	if err == nil {
		r.log.WarnContext(ctx, "the database is busy: registration journaled to disk and answered; it is written when the database frees up", "node", n.id)
		return true, nil
	}
	if !errors.Is(err, ErrNoJournal) {
		r.log.ErrorContext(ctx, "journaling a registration failed; it waits for the database", "node", n.id, "err", err)
	}
	select {
	case err := <-done:
		if errors.Is(err, ErrTokenSpent) {
			return false, Unauthenticated("join_token_used", "join token was already used")
		}
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// checkRegistrant decides whether credential c may register node id at address addr
// (existing: its node, or nil). A node credential registers only its own node, and keeps the
// address it joined with (403 otherwise: a node cannot move its registration to another
// address; delete it and join again). Requires r.regMu.
func (s *nodeSet) checkRegistrant(existing *node, id string, addr netip.Addr, c Credential) *Refusal {
	var credHash, hostIP string
	if existing != nil {
		existing.mu.Lock()
		credHash, hostIP = existing.credHash, existing.hostIP
		existing.mu.Unlock()
	}
	switch c.Kind {
	case CredentialJoin:
		if existing != nil {
			return &Refusal{Code: cubefleet.CodeConflict, Reason: "node_exists",
				Message: fmt.Sprintf("node %s is already registered; a join token cannot take over a registered node: delete it first (cubefleet nodes delete %s), then join again", id, id)}
		}
	case CredentialNode:
		if existing == nil || credHash == "" || !sameHash(credHash, c.Hash) {
			return s.credentialRefusal(id, c.Hash)
		}
		if prev, err := netip.ParseAddr(hostIP); err == nil && prev.Unmap() != addr || err != nil && hostIP != addr.String() {
			return Forbidden("host_ip_changed", "node %s is registered with host_ip %s; its node credential cannot register it with host_ip %s: delete the node (cubefleet nodes delete %s) and join again with a join token for the new address", id, hostIP, addr, id)
		}
		return nil
	case CredentialNone:
		if credHash != "" {
			return Unauthenticated("credential_required", "node %s joined with a join token and authenticates with its node credential", id)
		}
	}
	return nil
}

// credentialRefusal explains why node credential hash is not node id's.
func (s *nodeSet) credentialRefusal(id, hash string) *Refusal {
	if owner, ok := s.owner(hash); ok && owner != id {
		return Unauthenticated("other_node_credential", "the node credential belongs to another node")
	}
	return Unauthenticated("unknown_credential", "unknown or revoked node credential (a deleted node needs a new join token)")
}

// CheckCredential checks that credential hash (HashToken of a node credential) is node id's:
// a *Refusal (UNAUTHENTICATED) says why not: the node is unknown, the credential another
// node's, or unknown or revoked.
func (r *Registry) CheckCredential(id, hash string) error {
	var n *node
	if id != "" {
		n = r.set.get(id)
	}
	var own string
	if n != nil {
		n.mu.Lock()
		own = n.credHash
		n.mu.Unlock()
	}
	if n == nil || own == "" || !sameHash(own, hash) {
		return r.set.credentialRefusal(id, hash)
	}
	return nil
}

// applyRegistration writes a registration's fields into n. Requires n.mu.
func applyRegistration(n *node, req *nodeapi.RegisterRequest, labels map[string]string, now int64) {
	n.hostIP = req.HostIP
	if n.hostIP == "" {
		n.hostIP = req.NodeID
	}
	n.grpcPort = req.GRPCPort
	n.setLabels(labels)
	n.capacity, n.allocatable = req.Capacity, req.Allocatable
	n.instanceType, n.clusterLabel = req.InstanceType, req.ClusterLabel
	n.quotaCPU, n.quotaMemMB = req.QuotaCPU, req.QuotaMemMB
	n.createConcurrent, n.maxMVM = req.CreateConcurrentNum, req.MaxMVMNum
	n.pausedRatio = req.PausedReleaseRatio
	if req.Versions != nil || !req.InventoryIncomplete {
		n.setVersions(mergeVersions(n.versions, req.Versions, req.InventoryIncomplete))
	}
	if req.HostFacts != nil {
		n.setHostFacts(mergeHostFacts(n.hostFacts, *req.HostFacts))
	} else if n.hostFactsJSON == nil {
		n.setHostFacts(nodeapi.HostFacts{})
	}
	n.versionsHash, n.hostFactsHash = 0, 0
	n.schedule = nil
	n.updatedAt = now
	n.reportedAt, n.heartbeatAt = now, now
}

// mergeVersions returns the version set after a report: next replaces prev, or with
// incomplete is laid over prev by component (docs/nodes.md, "Node-agent API").
func mergeVersions(prev, next []nodeapi.ComponentVersion, incomplete bool) []nodeapi.ComponentVersion {
	if !incomplete {
		out := make([]nodeapi.ComponentVersion, len(next))
		copy(out, next)
		return out
	}
	out := make([]nodeapi.ComponentVersion, 0, len(prev)+len(next))
	replaced := map[string]bool{}
	for _, v := range next {
		replaced[v.Component] = true
	}
	for _, v := range prev {
		if !replaced[v.Component] {
			out = append(out, v)
		}
	}
	return append(out, next...)
}

// mergeHostFacts returns the host facts after a report: next, keeping prev's KVM module
// fingerprint and taint when next did not scan the module; the transient scanned flag is never
// kept (docs/nodes.md, "Node-agent API").
func mergeHostFacts(prev, next nodeapi.HostFacts) nodeapi.HostFacts {
	if !next.KVMModuleScanned {
		next.KVMModuleFingerprint, next.KVMModuleTaint = prev.KVMModuleFingerprint, prev.KVMModuleTaint
	}
	next.KVMModuleScanned = false
	return next
}

// mergeLabels returns stored with update's labels laid over it: stored keys kept, update's
// overwriting matching keys (the register and labels rules, docs/nodes.md, "Node-agent API" and
// "Internal nodes API"). The result is a new map; neither argument changes.
func mergeLabels(stored, update map[string]string) map[string]string {
	out := make(map[string]string, len(stored)+len(update))
	for k, v := range stored {
		out[k] = v
	}
	for k, v := range update {
		out[k] = v
	}
	return out
}
