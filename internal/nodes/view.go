package nodes

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// RegistryOnlyReason is why a stock Cubelet never receives work from cubefleet.
const RegistryOnlyReason = "registry-only: a stock Cubelet does not serve cubefleet's agent work API (listed, health-tracked, cordoned and deleted only)"

// View is a node as the public API (nodes.list, nodes.get) shows it. Times are Unix
// milliseconds on the control plane's clock; CPU in thousandths of a core, memory in MiB.
// State is Health's. A node is a candidate for work only when it is Ready, which implies
// ReportedSinceStart: a node with no report since this server started is Unknown, then what its
// last report makes it, never Ready. HeartbeatWindowMs is its heartbeat window
// (HealthPolicy.Window of ReportIntervalMs).
type View struct {
	ID                   string                     `json:"id"`
	IP                   string                     `json:"ip"`
	Agent                string                     `json:"agent"` // "cubefleet" or "cubelet" (stock)
	RegistryOnly         bool                       `json:"registryOnly"`
	PoolID               string                     `json:"poolId,omitempty"`
	Pool                 string                     `json:"pool,omitempty"` // the pool's fleet name
	ClusterLabel         string                     `json:"clusterLabel,omitempty"`
	State                State                      `json:"state"`
	StateSince           int64                      `json:"stateSince,omitempty"`
	Healthy              bool                       `json:"healthy"`
	UnhealthyReason      string                     `json:"unhealthyReason,omitempty"`
	Cordoned             bool                       `json:"cordoned"`
	CordonDetail         string                     `json:"cordonDetail,omitempty"`
	CordonedBy           string                     `json:"cordonedBy,omitempty"` // who set the cordon: a principal id, or node:<id> (the node itself)
	Drain                *DrainView                 `json:"drain,omitempty"`      // absent unless the node is draining
	Schedulable          bool                       `json:"schedulable"`
	UnschedulableReasons []string                   `json:"unschedulableReasons,omitempty"`
	Labels               map[string]string          `json:"labels"`
	InstanceType         string                     `json:"instanceType,omitempty"`
	RegisteredAt         int64                      `json:"registeredAt"`
	LastReportAt         int64                      `json:"lastReportAt"`
	HeartbeatAt          int64                      `json:"heartbeatAt,omitempty"`      // the node's clock, clamped
	ReportedSinceStart   bool                       `json:"reportedSinceStart"`         // a report (or registration) arrived since this server started
	HeartbeatWindowMs    int64                      `json:"heartbeatWindowMs"`          // Suspect after this long without a report, Down after twice
	ReportIntervalMs     int64                      `json:"reportIntervalMs,omitempty"` // the observed report interval (smoothed); absent until observed
	Capacity             ResourcesView              `json:"capacity"`
	Quota                QuotaView                  `json:"quota"`
	Allocated            *AllocatedView             `json:"allocated,omitempty"`
	DiskUsage            *DiskUsageView             `json:"diskUsage,omitempty"`
	Images               int                        `json:"images"`
	LocalTemplates       []string                   `json:"localTemplates,omitempty"`
	Versions             []nodeapi.ComponentVersion `json:"versions,omitempty"`  // keys as the node reports them
	HostFacts            *nodeapi.HostFacts         `json:"hostFacts,omitempty"` // keys as the node reports them

	// NotReadyReason and NotReadyMessage are the reason and message of the Ready condition the
	// node last reported, when that condition is not True (absent otherwise): why the node
	// says it cannot take work, in its own words (e.g. SandboxRuntimeUnavailable: sandbox
	// directory ... in use by process 24288).
	NotReadyReason  string `json:"notReadyReason,omitempty"`
	NotReadyMessage string `json:"notReadyMessage,omitempty"`
}

// ResourcesView is a capacity: MilliCPU in thousandths of a core, MemoryMiB in MiB.
type ResourcesView struct {
	MilliCPU  int64 `json:"milliCpu"`
	MemoryMiB int64 `json:"memoryMiB"`
}

// QuotaView is what the scheduler may place on a node: MilliCPU (thousandths of a core,
// already overcommitted), MemoryMiB, MaxMvm microVMs, CreateConcurrent creates at once
// (0: no per-node limit).
type QuotaView struct {
	MilliCPU           int64    `json:"milliCpu"`
	MemoryMiB          int64    `json:"memoryMiB"`
	MaxMvm             int64    `json:"maxMvm"`
	CreateConcurrent   int64    `json:"createConcurrent"`
	PausedReleaseRatio *float64 `json:"pausedReleaseRatio,omitempty"`
}

// AllocatedView is what a node last reported as committed to sandboxes: MilliCPU, MemoryMiB,
// Mvm microVMs (counted as its running sandboxes), MvmRunning, NICQueues, disks in MiB. At is
// the node's metric time.
type AllocatedView struct {
	MilliCPU      int64 `json:"milliCpu"`
	MemoryMiB     int64 `json:"memoryMiB"`
	Mvm           int64 `json:"mvm"`
	MvmRunning    int64 `json:"mvmRunning"`
	NICQueues     int64 `json:"nicQueues"`
	DataDiskMiB   int64 `json:"dataDiskMiB"`
	StorageDiskMB int64 `json:"storageDiskMiB"`
	At            int64 `json:"at,omitempty"`
}

// DiskUsageView is how full a node's disks are, in percent.
type DiskUsageView struct {
	Data    float64 `json:"dataPercent"`
	Storage float64 `json:"storagePercent"`
	Sys     float64 `json:"sysPercent"`
}

