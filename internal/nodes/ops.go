package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/netip"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// errTokenSpent is a join whose token another replica used up between our check and our write.
var errTokenSpent = errors.New("the join token was used up concurrently")

// register runs a registration (spec §1.3, with cubefleet's auth): c is the caller's
// credentials (the handler has refused unauthenticated callers outside the allowed networks).
// It returns the node and, for a join, the new node credential (shown once). A refusal is
// returned as *refusal (401; 403 for a join token bound to an address other than the
// registration's host_ip, or a node credential changing its node's host_ip; 409 for a join
// token naming a registered node); bad input as INVALID_INPUT.
func (r *Registry) register(ctx context.Context, req *RegisterRequest, c creds, peer netip.Addr) (*node, string, error) {
	if _, ok := req.Labels[ReservedLabel]; ok {
		return nil, "", cubefleet.Invalid("labels."+ReservedLabel, "label %s is reserved: only isolation sets it", ReservedLabel)
	}
	if c.kind == credKey {
		return nil, "", unauthenticated("api_key", "API keys cannot register nodes: send a join token or the node credential")
	}
	addr, err := registerAddr(req) // checked by the decoder; this is the parsed form
	if err != nil {
		return nil, "", err
	}
	if _, err := r.find(ctx, req.NodeID); err != nil { // loads a node another replica registered
		return nil, "", err
	}
	var use joinUse
	var credential string
	t := newTicket()
	n, created, err := func() (*node, bool, error) {
		r.regMu.Lock()
		defer r.regMu.Unlock()
		existing := r.node(req.NodeID)
		if c.kind == credJoin { // the token first, so a bad one learns nothing about node ids
			var f *refusal
			var err error
			if use, f, err = r.takeJoin(ctx, c.hash, peer, addr, req.NodeID); err != nil {
				return nil, false, err
			} else if f != nil {
				return nil, false, f
			}
		}
		if f := r.checkRegistrant(existing, req.NodeID, addr, c); f != nil {
			if use.tokenID != "" {
				r.releaseJoin(use)
			}
			return nil, false, f
		}
		var stored map[string]string
		if existing != nil {
			existing.mu.Lock()
			stored = existing.labels
			existing.mu.Unlock()
		}
		labels := mergeLabels(stored, req.Labels)
		if err := checkLabels(labels); err != nil {
			if use.tokenID != "" {
				r.releaseJoin(use)
			}
			return nil, false, err
		}
		now := r.now()
		n := existing
		if n == nil {
			n = &node{id: req.NodeID, agent: AgentCubelet, registeredAt: now}
			if c.kind == credJoin {
				secret, err := newSecret(CredentialPrefix)
				if err != nil {
					r.releaseJoin(use)
					return nil, false, err
				}
				credential = secret
				n.agent, n.poolID, n.credHash = AgentCubefleet, use.poolID, hashSecret(secret)
			}
		}
		n.mu.Lock()
		r.applyRegistration(n, req, labels, now)
		n.mu.Unlock()
		if existing == nil {
			r.add(n)
		}
		r.listGen.Add(1)
		n.statusDirty.Store(true)
		if use.tokenID != "" {
			r.w.addJoin(use, n, t)
		} else {
			r.w.markRegWait(n, t)
		}
		return n, existing == nil, nil
	}()
	if err != nil {
		return nil, "", err
	}
	r.w.kick()
	wait := time.NewTimer(r.cfg.RegisterWait)
	defer wait.Stop()
	select {
	case <-t.done:
		if errors.Is(t.err, errTokenSpent) {
			return nil, "", unauthenticated("join_token_used", "join token was already used")
		}
		r.m.registers.WithLabelValues("ok").Inc()
	case <-wait.C:
		// The database is busy (a long transaction holds it): the registration stays queued
		// for the flusher, and is journaled to disk so that it is durable when answered.
		if err := r.journalRegistration(ctx, n, use, t); err != nil {
			return nil, "", err
		}
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	if created {
		n.mu.Lock()
		d := r.eventOf(n)
		n.mu.Unlock()
		r.emit(r.now(), EventJoined, d)
	}
	if use.tokenID != "" {
		r.auditOK(ctx, "node-agent.register", "", n.id, Actor("join-token:"+use.tokenID),
			"joined pool "+use.poolID+" with join token "+use.tokenID+"; from "+peer.String())
	}
	return n, credential, nil
}

// journalRegistration makes a registration the database has not taken within RegisterWait
// durable in the journal, then lets it be answered. When the journal cannot be written it
// waits for the database instead (t done, or ctx ends): an answer always means durable.
func (r *Registry) journalRegistration(ctx context.Context, n *node, use joinUse, t *ticket) error {
	n.mu.Lock()
	rec := journalRecord{Row: registrationRow(n, r.holder)}
	n.mu.Unlock()
	if use.tokenID != "" {
		rec.Join = &journalJoin{TokenID: use.tokenID, IP: use.ip}
	}
	err := r.jnl.append(rec)
	if err == nil {
		r.m.registers.WithLabelValues("ok_journaled").Inc()
		r.log.WarnContext(ctx, "the database is busy: registration journaled to disk and answered; it is written when the database frees up", "node", n.id)
		return nil
	}
	if !errors.Is(err, errNoJournal) {
		r.log.ErrorContext(ctx, "journaling a registration failed; it waits for the database", "node", n.id, "err", err)
	}
	select {
	case <-t.done:
		if errors.Is(t.err, errTokenSpent) {
			return unauthenticated("join_token_used", "join token was already used")
		}
		r.m.registers.WithLabelValues("ok").Inc()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkRegistrant decides whether credentials c may register node id at address addr
// (existing: its node, or nil). A node credential registers only its own node, and keeps the
// address it joined with (403 otherwise: a node cannot move its registration to another
// address; delete it and join again). Requires r.regMu.
func (r *Registry) checkRegistrant(existing *node, id string, addr netip.Addr, c creds) *refusal {
	var credHash, hostIP string
	if existing != nil {
		existing.mu.Lock()
		credHash, hostIP = existing.credHash, existing.hostIP
		existing.mu.Unlock()
	}
	switch c.kind {
	case credJoin:
		if existing != nil {
			return &refusal{code: "node_exists", status: http.StatusConflict, outcome: "conflict",
				msg: fmt.Sprintf("node %s is already registered; a join token cannot take over a registered node: delete it first (cubefleet nodes delete %s), then join again", id, id)}
		}
	case credNode:
		if existing == nil || credHash == "" || !sameHash(credHash, c.hash) {
			return r.credentialRefusal(id, c.hash)
		}
		if prev, err := netip.ParseAddr(hostIP); err == nil && prev.Unmap() != addr || err != nil && hostIP != addr.String() {
			return &refusal{code: "host_ip_changed", status: http.StatusForbidden, outcome: audit.OutcomeForbidden,
				msg: fmt.Sprintf("node %s is registered with host_ip %s; its node credential cannot register it with host_ip %s: delete the node (cubefleet nodes delete %s) and join again with a join token for the new address", id, hostIP, addr, id)}
		}
		return nil
	case credNone:
		if credHash != "" {
			return unauthenticated("credential_required", "node %s joined with a join token and authenticates with its node credential", id)
		}
	}
	return nil
}

// credentialRefusal explains why node credential hash is not node id's.
func (r *Registry) credentialRefusal(id, hash string) *refusal {
	r.credMu.RLock()
	owner, ok := r.creds[hash]
	r.credMu.RUnlock()
	if ok && owner != id {
		return unauthenticated("other_node_credential", "the node credential belongs to another node")
	}
	return unauthenticated("unknown_credential", "unknown or revoked node credential (a deleted node needs a new join token)")
}

// applyRegistration writes a registration's fields into n. Requires n.mu.
func (r *Registry) applyRegistration(n *node, req *RegisterRequest, labels map[string]string, now int64) {
	n.hostIP = req.HostIP
	if n.hostIP == "" {
		n.hostIP = req.NodeID
	}
	n.grpcPort = req.GRPCPort
	n.setLabels(labels)
	n.capacity, n.allocatable = req.Capacity, req.Allocatable
	n.instanceType, n.clusterLabel = req.InstanceType, req.ClusterLabel
	n.quotaCPU, n.quotaMemMB = req.QuotaCPU, req.QuotaMemMB
	n.createConcurrent, n.maxMvm = req.CreateConcurrentNum, req.MaxMvmNum
	n.pausedRatio = req.PausedReleaseRatio
	if req.Versions != nil || !req.InventoryIncomplete {
		n.setVersions(mergeVersions(n.versions, req.Versions, req.InventoryIncomplete))
	}
	if req.HostFacts != nil {
		n.setHostFacts(mergeHostFacts(n.hostFacts, *req.HostFacts))
	} else if n.hostFactsJSON == nil {
		n.setHostFacts(HostFacts{})
	}
	n.versionsHash, n.hostFactsHash = 0, 0
	n.schedule = nil
	n.updatedAt = now
	n.reportedAt, n.healthBase, n.heartbeatAt = now, now, now
}

// mergeVersions returns the version set after a report: next replaces prev, or with
// incomplete is laid over prev by component (spec §1.3).
func mergeVersions(prev, next []Version, incomplete bool) []Version {
	if !incomplete {
		out := make([]Version, len(next))
		copy(out, next)
		return out
	}
	out := make([]Version, 0, len(prev)+len(next))
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
// kept (spec §1.4).
func mergeHostFacts(prev, next HostFacts) HostFacts {
	if !next.KVMModuleScanned {
		next.KVMModuleFingerprint, next.KVMModuleTaint = prev.KVMModuleFingerprint, prev.KVMModuleTaint
	}
	next.KVMModuleScanned = false
	return next
}

// statusChange is what applying one report changed beyond the live fields.
type statusChange struct {
	registration bool // a durable field (quota, versions, host facts)
	listed       bool // a field of the node list beyond the per-report ones (templates too)
}

// applyStatus applies a status report to n at now (spec §1.4): the raw inventory fields are
// decoded only when their content changed, and every one is checked before anything changes,
// so a bad report changes nothing (INVALID_INPUT). Requires n.mu.
func (r *Registry) applyStatus(n *node, req *StatusRequest, now int64) (statusChange, error) {
	var ch statusChange
	var imgs []Image
	var tpls []LocalTemplate
	var vers []Version
	var facts HostFacts
	var imgsHash, tplsHash, versHash, factsHash uint64
	if reported(req.Images) {
		if imgsHash = maphash.Bytes(r.seed, req.Images); imgsHash != n.imagesHash {
			if err := decodeRaw(req.Images, &imgs, "images"); err != nil {
				return ch, err
			}
			if err := checkImages(imgs); err != nil {
				return ch, err
			}
			if imgs == nil {
				imgs = []Image{}
			}
		}
	}
	if reported(req.LocalTemplates) {
		if tplsHash = maphash.Bytes(r.seed, req.LocalTemplates); tplsHash != n.templatesHash || !n.templatesReported {
			if err := decodeRaw(req.LocalTemplates, &tpls, "local_templates"); err != nil {
				return ch, err
			}
			if err := checkTemplates(tpls); err != nil {
				return ch, err
			}
			if tpls == nil {
				tpls = []LocalTemplate{}
			}
		}
	}
	if reported(req.Versions) {
		if versHash = maphash.Bytes(r.seed, req.Versions); versHash != n.versionsHash {
			if err := decodeRaw(req.Versions, &vers, "versions"); err != nil {
				return ch, err
			}
			if err := checkVersions(vers); err != nil {
				return ch, err
			}
		}
	}
	if reported(req.HostFacts) {
		if factsHash = maphash.Bytes(r.seed, req.HostFacts); factsHash != n.hostFactsHash {
			if err := decodeRaw(req.HostFacts, &facts, "host_facts"); err != nil {
				return ch, err
			}
			if err := checkHostFacts(&facts); err != nil {
				return ch, err
			}
		}
	}

	hb := now
	if !req.HeartbeatTime.IsZero() {
		hb = min(req.HeartbeatTime.UnixMilli(), now) // future heartbeat times are clamped
	}
	n.reportedAt, n.healthBase, n.heartbeatAt = now, now, hb
	conds := make([]Condition, len(req.Conditions))
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
	if q := req.Quota; q != nil && !q.zero() {
		if q.MilliCPU != n.quotaCPU || q.MemMB != n.quotaMemMB || q.MaxMvmNum != n.maxMvm || q.CreateConcurrentNum != n.createConcurrent ||
			!sameRatio(q.PausedReleaseRatio, n.pausedRatio) && q.PausedReleaseRatio != nil {
			n.quotaCPU, n.quotaMemMB, n.maxMvm, n.createConcurrent = q.MilliCPU, q.MemMB, q.MaxMvmNum, q.CreateConcurrentNum
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
func readyOf(conds []Condition) bool {
	ready := false
	for _, c := range conds {
		if c.Type == "Ready" {
			ready = c.Status == "True"
		}
	}
	return ready
}

// emit records a node event: a row for the flusher, a metric and a log line.
func (r *Registry) emit(now int64, typ string, d eventData) {
	data, err := json.Marshal(d)
	if err != nil {
		data = nil
	}
	r.w.addEvent(events.Event{At: now, TenantID: iam.RootTenant, Type: typ, Subject: d.NodeID, Data: data})
	r.m.events.WithLabelValues(typ).Inc()
	r.log.Info("node event", "type", typ, "node", d.NodeID, "ip", d.IP, "from", string(d.From), "to", string(d.To), "by", d.By)
}

// setCordon cordons (on) or uncordons node id: the reserved label is set to "true" (with
// detail, at most 200 runes) or removed (spec §2.1). Uncordoning also ends a drain. It is
// idempotent; a change is an event. The cordon remembers who set it (cordonBy): an operator
// cordoning an already cordoned node takes it over; a node (by.IsNode) may lift or change only
// a cordon it set itself. Errors: NOT_FOUND, INVALID_INPUT for a long detail or one with a
// control character, FORBIDDEN (wrapping errOperatorCordon) for a node touching an operator's
// cordon.
func (r *Registry) setCordon(ctx context.Context, id string, on bool, detail string, by Actor) (*node, error) {
	if err := checkDetail(detail); err != nil {
		return nil, err
	}
	n, err := r.live(ctx, id)
	if err != nil {
		return nil, err
	}
	now := r.now()
	n.mu.Lock()
	changed := n.cordoned() != on
	if n.cordoned() && by.IsNode() && Actor(n.cordonBy) != by {
		// An operator's cordon (or drain): the node may neither lift nor rewrite it. Cordoning
		// again without a new detail changes nothing and is answered as usual.
		if !on || detail != "" && detail != n.cordonDetail {
			err := operatorCordon(n, on)
			n.mu.Unlock()
			return nil, err
		}
		n.mu.Unlock()
		return n, nil
	}
	switch {
	case on && changed:
		n.isolate(detail, by)
	case on:
		n.cordonDetail, n.cordonBy = detail, string(by) // an operator takes the node's cordon over
	case !on && changed:
		labels := mergeLabels(n.labels, nil)
		delete(labels, ReservedLabel)
		n.setLabels(labels)
		n.cordonDetail, n.cordonBy = "", ""
	}
	if !on && n.drainAt != 0 {
		n.endDrain()
		detail = "ends the drain"
	}
	n.updatedAt = now
	d := r.eventOf(n)
	d.By, d.Detail = string(by), detail
	n.mu.Unlock()
	r.listGen.Add(1)
	r.w.markReg(n)
	if changed {
		typ := EventUncordoned
		if on {
			typ = EventCordoned
		}
		r.emit(now, typ, d)
	}
	return n, nil
}

// isolate cordons n: the isolation label (SchedulingDisabled on the wire) with detail, set by
// by. Requires n.mu.
func (n *node) isolate(detail string, by Actor) {
	n.setLabels(mergeLabels(n.labels, map[string]string{ReservedLabel: "true"}))
	n.cordonDetail, n.cordonBy = detail, string(by)
}

// errOperatorCordon marks a node's own credential refused to lift or change a cordon an
// operator set (FORBIDDEN); the internal route audits it as a refusal.
var errOperatorCordon = errors.New("the cordon is an operator's")

// operatorCordon is the FORBIDDEN answer to node n lifting (on false) or rewriting the cordon
// an operator set, naming who set it. Requires n.mu.
func operatorCordon(n *node, on bool) error {
	who := n.cordonBy
	if who == "" {
		who = "an operator (not recorded: it was cordoned before cordonedBy was kept)"
	}
	what := "lift"
	if on {
		what = "change"
	}
	msg := fmt.Sprintf("node %s was cordoned by %s; a node may %s only a cordon it set itself: ask an operator (cubefleet nodes uncordon %s)", n.id, who, what, n.id)
	if n.drainAt != 0 {
		msg = fmt.Sprintf("node %s was cordoned by %s and is draining (asked by %s); a node may %s only a cordon it set itself: ask an operator (cubefleet nodes uncordon %s ends the drain)",
			n.id, who, n.drainBy, what, n.id)
	}
	return &cubefleet.Error{Code: cubefleet.CodeForbidden, Err: errOperatorCordon, Message: msg}
}

// relabel merges set into node id's labels and removes the keys in remove (spec §2.1: merge;
// delete one). The reserved label cannot be set or removed (FORBIDDEN); the result must pass
// the label rules (INVALID_INPUT). Errors: NOT_FOUND.
func (r *Registry) relabel(ctx context.Context, id string, set map[string]string, remove []string) (*node, error) {
	if _, ok := set[ReservedLabel]; ok {
		return nil, cubefleet.Errorf(cubefleet.CodeForbidden, "cannot modify reserved label %s: use isolation (cordon)", ReservedLabel)
	}
	for _, k := range remove {
		if k == ReservedLabel {
			return nil, cubefleet.Errorf(cubefleet.CodeForbidden, "cannot delete reserved label %s: use isolation (uncordon)", ReservedLabel)
		}
	}
	n, err := r.live(ctx, id)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	labels := mergeLabels(n.labels, set)
	for _, k := range remove {
		delete(labels, k)
	}
	if err := checkLabels(labels); err != nil {
		n.mu.Unlock()
		return nil, err
	}
	n.setLabels(labels)
	n.updatedAt = r.now()
	n.mu.Unlock()
	r.listGen.Add(1)
	r.w.markReg(n)
	return n, nil
}

// errSandboxCheck marks a delete refused because the node's sandbox count cannot be trusted
// (it is not Ready); the internal route answers it 502 SANDBOX_CHECK_FAILED as upstream does
// (ErrSandboxCheckFailed, spec §2.1), the public API 409 CONFLICT.
var errSandboxCheck = errors.New("sandbox check failed")

// forceHint says how the caller of a delete forces it, in the refusals that suggest it.
type forceHint int

const (
	forceFlag  forceHint = iota // the public API and the CLI: --force
	forceQuery                  // the internal route: ?force=true
)

// how renders the hint for node id.
func (h forceHint) how(id string) string {
	if h == forceQuery {
		return "add force=true (DELETE " + NodesPrefix + "/" + id + "?force=true)"
	}
	return "use --force (cubefleet nodes delete " + id + " --force)"
}

// deleteNode deletes node id (spec §2.1): it must be cordoned (CONFLICT otherwise); without
// force it must also be Ready (CONFLICT wrapping errSandboxCheck: its count is unknown) and run
// no sandboxes (its reported allocated.mvm_num; CONFLICT); the refusals say how to force it
// (hint). Its credential is revoked at once: its agent gets 401 and needs a new join token; a
// stock Cubelet gets 404. Returns the node as it was. Errors: NOT_FOUND.
func (r *Registry) deleteNode(ctx context.Context, id string, force bool, by Actor, hint forceHint) (*node, error) {
	if _, err := r.live(ctx, id); err != nil {
		return nil, err
	}
	r.regMu.Lock()
	defer r.regMu.Unlock()
	n := r.node(id)
	if n == nil {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "node %s not found", id)
	}
	now := r.now()
	n.mu.Lock()
	if !n.cordoned() {
		n.mu.Unlock()
		return nil, cubefleet.Errorf(cubefleet.CodeConflict, "node %s is not isolated: cordon it first", id)
	}
	if !force {
		if s := r.health(n, now); s != StateReady {
			n.mu.Unlock()
			return nil, &cubefleet.Error{Code: cubefleet.CodeConflict, Err: errSandboxCheck,
				Message: fmt.Sprintf("node %s is %s, so its sandbox count is unknown: to delete it anyway, %s", id, s, hint.how(id))}
		}
		if n.hasAllocated && n.allocated.MvmNum > 0 {
			n.mu.Unlock()
			return nil, cubefleet.Errorf(cubefleet.CodeConflict, "node %s still runs %d sandboxes (mvm_num): drain it (cubefleet nodes drain %s --wait), or to delete it anyway, %s",
				id, n.allocated.MvmNum, id, hint.how(id))
		}
	}
	n.deleted = true
	cred := n.credHash
	d := r.eventOf(n)
	d.By, d.Force, d.From = string(by), force, n.state
	n.mu.Unlock()
	r.remove(n, cred)
	r.w.addDelete(id, now)
	r.emit(now, EventDeleted, d)
	r.countStates()
	return n, nil
}

// Cordon cordons node id (isolation: no new work; SchedulingDisabled on the wire), with an
// optional detail of at most 200 runes, recording by as who set it (View.CordonedBy; an
// operator cordoning a node the node cordoned itself takes the cordon over). Idempotent.
// Errors: NOT_FOUND, INVALID_INPUT; FORBIDDEN when by is a node (Actor.IsNode) changing an
// operator's cordon.
func (r *Registry) Cordon(ctx context.Context, id, detail string, by Actor) (View, error) {
	n, err := r.setCordon(ctx, id, true, detail, by)
	return r.viewOf(n, err)
}

// Uncordon lifts node id's isolation and ends its drain, if any. Idempotent. Errors:
// NOT_FOUND; FORBIDDEN when by is a node (Actor.IsNode) and the cordon is not its own (an
// operator cordoned or drained it), naming who set it.
func (r *Registry) Uncordon(ctx context.Context, id string, by Actor) (View, error) {
	n, err := r.setCordon(ctx, id, false, "", by)
	return r.viewOf(n, err)
}

// Label merges set into node id's labels and removes the keys in remove. Errors: NOT_FOUND,
// FORBIDDEN for the reserved label, INVALID_INPUT for a label the rules refuse or more than
// MaxLabels.
func (r *Registry) Label(ctx context.Context, id string, set map[string]string, remove []string) (View, error) {
	n, err := r.relabel(ctx, id, set, remove)
	return r.viewOf(n, err)
}

// Delete deletes node id and revokes its credential; it returns the node as it was. Errors:
// NOT_FOUND; CONFLICT when it is not cordoned, or (without force) not Ready or still running
// sandboxes (the message says to use --force).
func (r *Registry) Delete(ctx context.Context, id string, force bool, by Actor) (View, error) {
	n, err := r.deleteNode(ctx, id, force, by, forceFlag)
	return r.viewOf(n, err)
}

func (r *Registry) viewOf(n *node, err error) (View, error) {
	if err != nil {
		return View{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return r.view(n, r.now()), nil
}
