package scheduler

import (
	"context"
	"sync"
	"time"
)

// NodeState is what the scheduler knows of one node: the node registry's view after its last
// report (docs/nodes.md, "Node-agent API" for the fields and units). The source
// fills it; the scheduler keeps a compact record of it and never holds on to the slices.
type NodeState struct {
	// ID is the node_id.
	ID string
	// Pool is the id of the pool the node belongs to (`pool_...`); a request places only in
	// its template's pool.
	Pool string
	// Cubefleet is true when the node runs `cubefleet agent` (it can receive sandboxes); a
	// stock Cubelet is registry-only and never a candidate.
	Cubefleet bool
	// ReportedSinceStart is true once the node has reported to this control plane since the
	// server started (the registry's rule, the one its health function's Unknown uses): a node
	// known only from the database is never a candidate.
	ReportedSinceStart bool
	// Ready is the Ready condition of the last report.
	Ready bool
	// ReadyUntil is when the registry's health function stops calling the node Ready for its
	// last report (the report's arrival plus the node's heartbeat window: twice its observed
	// report interval, at least the heartbeat timeout); zero when it is not Ready, or has not
	// reported since the server started.
	ReadyUntil time.Time
	// Cordoned and Draining make the node unschedulable (isolation is a cordon).
	Cordoned, Draining bool
	// Labels are the node's labels, for a request's node selector.
	Labels map[string]string

	// QuotaCPU is quota_cpu (millicores, schedulable, already overcommitted by the node).
	QuotaCPU int64
	// QuotaMemMiB is quota_mem_mb (MiB, already overcommitted by the node).
	QuotaMemMiB int64
	// MemTotalMiB is the node's memory capacity (capacity.memory_mb, MiB) that the mem
	// filter's host reserve is kept from; 0 means QuotaMemMiB.
	MemTotalMiB int64
	// DiskMiB is the disk room sandboxes may take (MiB); 0 means not reported, and only the
	// disk usage percentages limit the node.
	DiskMiB int64
	// MaxMvmNum is max_mvm_num; 0 means the configuration's node_max_mvm_num.
	MaxMvmNum int64
	// CreateConcurrentNum is create_concurrent_num, the node's limit of creates in flight; 0
	// means DefaultCreateConcurrentLimit.
	CreateConcurrentNum int64

	// HasMetrics is true once a report carried `allocated`; a node without metrics is never
	// a candidate.
	HasMetrics bool
	// AllocatedCPU (millicores), AllocatedMemMiB, AllocatedDiskMiB and MvmNum are what the node
	// reported committed to its sandboxes (`allocated`).
	AllocatedCPU, AllocatedMemMiB, AllocatedDiskMiB, MvmNum int64
	// DataDiskUsage, StorageDiskUsage and SysDiskUsage are disk_usage's percentages (0-100).
	DataDiskUsage, StorageDiskUsage, SysDiskUsage float64
	// CPUUtil (percent), CPULoad (runnable tasks) and MemUsageMiB are real-time usage figures
	// when the node reports them; zero when it does not (a stock Cubelet never does).
	CPUUtil, CPULoad float64
	MemUsageMiB      int64
	// MetricTime is the node's metric_time (clamped to its arrival by the registry).
	MetricTime time.Time
	// MetricsReceivedAt is when the control plane received those metrics (its own clock):
	// freshness is measured from it, so a node's clock skew cannot make it stale or fresh.
	MetricsReceivedAt time.Time
	// ReportPeriod is the node's report period: the interval the registry observed between
	// its status reports (the smoothed average its heartbeat window is twice of, at least one
	// second); 0 when not observed yet (then only metric_update_timeout bounds the metrics'
	// age).
	ReportPeriod time.Duration

	// Templates are the template ids the node holds (local_templates).
	Templates []string
	// SandboxesReported is true when the report listed the sandboxes the node runs;
	// Sandboxes are their ids. A reservation is released when its sandbox is listed.
	SandboxesReported bool
	Sandboxes         []string
}

// Source is where the scheduler gets node states: the node registry in the server. [Follow]
// reads every node once, then applies each change as the source announces it.
type Source interface {
	// Nodes returns the state of every node now.
	Nodes(ctx context.Context) ([]NodeState, error)
	// Subscribe calls fn with a node's new state after each change (a report, a cordon, a
	// drain, a pool change) and with deleted=true when the node is removed, until cancel is
	// called. fn must not block.
	Subscribe(fn func(state NodeState, deleted bool)) (cancel func())
}

// Follow feeds s from src until ctx ends: it subscribes, loads every node, then applies each
// change. Changes announced while the first load runs are applied after it, so an older state
// never overwrites a newer one. It returns src's error from Nodes, or nil when ctx ends.
func (s *Scheduler) Follow(ctx context.Context, src Source) error {
	type change struct {
		st      NodeState
		deleted bool
	}
	var (
		mu      sync.Mutex
		loaded  bool
		pending []change
	)
	apply := func(c change) {
		if c.deleted {
			s.Remove(c.st.ID)
			return
		}
		s.Update(c.st)
	}
	cancel := src.Subscribe(func(st NodeState, deleted bool) {
		mu.Lock()
		defer mu.Unlock()
		if !loaded {
			pending = append(pending, change{st, deleted})
			return
		}
		apply(change{st, deleted})
	})
	defer cancel()
	states, err := src.Nodes(ctx)
	if err != nil {
		return err
	}
	mu.Lock()
	for _, st := range states {
		s.Update(st)
	}
	for _, c := range pending {
		apply(c)
	}
	loaded, pending = true, nil
	mu.Unlock()
	<-ctx.Done()
	return nil
}