// view renders n in state s (Health at now, under health). Requires n.mu.
func (n *node) view(s State, health HealthPolicy, pools *poolIndex) View {
	v := View{
		ID: n.id, IP: n.hostIP, Agent: n.agent, RegistryOnly: n.agent == AgentCubelet, PoolID: n.poolID,
		ClusterLabel: n.clusterLabel, State: s, StateSince: n.stateAt, Healthy: s == StateReady, UnhealthyReason: unhealthyReason(s),
		Cordoned: n.cordoned(), CordonDetail: n.cordonDetail, CordonedBy: n.cordonBy, Labels: map[string]string{}, InstanceType: n.instanceType,
		RegisteredAt: n.registeredAt, LastReportAt: n.reportedAt, HeartbeatAt: n.heartbeatAt,
		ReportedSinceStart: health.reportedSinceStart(n), HeartbeatWindowMs: health.Window(time.Duration(n.interval) * time.Millisecond).Milliseconds(),
		ReportIntervalMs: n.interval,
		Capacity:         ResourcesView{MilliCPU: n.capacity.MilliCPU, MemoryMiB: n.capacity.MemoryMB},
		Quota: QuotaView{MilliCPU: quotaCPU(n), MemoryMiB: quotaMem(n), MaxMvm: n.maxMVM, CreateConcurrent: n.createConcurrent,
			PausedReleaseRatio: n.pausedRatio},
		Images: n.imageCount, Versions: n.versions,
	}
	if s != n.state {
		v.StateSince = 0 // the health check has not seen the change yet
	}
	v.Drain = n.drainView()
	for _, c := range n.conditions {
		if c.Type == "Ready" && c.Status != "True" {
			v.NotReadyReason, v.NotReadyMessage = c.Reason, c.Message
		}
	}
	for k, val := range n.labels {
		v.Labels[k] = val
	}
	v.Versions = append([]nodeapi.ComponentVersion(nil), n.versions...)
	p, reason := pools.of(n.poolID, n.clusterLabel)
	if p.ID != "" {
		v.PoolID, v.Pool = p.ID, p.Name
	}
	var reasons []string
	if n.agent == AgentCubelet {
		reasons = append(reasons, RegistryOnlyReason)
	}
	switch s {
	case StateReady:
	case StateUnknown:
		reasons = append(reasons, "not ready: Unknown (no report since this server started)")
	default:
		reasons = append(reasons, fmt.Sprintf("not ready: %s", s))
	}
	if v.Cordoned {
		reasons = append(reasons, "cordoned")
	}
	if reason != "" {
		reasons = append(reasons, reason)
	}
	v.Schedulable, v.UnschedulableReasons = len(reasons) == 0, reasons
	if n.hasAllocated {
		a := n.allocated
		v.Allocated = &AllocatedView{MilliCPU: a.MilliCPU, MemoryMiB: a.MemoryMB, Mvm: a.MVMNum, MvmRunning: a.MVMRunningNum,
			NICQueues: a.NICQueues, DataDiskMiB: a.DataDiskMB, StorageDiskMB: a.StorageDiskMB, At: n.metricAt}
	}
	if n.hasDiskUsage {
		d := n.diskUsage
		v.DiskUsage = &DiskUsageView{Data: d.DataDiskUsagePer, Storage: d.StorageDiskUsagePer, Sys: d.SysDiskUsagePer}
	}
	if n.templatesReported {
		v.LocalTemplates = append([]string{}, n.templateIDs...)
	}
	if n.hostFacts != (nodeapi.HostFacts{}) {
		hf := n.hostFacts
		v.HostFacts = &hf
	}
	return v
}

func quotaCPU(n *node) int64 {
	if n.quotaCPU != 0 {
		return n.quotaCPU
	}
	return n.allocatable.MilliCPU
}

func quotaMem(n *node) int64 {
	if n.quotaMemMB != 0 {
		return n.quotaMemMB
	}
	return n.allocatable.MemoryMB
}

// ListFilter selects nodes: Pool is a pool id or fleet name, State a health state; empty
// fields match every node.
type ListFilter struct {
	Pool  string
	State State
}

// List returns the nodes matching f, sorted by id.
func (r *Registry) List(ctx context.Context, f ListFilter) ([]View, error) {
	if f.State != "" && !slices.Contains(States, f.State) {
		return nil, cubefleet.Invalid("state", "state %q: want one of %s", f.State, StateNames())
	}
	now := r.now()
	out := []View{}
	for _, n := range r.set.sorted() {
		n.mu.Lock()
		if n.deleted {
			n.mu.Unlock()
			continue
		}
		v := n.view(r.health.state(n, now), r.health, r.pools.Load())
		n.mu.Unlock()
		if f.State != "" && v.State != f.State {
			continue
		}
		if f.Pool != "" && v.PoolID != f.Pool && v.Pool != f.Pool && v.ClusterLabel != f.Pool {
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// Get returns node id. Errors: NOT_FOUND.
func (r *Registry) Get(ctx context.Context, id string) (View, error) {
	n, err := r.live(ctx, id)
	if err != nil {
		return View{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view(r.health.state(n, r.now()), r.health, r.pools.Load()), nil
}

// live returns node id or NOT_FOUND.
func (r *Registry) live(ctx context.Context, id string) (*node, error) {
	n, err := r.find(ctx, id)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "node %s not found", id)
	}
	return n, nil
}

func (r *Registry) viewOf(n *node, err error) (View, error) {
	if err != nil {
		return View{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view(r.health.state(n, r.now()), r.health, r.pools.Load()), nil
}
