package nodeapi

import (
	"time"
)

// The answers of the node-agent and internal nodes routes, field for field and in the order the
// registry writes them (docs/nodes.md, "Internal nodes API" and "Node-agent API"): compact JSON,
// times RFC 3339 in UTC (Go's zero time, 0001-01-01T00:00:00Z, when unset). A reader may decode
// them with these types; the registry writes them by hand for speed, and its tests check that what
// it writes decodes into these types and encodes back to the same bytes.

// NodeSnapshot is CubeOps' NodeSnapshot (docs/nodes.md, "Node-agent API"): the answer to register,
// status, isolation, labels and delete. MilliCPU figures are thousandths of a core, memory in MiB,
// disk usage in percent. Healthy is the registry's health (Ready); UnhealthyReason is
// ReasonHeartbeatExpired, ReasonReportedNotReady or ReasonNoReportSinceStart when it is not.
// SchedulingDisabled is true while the node is cordoned (it carries ReservedLabel). Draining,
// cubefleet's own member (absent unless true, so a stock Cubelet's answers are unchanged), is true
// while the node drains (`cubefleet nodes drain`): the answer to a status report is how `cubefleet
// agent` learns it, takes no new work and says so in WorkRequest.Draining.
type NodeSnapshot struct {
	NodeID                 string             `json:"node_id"`
	HostIP                 string             `json:"host_ip"`
	GRPCPort               int64              `json:"grpc_port"`
	Labels                 map[string]string  `json:"labels"`
	Capacity               Resources          `json:"capacity"`
	Allocatable            Resources          `json:"allocatable"`
	InstanceType           string             `json:"instance_type"`
	ClusterLabel           string             `json:"cluster_label"`
	QuotaCPU               int64              `json:"quota_cpu"`
	QuotaMemMB             int64              `json:"quota_mem_mb"`
	CreateConcurrentNum    int64              `json:"create_concurrent_num"`
	MaxMVMNum              int64              `json:"max_mvm_num"`
	PausedReleaseRatio     *float64           `json:"paused_release_ratio,omitempty"`
	Images                 []Image            `json:"images"`
	LocalTemplates         []LocalTemplate    `json:"local_templates"`
	LocalTemplatesReported bool               `json:"local_templates_reported"`
	Versions               []ComponentVersion `json:"versions"`
	HostFacts              HostFacts          `json:"host_facts"`
	SchedulingDisabled     bool               `json:"scheduling_disabled"`
	Draining               bool               `json:"draining,omitempty"`
	Conditions             []Condition        `json:"conditions"`
	HeartbeatTime          time.Time          `json:"heartbeat_time"`
	Healthy                bool               `json:"healthy"`
	ReportedReady          bool               `json:"reported_ready"`
	UnhealthyReason        string             `json:"unhealthy_reason,omitempty"`
	Score                  float64            `json:"score"` // always 0 on the CubeOps path
	MetricUpdate           time.Time          `json:"metric_update"`
	MetricLocalUpdateAt    time.Time          `json:"metric_local_update_at"`
	QuotaCPUUsage          int64              `json:"quota_cpu_usage"`    // allocated.milli_cpu
	QuotaMemMBUsage        int64              `json:"quota_mem_mb_usage"` // allocated.memory_mb
	MVMNum                 int64              `json:"mvm_num"`            // allocated.mvm_num
	NICQueues              int64              `json:"nic_queues"`         // allocated.nic_queues
	DataDiskUsagePer       float64            `json:"data_disk_usage_per"`
	StorageDiskUsagePer    float64            `json:"storage_disk_usage_per"`
	SysDiskUsagePer        float64            `json:"sys_disk_usage_per"`
}

// RegisterResponse is the answer to a registration: the node's NodeSnapshot and, only for a
// registration with a join token, the node credential (CredentialPrefix), shown this once.
type RegisterResponse struct {
	NodeSnapshot
	NodeCredential string `json:"node_credential,omitempty"`
}

