package nodes

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// node is one registered node. Every field after mu is guarded by mu, except statusDirty.
// Slices and maps held here are never modified in place: an update replaces them (through the
// set* methods, which also refresh their canonical JSON), so a copy of the struct taken under
// mu stays valid after mu is released.
type node struct {
	id string

	// statusDirty is set by every report and cleared by TakeStatus, which hands the status to
	// the store.
	statusDirty atomic.Bool

	mu sync.Mutex

	// Registration (durable: Registration).
	hostIP           string
	grpcPort         int64
	labels           map[string]string // includes nodeapi.ReservedLabel while cordoned
	labelsJSON       []byte
	capacity         nodeapi.Resources
	allocatable      nodeapi.Resources
	instanceType     string
	clusterLabel     string
	quotaCPU         int64
	quotaMemMB       int64
	createConcurrent int64
	maxMVM           int64
	pausedRatio      *float64
	versions         []nodeapi.ComponentVersion
	versionsJSON     []byte
	hostFacts        nodeapi.HostFacts
	hostFactsJSON    []byte
	agent            string // AgentCubefleet or AgentCubelet
	poolID           string // from the join token; "" for a stock Cubelet
	credHash         string // hex SHA-256 of the node credential; "" for a stock Cubelet
	cordonDetail     string
	cordonBy         string // who set the cordon (an Actor; "" when not cordoned or not recorded)
	registeredAt     int64  // Unix ms
	updatedAt        int64  // Unix ms

	// Drain (durable: Registration's Drain* fields).
	drainReason string // why the drain was asked ("" when not draining, or none given)
	drainBy     string // who asked it (an Actor)
	drainAt     int64  // Unix ms when the drain was asked; 0: not draining
	drainedAt   int64  // Unix ms when the draining node first reported no sandboxes; 0: not yet
	// drainDeadline is Unix ms when the drain's sandboxes still running are stopped; 0: none.
	drainDeadline int64

	// Live status (Status, handed to the store every flush).
	reportedAt        int64 // Unix ms on the control plane's clock; the last register or report
	statusAt          int64 // Unix ms of the last status report this replica applied (its own, or another replica's); 0: none yet
	interval          int64 // ms, the observed report interval (observeInterval); 0: not observed yet
	heartbeatAt       int64 // Unix ms, the node's heartbeat_time clamped to reportedAt
	ready             bool
	conditions        []nodeapi.Condition
	imagesJSON        []byte // canonical JSON of the reported images
	imageCount        int
	templatesJSON     []byte   // canonical JSON of the reported local templates
	templateIDs       []string // their template ids
	templatesReported bool
	allocated         nodeapi.Allocated
	hasAllocated      bool
	diskUsage         nodeapi.DiskUsage
	hasDiskUsage      bool
	metricAt          int64 // Unix ms, the node's metric_time (clamped)
	metricLocalAt     int64 // Unix ms, when the control plane received the last metrics
	learnedAt         int64 // Unix ms, when this replica last learned of a report (its own, or another replica's)
	inventoryDirty    bool  // images or templates changed since the last TakeStatus
	// sandboxIDs are the sandboxes the last report of cubefleet agent listed (never modified
	// in place); sandboxesReported says a report listed them (a stock Cubelet never does).
	sandboxIDs        []string
	sandboxesReported bool
	// unacked is how many sandboxes placed on the node its agent had not acknowledged when a
	// drain or a report while draining last counted them (setUnacknowledged); 0 otherwise.
	unacked int64

	// Hashes of the raw inventory last applied, so an unchanged one is not decoded again.
	imagesHash, templatesHash, versionsHash, hostFactsHash uint64

	state    State // as of the last health check; "" until the first one after joining
	stateAt  int64 // Unix ms of the last state change
	known    State // the last state other than Unknown the events speak of (a restart keeps it; durable: Registration.State)
	wasReady bool  // the node has been Ready at least once
	deleted  bool
	schedule []byte // the encoded static SchedulerNode fields (staticScheduler); nil when stale
}

// cordoned reports whether n carries the isolation label. Requires n.mu.
func (n *node) cordoned() bool { _, ok := n.labels[nodeapi.ReservedLabel]; return ok }

// canonical is v as compact JSON with sorted map keys (encoding/json), for the cached parts.
func canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: plain values only
		return []byte("null")
	}
	return b
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// setLabels replaces n's labels. Requires n.mu.
func (n *node) setLabels(labels map[string]string) {
	if labels == nil {
		labels = map[string]string{}
	}
	n.labels, n.labelsJSON, n.schedule = labels, canonical(labels), nil
}

// setImages replaces n's image inventory. Requires n.mu.
func (n *node) setImages(images []nodeapi.Image) {
	n.imagesJSON, n.imageCount = canonical(nonNil(images)), len(images)
}

// setTemplates replaces n's template inventory. Requires n.mu.
func (n *node) setTemplates(tpls []nodeapi.LocalTemplate) {
	n.templatesJSON, n.schedule = canonical(nonNil(tpls)), nil
	n.templateIDs = make([]string, len(tpls))
	for i, t := range tpls {
		n.templateIDs[i] = t.TemplateID
	}
}

// setVersions replaces n's component versions. Requires n.mu.
func (n *node) setVersions(v []nodeapi.ComponentVersion) {
	n.versions, n.versionsJSON, n.schedule = v, canonical(nonNil(v)), nil
}

