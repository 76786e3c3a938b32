package nodes

import (
	"context"
	"time"

	"github.com/cubefleet/cubefleet/internal/scheduler"
)

// The registry is the scheduler's source of node states (scheduler.Source): Nodes for all of
// them, Subscribe for every change (a report, a registration, a cordon, a drain, labels, a
// deletion, a pool change, what another replica wrote). Health reaches the scheduler as
// ReadyUntil, computed from the one health function (HealthPolicy.readyUntil), so a node whose
// reports stop is no candidate from the instant Health stops calling it Ready, without waiting
// for a loop; a node with no report since this server started is none (ReportedSinceStart).

// minReportEvery is the shortest report period the scheduler is told (ms): the shortest a
// Cubelet (one-click: 1 s) or cubefleet agent uses, so two reports sent back to back (an agent
// restarting) do not make the node's metrics stale within milliseconds.
const minReportEvery = 1000

// subscriber is one Subscribe callback.
type subscriber struct {
	fn func(scheduler.NodeState, bool)
}

// Nodes returns the scheduler's view of every node (scheduler.Source).
func (r *Registry) Nodes(context.Context) ([]scheduler.NodeState, error) {
	pools := r.pools.Load()
	all := r.set.sorted()
	out := make([]scheduler.NodeState, 0, len(all))
	for _, n := range all {
		n.mu.Lock()
		if !n.deleted {
			out = append(out, r.schedulerState(n, pools))
		}
		n.mu.Unlock()
	}
	return out, nil
}

// Subscribe calls fn with a node's scheduler state after each change of the node, and with
// deleted true when it is removed, until cancel is called (scheduler.Source). fn must not
// block: it runs on the path of the change (a report's, for one).
func (r *Registry) Subscribe(fn func(state scheduler.NodeState, deleted bool)) (cancel func()) {
	s := &subscriber{fn: fn}
	r.subMu.Lock()
	next := append(append([]*subscriber(nil), r.subs()...), s)
	r.subscribers.Store(&next)
	r.subMu.Unlock()
	return func() {
		r.subMu.Lock()
		defer r.subMu.Unlock()
		var kept []*subscriber
		for _, o := range r.subs() {
			if o != s {
				kept = append(kept, o)
			}
		}
		r.subscribers.Store(&kept)
	}
}

func (r *Registry) subs() []*subscriber {
	if p := r.subscribers.Load(); p != nil {
		return *p
	}
	return nil
}

// notify tells the subscribers n's state. It takes n.mu: call it after releasing it.
func (r *Registry) notify(n *node) {
	subs := r.subs()
	if len(subs) == 0 {
		return
	}
	n.mu.Lock()
	st, deleted := r.schedulerState(n, r.pools.Load()), n.deleted
	n.mu.Unlock()
	for _, s := range subs {
		s.fn(st, deleted)
	}
}

// notifyAll tells the subscribers every node's state (the pools changed).
func (r *Registry) notifyAll() {
	if len(r.subs()) == 0 {
		return
	}
	for _, n := range r.set.sorted() {
		r.notify(n)
	}
}

// notifyDeleted tells the subscribers that node id is gone.
func (r *Registry) notifyDeleted(id string) {
	for _, s := range r.subs() {
		s.fn(scheduler.NodeState{ID: id}, true)
	}
}

// schedulerState is n as the scheduler sees it. Requires n.mu.
func (r *Registry) schedulerState(n *node, pools *poolIndex) scheduler.NodeState {
	st := scheduler.NodeState{
		ID:                  n.id,
		Cubefleet:           n.agent == AgentCubefleet,
		ReportedSinceStart:  r.health.reportedSinceStart(n),
		Ready:               n.ready,
		Cordoned:            n.cordoned(),
		Draining:            n.drainAt != 0,
		Labels:              n.labels,
		QuotaCPU:            quotaCPU(n),
		QuotaMemMiB:         quotaMem(n),
		MemTotalMiB:         n.capacity.MemoryMB,
		MaxMvmNum:           n.maxMVM,
		CreateConcurrentNum: n.createConcurrent,
		HasMetrics:          n.hasAllocated,
		AllocatedCPU:        n.allocated.MilliCPU,
		AllocatedMemMiB:     n.allocated.MemoryMB,
		AllocatedDiskMiB:    n.allocated.DataDiskMB,
		MvmNum:              n.allocated.MVMNum,
		MetricTime:          time.UnixMilli(n.metricAt),
		MetricsReceivedAt:   time.UnixMilli(max(n.metricLocalAt, n.learnedAt)),
	}
	if n.interval > 0 { // the observed report interval, smoothed (HealthPolicy.observeInterval)
		st.ReportPeriod = time.Duration(max(n.interval, minReportEvery)) * time.Millisecond
	}
	if p, reason := pools.of(n.poolID, n.clusterLabel); reason == "" {
		st.Pool = p.ID
	}
	if until := r.health.readyUntil(n); until > 0 {
		st.ReadyUntil = time.UnixMilli(until)
	}
	if n.hasDiskUsage {
		st.DataDiskUsage, st.StorageDiskUsage, st.SysDiskUsage = n.diskUsage.DataDiskUsagePer, n.diskUsage.StorageDiskUsagePer, n.diskUsage.SysDiskUsagePer
	}
	if n.templatesReported {
		st.Templates = n.templateIDs
	}
	if n.sandboxesReported {
		st.SandboxesReported, st.Sandboxes = true, n.sandboxIDs
	}
	return st
}
