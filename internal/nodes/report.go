package nodes

import (
	"context"
	"hash/maphash"
	"slices"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// errNodeNotFound is the report of a node that is not registered (docs/nodes.md, "Node-agent API":
// 404; our agent registers again on it).
var errNodeNotFound = cubefleet.Errorf(cubefleet.CodeNotFound, "node not found")

// Report applies status report sr of node id, sent with credential cred (docs/nodes.md, "Node-agent
// API"), and appends the node's NodeSnapshot to dst. It is the hot path: memory only, no lock but
// the node's while encoding, and the inventory decoded only when it changed. Errors: NOT_FOUND for
// a node that is not registered; a *Refusal (UNAUTHENTICATED) for a credential that is not the
// node's, or none from a node that has one; INVALID_INPUT for an inventory that breaks the rules
// (the node does not change).
func (r *Registry) Report(ctx context.Context, id string, sr *nodeapi.StatusRequest, cred Credential, dst []byte) ([]byte, error) {
	n, err := r.find(ctx, id)
	if err != nil {
		return nil, err
	}
	if n == nil {
		if cred.Kind == CredentialNode {
			return nil, r.set.credentialRefusal(id, cred.Hash)
		}
		return nil, errNodeNotFound
	}
	now := r.now()
	// A node that has been Ready once is observed first: a change readers already saw (Down
	// to Lost, say) but the health loop has not yet recorded gets its event before the report
	// turns the node Ready again.
	n.mu.Lock()
	wasReady := n.wasReady
	draining := n.drainAt != 0
	n.mu.Unlock()
	if wasReady {
		r.observe(n, now, r.store.Leader())
	}
	var unacked int64
	if draining { // counted before the lock: it reads the database
		unacked = r.countUnacknowledged(ctx, id)
	}
	n.mu.Lock()
	switch {
	case n.deleted:
		n.mu.Unlock()
		if cred.Kind == CredentialNode {
			return nil, r.set.credentialRefusal(id, cred.Hash)
		}
		return nil, errNodeNotFound
	case cred.Kind == CredentialNode && (n.credHash == "" || !sameHash(n.credHash, cred.Hash)):
		n.mu.Unlock()
		return nil, r.set.credentialRefusal(id, cred.Hash)
	case cred.Kind == CredentialNone && n.credHash != "":
		n.mu.Unlock()
		return nil, Unauthenticated("credential_required", "node %s joined with a join token and authenticates with its node credential", id)
	}
	ch, err := applyStatus(n, sr, now, r.seed, r.health)
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if draining {
		n.setUnacknowledged(unacked)
	}
	drain := n.settleDrain(now, r.pools.Load()) // a draining node that now runs no sandboxes is drained
	if ch.registration || drain.changed {
		n.save(r.store)
	}
	dst = n.appendSnapshot(dst, r.health.state(n, now))
	n.mu.Unlock()
	n.statusDirty.Store(true)
	if drain.typ != "" {
		r.emit(now, drain.typ, drain.data)
	}
	if ch.listed {
		r.listGen.Add(1)
	}
	r.notify(n)
	return dst, nil
}

// statusChange is what applying one report changed beyond the live fields.
type statusChange struct {
	registration bool // a durable field (quota, versions, host facts)
	listed       bool // a field of the node list beyond the per-report ones (templates too)
}

// applyStatus applies a status report to n at now (docs/nodes.md, "Node-agent API"): the raw
// inventory fields are decoded only when their content changed (hashed with seed), and every one is
// checked before anything changes, so a bad report changes nothing (INVALID_INPUT). The gap since
// the previous report goes into the observed report interval (health.observeInterval). Requires
// n.mu.
func applyStatus(n *node, req *nodeapi.StatusRequest, now int64, seed maphash.Seed, health HealthPolicy) (statusChange, error) {
	var ch statusChange
	var imgs []nodeapi.Image
	var tpls []nodeapi.LocalTemplate
	var vers []nodeapi.ComponentVersion
	var facts nodeapi.HostFacts
	var imgsHash, tplsHash, versHash, factsHash uint64
	var err error
	if req.Images.Reported() {
		if imgsHash = maphash.Bytes(seed, req.Images.JSON()); imgsHash != n.imagesHash {
			if imgs, err = req.DecodeImages(); err != nil {
				return ch, err
			}
		}
	}
	if req.LocalTemplates.Reported() {
		if tplsHash = maphash.Bytes(seed, req.LocalTemplates.JSON()); tplsHash != n.templatesHash || !n.templatesReported {
			if tpls, err = req.DecodeTemplates(); err != nil {
				return ch, err
			}
		}
	}
	if req.Versions.Reported() {
		if versHash = maphash.Bytes(seed, req.Versions.JSON()); versHash != n.versionsHash {
			if vers, err = req.DecodeVersions(); err != nil {
				return ch, err
			}
		}
	}
	if req.HostFacts.Reported() {
		if factsHash = maphash.Bytes(seed, req.HostFacts.JSON()); factsHash != n.hostFactsHash {
			if facts, _, err = req.DecodeHostFacts(); err != nil {
				return ch, err
			}
		}
	}

	hb := now
	if !req.HeartbeatTime.IsZero() {
		hb = min(req.HeartbeatTime.UnixMilli(), now) // future heartbeat times are clamped
	}
	health.observeInterval(n, now)
	n.reportedAt, n.heartbeatAt, n.learnedAt = now, hb, now
	conds := make([]nodeapi.Condition, len(req.Conditions))
	copy(conds, req.Conditions)
	n.conditions, n.ready = conds, readyOf(conds)
	if imgs != nil {
		n.setImages(imgs)
		n.imagesHash, n.inventoryDirty = imgsHash, true
	}
	if tpls != nil {
		n.setTemplates(tpls)
		n.templatesHash, n.templatesReported, n.inventoryDirty = tplsHash, true, true
		ch.listed = true
	}
	if req.Allocated != nil || req.DiskUsage != nil {
		mt := hb
		if !req.MetricTime.IsZero() {
			mt = min(req.MetricTime.UnixMilli(), now)
		}
		n.metricAt, n.metricLocalAt = mt, now
		if req.Allocated != nil {
			n.allocated, n.hasAllocated = *req.Allocated, true
		}
		if req.DiskUsage != nil {
			n.diskUsage, n.hasDiskUsage = *req.DiskUsage, true
		}
	}
	if req.Sandboxes != nil && (!n.sandboxesReported || !slices.Equal(req.Sandboxes, n.sandboxIDs)) {
		n.sandboxIDs, n.sandboxesReported = slices.Clone(req.Sandboxes), true // the request is pooled
	}
	if q := req.Quota; q != nil && !q.AllZero() {
		if q.MilliCPU != n.quotaCPU || q.MemMB != n.quotaMemMB || q.MaxMVMNum != n.maxMVM || q.CreateConcurrentNum != n.createConcurrent ||
			!sameRatio(q.PausedReleaseRatio, n.pausedRatio) && q.PausedReleaseRatio != nil {
			n.quotaCPU, n.quotaMemMB, n.maxMVM, n.createConcurrent = q.MilliCPU, q.MemMB, q.MaxMVMNum, q.CreateConcurrentNum
			if q.PausedReleaseRatio != nil {
				v := *q.PausedReleaseRatio
				n.pausedRatio = &v
			}
			n.schedule = nil
			ch.registration = true
		}
	}
	if versHash != 0 && versHash != n.versionsHash {
		n.setVersions(mergeVersions(n.versions, vers, req.InventoryIncomplete))
		n.versionsHash = versHash
		ch.registration = true
	}
	if factsHash != 0 && factsHash != n.hostFactsHash {
		merged := mergeHostFacts(n.hostFacts, facts)
		n.hostFactsHash = factsHash
		if merged != n.hostFacts {
			n.setHostFacts(merged)
			ch.registration = true
		}
	}
	ch.listed = ch.listed || ch.registration
	return ch, nil
}

func sameRatio(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// readyOf is the status of the last Ready condition: true only for "True".
func readyOf(conds []nodeapi.Condition) bool {
	ready := false
	for _, c := range conds {
		if c.Type == "Ready" {
			ready = c.Status == "True"
		}
	}
	return ready
}