// Unhealthy reasons of NodeSnapshot and SchedulerNode (docs/nodes.md, "Internal nodes API"): the
// heartbeat is checked first. ReasonNoReportSinceStart is cubefleet's (upstream has the first two
// only).
const (
	// ReasonHeartbeatExpired: no report within the node's heartbeat window.
	ReasonHeartbeatExpired = "HeartbeatExpired"
	// ReasonReportedNotReady: the last report's Ready condition was not True.
	ReasonReportedNotReady = "ReportedNotReady"
	// ReasonNoReportSinceStart: the node has not reported since the control plane started
	// (the registry's Unknown state), so whether it is alive is not known yet.
	ReasonNoReportSinceStart = "NoReportSinceStart"
)

// SchedulerNode is CubeMaster's node.Node as GET NodesPrefix lists it (docs/nodes.md, "Internal
// nodes API"): PascalCase keys except uuid, mvm_num and nic_queues. CpuTotal is the quota in whole
// cores (capacity's millicores / 1000), QuotaCpu in millicores, memory in MiB, disk usage in
// percent. LocalTemplates is present only once the node reported its inventory
// (LocalTemplatesReported). The figures CubeOps never fills (CpuUtil, CpuLoadUsage, MemUsage,
// RealTimeCreateNum, LocalCreateNum, Score) are 0. Readers find a node by the compact
// `"IP":"<address>"`.
type SchedulerNode struct {
	InstanceID             string             `json:"InstanceID"`
	UUID                   string             `json:"uuid"`
	IP                     string             `json:"IP"`
	CPUTotal               int64              `json:"CpuTotal"`
	MemMBTotal             int64              `json:"MemMBTotal"`
	QuotaCPU               int64              `json:"QuotaCpu"`
	QuotaMem               int64              `json:"QuotaMem"`
	ClusterLabel           string             `json:"ClusterLabel"`
	OssClusterLabel        string             `json:"OssClusterLabel"`
	InstanceType           string             `json:"InstanceType"` // "default" when the node reports none
	HostStatus             string             `json:"HostStatus"`   // always "RUNNING"
	CreateConcurrentNum    int64              `json:"CreateConcurrentNum"`
	MaxMvmLimit            int64              `json:"MaxMvmLimit"`
	NodeLabels             map[string]string  `json:"NodeLabels"`
	SchedulingDisabled     bool               `json:"SchedulingDisabled"`
	LocalTemplates         []string           `json:"LocalTemplates,omitzero"` // template ids
	LocalTemplatesReported bool               `json:"LocalTemplatesReported"`
	Versions               []ComponentVersion `json:"Versions"`
	HostFacts              HostFacts          `json:"HostFacts"`
	ReportedReady          bool               `json:"ReportedReady,omitempty"`
	Healthy                bool               `json:"Healthy"`
	UnhealthyReason        string             `json:"UnhealthyReason,omitempty"`
	MetaDataUpdateAt       time.Time          `json:"MetaDataUpdateAt"` // the heartbeat time
	MetricUpdateAt         time.Time          `json:"MetricUpdateAt"`
	MetricLocalUpdateAt    time.Time          `json:"MetricLocalUpdateAt"`
	QuotaCPUUsage          int64              `json:"QuotaCpuUsage"`
	QuotaMemUsage          int64              `json:"QuotaMemUsage"`
	MVMNum                 int64              `json:"mvm_num"`
	NICQueues              int64              `json:"nic_queues"`
	DataDiskUsagePer       float64            `json:"DataDiskUsagePer"`
	StorageDiskUsagePer    float64            `json:"StorageDiskUsagePer"`
	SysDiskUsagePer        float64            `json:"SysDiskUsagePer"`
	CPUUtil                float64            `json:"CpuUtil"`
	CPULoadUsage           float64            `json:"CpuLoadUsage"`
	MemUsage               float64            `json:"MemUsage"`
	RealTimeCreateNum      int64              `json:"RealTimeCreateNum"`
	LocalCreateNum         int64              `json:"LocalCreateNum"`
	Score                  float64            `json:"Score"`
}

// SchedulerScore is the reduced SchedulerNode of `?score_only=true` (docs/nodes.md, "Internal nodes
// API").
type SchedulerScore struct {
	InstanceID          string    `json:"InstanceID"`
	Score               float64   `json:"Score"`
	MetricUpdateAt      time.Time `json:"MetricUpdateAt"`
	MetricLocalUpdateAt time.Time `json:"MetricLocalUpdateAt"`
	MetaDataUpdateAt    time.Time `json:"MetaDataUpdateAt"`
}