// setHostFacts replaces n's host facts. Requires n.mu.
func (n *node) setHostFacts(h nodeapi.HostFacts) {
	n.hostFacts, n.hostFactsJSON, n.schedule = h, canonical(h), nil
}

// registration copies n's durable registration. Requires n.mu.
func (n *node) registration() Registration {
	return Registration{
		NodeID: n.id, HostIP: n.hostIP, Agent: n.agent, PoolID: n.poolID, ClusterLabel: n.clusterLabel, Labels: n.labels,
		GRPCPort: n.grpcPort, Capacity: n.capacity, Allocatable: n.allocatable, InstanceType: n.instanceType,
		QuotaCPU: n.quotaCPU, QuotaMemMB: n.quotaMemMB, CreateConcurrentNum: n.createConcurrent, MaxMVMNum: n.maxMVM,
		PausedReleaseRatio: n.pausedRatio, Versions: n.versions, HostFacts: n.hostFacts, CredentialHash: n.credHash,
		CordonDetail: n.cordonDetail, CordonBy: n.cordonBy, State: n.known, RegisteredAt: n.registeredAt, UpdatedAt: n.updatedAt,
		DrainReason: n.drainReason, DrainBy: n.drainBy, DrainAt: n.drainAt, DrainedAt: n.drainedAt, DrainDeadline: n.drainDeadline,
	}
}

// save hands n's registration to st for the next flush, unless n was deleted (its rows are
// gone). Requires n.mu.
func (n *node) save(st Store) {
	if !n.deleted {
		st.Save(n.registration())
	}
}

// setRegistration copies the registration fields of r into n (restoring a stored node, or
// taking in another replica's change). Requires n.mu.
func (n *node) setRegistration(r *Registration) {
	n.hostIP, n.grpcPort, n.capacity, n.allocatable = r.HostIP, r.GRPCPort, r.Capacity, r.Allocatable
	n.instanceType, n.clusterLabel = r.InstanceType, r.ClusterLabel
	n.quotaCPU, n.quotaMemMB, n.createConcurrent, n.maxMVM, n.pausedRatio = r.QuotaCPU, r.QuotaMemMB, r.CreateConcurrentNum, r.MaxMVMNum, r.PausedReleaseRatio
	n.setLabels(r.Labels)
	n.setVersions(r.Versions)
	n.setHostFacts(r.HostFacts)
	n.agent, n.poolID, n.credHash, n.cordonDetail, n.cordonBy = r.Agent, r.PoolID, r.CredentialHash, r.CordonDetail, r.CordonBy
	n.drainReason, n.drainBy, n.drainAt, n.drainedAt, n.drainDeadline = r.DrainReason, r.DrainBy, r.DrainAt, r.DrainedAt, r.DrainDeadline
	n.registeredAt, n.updatedAt = r.RegisteredAt, r.UpdatedAt
	n.versionsHash, n.hostFactsHash = 0, 0
}

// status copies n's live status; with the inventory when it changed since the last copy
// (which clears the mark). Requires n.mu.
func (n *node) status() Status {
	s := Status{NodeID: n.id, ReportedAt: n.reportedAt, HeartbeatAt: n.heartbeatAt, Ready: n.ready, Live: true, Conditions: n.conditions,
		MetricAt: n.metricAt, MetricLocalAt: n.metricLocalAt, ReportInterval: n.interval}
	if n.sandboxesReported {
		s.Sandboxes = nonNil(n.sandboxIDs)
	}
	if n.hasAllocated {
		a := n.allocated
		s.Allocated = &a
	}
	if n.hasDiskUsage {
		d := n.diskUsage
		s.DiskUsage = &d
	}
	if n.inventoryDirty {
		s.Inventory = &Inventory{Images: n.imagesJSON, Templates: n.templatesJSON, TemplatesReported: n.templatesReported}
		n.inventoryDirty = false
	}
	return s
}

// setLive copies a report's fields of s into n: its times and readiness and, when s.Live, the
// conditions, metrics (Allocated and DiskUsage only when s has them) and the observed report
// interval (when s has one). Requires n.mu.
func (n *node) setLive(s *Status) {
	n.reportedAt, n.heartbeatAt, n.ready = s.ReportedAt, s.HeartbeatAt, s.Ready
	if !s.Live {
		return
	}
	n.conditions, n.metricAt, n.metricLocalAt = s.Conditions, s.MetricAt, s.MetricLocalAt
	if s.ReportInterval > 0 {
		n.interval = s.ReportInterval
	}
	if s.Allocated != nil {
		n.allocated, n.hasAllocated = *s.Allocated, true
	}
	if s.DiskUsage != nil {
		n.diskUsage, n.hasDiskUsage = *s.DiskUsage, true
	}
	if s.Sandboxes != nil {
		n.sandboxIDs, n.sandboxesReported = s.Sandboxes, true
	}
}

// setInventory restores a stored inventory. Requires n.mu.
func (n *node) setInventory(inv *Inventory) error {
	if len(inv.Images) > 0 {
		var images []nodeapi.Image
		if err := json.Unmarshal(inv.Images, &images); err != nil {
			return fmt.Errorf("images: %w", err)
		}
		n.setImages(images)
	}
	if len(inv.Templates) > 0 {
		var templates []nodeapi.LocalTemplate
		if err := json.Unmarshal(inv.Templates, &templates); err != nil {
			return fmt.Errorf("templates: %w", err)
		}
		n.setTemplates(templates)
	}
	n.templatesReported = inv.TemplatesReported
	return nil
}
