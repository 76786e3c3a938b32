package nodes

import (
	"context"
	"strconv"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// A node's JSON (nodeapi.NodeSnapshot for the node-agent and isolation/label answers,
// nodeapi.SchedulerNode for the internal nodes list) is appended by hand, without reflection:
// the nested objects a node reports (labels, images, templates, versions, host facts) are kept as
// canonical compact JSON, re-encoded only when they change, and copied in; the SchedulerNode's
// fields that change only with the registration are kept encoded too (n.schedule, about 1.5 KB),
// so listing 10,000 nodes is mostly copying.

// ListGeneration changes whenever the node list (AppendList) changes beyond the fields every
// report changes: a node added or removed, cordoned, relabelled, changing state, or reporting a
// new inventory or quota. A cached list of the same generation differs from a fresh one only
// in those per-report fields.
func (r *Registry) ListGeneration() uint64 { return r.listGen.Load() }

// AppendList appends the JSON array of the SchedulerNode (or, with scoreOnly, SchedulerScore) of
// every node in want (nil: every node), sorted by id (GET nodeapi.NodesPrefix, docs/nodes.md,
// "Internal nodes API").
func (r *Registry) AppendList(dst []byte, want map[string]bool, scoreOnly bool) []byte {
	dst = append(dst, '[')
	now := r.now()
	first := true
	for _, n := range r.set.sorted() {
		if want != nil && !want[n.id] {
			continue
		}
		n.mu.Lock()
		if n.deleted {
			n.mu.Unlock()
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = n.appendScheduler(dst, r.health.state(n, now), scoreOnly)
		n.mu.Unlock()
	}
	return append(dst, ']')
}

// AppendNode appends node id's SchedulerNode (or, with scoreOnly, SchedulerScore) to dst (GET
// nodeapi.NodePath). Errors: NOT_FOUND.
func (r *Registry) AppendNode(ctx context.Context, dst []byte, id string, scoreOnly bool) ([]byte, error) {
	n, err := r.live(ctx, id)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.appendScheduler(dst, r.health.state(n, r.now()), scoreOnly), nil
}

// orEmpty returns cached JSON, or empty when it was never set.
func orEmpty(b []byte, empty string) []byte {
	if b == nil {
		return []byte(empty)
	}
	return b
}

func appendResources(dst []byte, key string, r nodeapi.Resources) []byte {
	dst = appendKey(dst, key)
	dst = append(dst, `{"milli_cpu":`...)
	dst = strconv.AppendInt(dst, r.MilliCPU, 10)
	dst = appendIntField(dst, "memory_mb", r.MemoryMB)
	return append(dst, '}')
}

func appendStringField(dst []byte, key, v string) []byte {
	return nodeapi.AppendString(appendKey(dst, key), v)
}

func appendRawField(dst []byte, key string, raw []byte) []byte {
	return append(appendKey(dst, key), raw...)
}

// appendSnapshot appends n's NodeSnapshot (docs/nodes.md, "Node-agent API") in health state s.
// Requires n.mu.
func (n *node) appendSnapshot(dst []byte, s State) []byte {
	dst = append(dst, `{"node_id":`...)
	dst = nodeapi.AppendString(dst, n.id)
	dst = appendStringField(dst, "host_ip", n.hostIP)
	dst = appendIntField(dst, "grpc_port", n.grpcPort)
	dst = appendRawField(dst, "labels", orEmpty(n.labelsJSON, "{}"))
	dst = appendResources(dst, "capacity", n.capacity)
	dst = appendResources(dst, "allocatable", n.allocatable)
	dst = appendStringField(dst, "instance_type", n.instanceType)
	dst = appendStringField(dst, "cluster_label", n.clusterLabel)
	dst = appendIntField(dst, "quota_cpu", n.quotaCPU)
	dst = appendIntField(dst, "quota_mem_mb", n.quotaMemMB)
	dst = appendIntField(dst, "create_concurrent_num", n.createConcurrent)
	dst = appendIntField(dst, "max_mvm_num", n.maxMVM)
	if n.pausedRatio != nil {
		dst = appendFloatField(dst, "paused_release_ratio", *n.pausedRatio)
	}
	dst = appendRawField(dst, "images", orEmpty(n.imagesJSON, "[]"))
	dst = appendRawField(dst, "local_templates", orEmpty(n.templatesJSON, "[]"))
	dst = appendBoolField(dst, "local_templates_reported", n.templatesReported)
	dst = appendRawField(dst, "versions", orEmpty(n.versionsJSON, "[]"))
	dst = appendRawField(dst, "host_facts", orEmpty(n.hostFactsJSON, "{}"))
	dst = appendBoolField(dst, "scheduling_disabled", n.cordoned())
	if n.drainAt != 0 {
		dst = append(dst, `,"draining":true`...)
	}
	dst = append(dst, `,"conditions":`...)
	dst = nodeapi.AppendConditions(dst, n.conditions)
	dst = appendTimeField(dst, "heartbeat_time", n.heartbeatAt)
	dst = appendBoolField(dst, "healthy", s == StateReady)
	dst = appendBoolField(dst, "reported_ready", n.ready)
	if reason := unhealthyReason(s); reason != "" {
		dst = appendStringField(dst, "unhealthy_reason", reason)
	}
	dst = append(dst, `,"score":0`...)
	dst = appendTimeField(dst, "metric_update", n.metricAt)
	dst = appendTimeField(dst, "metric_local_update_at", n.metricLocalAt)
	a, d := n.allocated, n.diskUsage
	dst = appendIntField(dst, "quota_cpu_usage", a.MilliCPU)
	dst = appendIntField(dst, "quota_mem_mb_usage", a.MemoryMB)
	dst = appendIntField(dst, "mvm_num", a.MVMNum)
	dst = appendIntField(dst, "nic_queues", a.NICQueues)
	dst = appendFloatField(dst, "data_disk_usage_per", d.DataDiskUsagePer)
	dst = appendFloatField(dst, "storage_disk_usage_per", d.StorageDiskUsagePer)
	dst = appendFloatField(dst, "sys_disk_usage_per", d.SysDiskUsagePer)
	return append(dst, '}')
}

// appendScheduler appends n's SchedulerNode (CubeMaster's node.Node, docs/nodes.md, "Internal nodes
// API": PascalCase except uuid, mvm_num and nic_queues; LocalTemplates only once the node reported
// its inventory) in health state s; scoreOnly gives the reduced view of ?score_only=true. Requires
// n.mu.
func (n *node) appendScheduler(dst []byte, s State, scoreOnly bool) []byte {
	if scoreOnly {
		dst = append(dst, `{"InstanceID":`...)
		dst = nodeapi.AppendString(dst, n.id)
		dst = append(dst, `,"Score":0`...)
		dst = appendTimeField(dst, "MetricUpdateAt", n.metricAt)
		dst = appendTimeField(dst, "MetricLocalUpdateAt", n.metricLocalAt)
		dst = appendTimeField(dst, "MetaDataUpdateAt", n.heartbeatAt)
		return append(dst, '}')
	}
	dst = append(dst, n.staticScheduler()...)
	if n.ready {
		dst = append(dst, `,"ReportedReady":true`...)
	}
	dst = appendBoolField(dst, "Healthy", s == StateReady)
	if reason := unhealthyReason(s); reason != "" {
		dst = appendStringField(dst, "UnhealthyReason", reason)
	}
	dst = appendTimeField(dst, "MetaDataUpdateAt", n.heartbeatAt)
	dst = appendTimeField(dst, "MetricUpdateAt", n.metricAt)
	dst = appendTimeField(dst, "MetricLocalUpdateAt", n.metricLocalAt)
	a, d := n.allocated, n.diskUsage
	dst = appendIntField(dst, "QuotaCpuUsage", a.MilliCPU)
	dst = appendIntField(dst, "QuotaMemUsage", a.MemoryMB)
	dst = appendIntField(dst, "mvm_num", a.MVMNum)
	dst = appendIntField(dst, "nic_queues", a.NICQueues)
	dst = appendFloatField(dst, "DataDiskUsagePer", d.DataDiskUsagePer)
	dst = appendFloatField(dst, "StorageDiskUsagePer", d.StorageDiskUsagePer)
	dst = appendFloatField(dst, "SysDiskUsagePer", d.SysDiskUsagePer)
	dst = append(dst, `,"CpuUtil":0,"CpuLoadUsage":0,"MemUsage":0,"RealTimeCreateNum":0,"LocalCreateNum":0,"Score":0}`...)
	return dst
}

// staticScheduler returns the SchedulerNode fields of n that change only with its registration,
// labels or inventory, encoded once and kept until one of them changes. Requires n.mu.
func (n *node) staticScheduler() []byte {
	if n.schedule != nil {
		return n.schedule
	}
	instanceType := n.instanceType
	if instanceType == "" {
		instanceType = "default"
	}
	dst := make([]byte, 0, 1024)
	dst = append(dst, `{"InstanceID":`...)
	dst = nodeapi.AppendString(dst, n.id)
	dst = appendStringField(dst, "uuid", n.id)
	dst = appendStringField(dst, "IP", n.hostIP)
	dst = appendIntField(dst, "CpuTotal", n.capacity.MilliCPU/1000)
	dst = appendIntField(dst, "MemMBTotal", n.capacity.MemoryMB)
	dst = appendIntField(dst, "QuotaCpu", quotaCPU(n))
	dst = appendIntField(dst, "QuotaMem", quotaMem(n))
	dst = appendStringField(dst, "ClusterLabel", n.clusterLabel)
	dst = appendStringField(dst, "OssClusterLabel", n.clusterLabel)
	dst = appendStringField(dst, "InstanceType", instanceType)
	dst = append(dst, `,"HostStatus":"RUNNING"`...)
	dst = appendIntField(dst, "CreateConcurrentNum", n.createConcurrent)
	dst = appendIntField(dst, "MaxMvmLimit", n.maxMVM)
	dst = appendRawField(dst, "NodeLabels", orEmpty(n.labelsJSON, "{}"))
	dst = appendBoolField(dst, "SchedulingDisabled", n.cordoned())
	if n.templatesReported {
		dst = append(dst, `,"LocalTemplates":[`...)
		for i, id := range n.templateIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = nodeapi.AppendString(dst, id)
		}
		dst = append(dst, ']')
	}
	dst = appendBoolField(dst, "LocalTemplatesReported", n.templatesReported)
	dst = appendRawField(dst, "Versions", orEmpty(n.versionsJSON, "[]"))
	dst = appendRawField(dst, "HostFacts", orEmpty(n.hostFactsJSON, "{}"))
	n.schedule = dst
	return dst
}

func appendKey(dst []byte, key string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

func appendBoolField(dst []byte, key string, v bool) []byte {
	dst = appendKey(dst, key)
	return strconv.AppendBool(dst, v)
}

func appendIntField(dst []byte, key string, v int64) []byte {
	dst = appendKey(dst, key)
	return strconv.AppendInt(dst, v, 10)
}

// appendFloatField appends a float the way encoding/json writes it.
func appendFloatField(dst []byte, key string, v float64) []byte {
	return nodeapi.AppendFloat(appendKey(dst, key), v)
}

// appendTimeField appends a Unix-ms time as RFC 3339 in UTC (Go's zero time for 0, as Go's
// encoder writes an unset time.Time).
func appendTimeField(dst []byte, key string, ms int64) []byte {
	dst = appendKey(dst, key)
	dst = append(dst, '"')
	if ms == 0 {
		dst = append(dst, "0001-01-01T00:00:00Z"...)
	} else {
		dst = time.UnixMilli(ms).UTC().AppendFormat(dst, time.RFC3339Nano)
	}
	return append(dst, '"')
}
