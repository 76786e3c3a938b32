package scheduler

// Factors of the weighted-average scorers (`scheduler.score.resource_weights` and
// `plugin_conf.<scorer>.enable_weight_factors`). Every factor is a number in [0,1], higher
// meaning a better place for the next sandbox (upstream mixes 0-100, 0-1, ~1 and raw scales:
// docs/scheduler.md lists both). "Used" below always includes the room reserved for sandboxes
// placed but not yet listed in the node's report.
const (
	FactorMvmNum              = "mvm_num"                 // 1 − microVMs used / microVM limit
	FactorLocalCreateNum      = "local_create_num"        // 1 − creates in flight / the node's create limit
	FactorRealtimeCreateNum   = "realtime_create_num"     // the same count: one placement lane sees every create in flight
	FactorQuotaCPUUsage       = "quota_cpu_usage"         // 1 − CPU used / quota_cpu
	FactorQuotaMemUsage       = "quota_mem_usage"         // 1 − memory used / quota_mem_mb
	FactorCPUUtil             = "cpu_util"                // 1 − reported CPU utilisation / 100 (1 when not reported)
	FactorMemUsage            = "mem_usage"               // 1 − reported memory in use / the node's memory (1 when not reported)
	FactorCPULoad             = "cpu_load"                // 1 − reported load / CPU cores (1 when not reported)
	FactorDataDiskUsage       = "data_disk_usage"         // 1 − data disk usage percent / 100
	FactorStorageDiskUsage    = "storage_disk_usage"      // 1 − storage disk usage percent / 100
	FactorSysDiskUsage        = "sys_disk_usage"          // 1 − system disk usage percent / 100
	FactorCreateConcurrentLim = "create_concurrent_limit" // the node's create limit / the largest in the fleet
	FactorMetricUpdate        = "metric_update"           // 1 − age of the node's metric_time / the node's freshness window
	FactorMetricLocalUpdateAt = "metric_local_update_at"  // 1 − age of the report that carried them (control-plane clock) / the window
	FactorReqCPU              = "req_cpu"                 // CPU left after this sandbox / quota_cpu
	FactorReqMem              = "req_mem"                 // memory left after this sandbox / quota_mem_mb
	FactorTemplateLocality    = "template_locality"       // 1 when the node holds the request's template (or it names none), else 0
)

// Factors lists every factor name a file may use.
var Factors = []string{
	FactorMvmNum, FactorLocalCreateNum, FactorRealtimeCreateNum, FactorQuotaCPUUsage, FactorQuotaMemUsage,
	FactorCPUUtil, FactorMemUsage, FactorCPULoad, FactorDataDiskUsage, FactorStorageDiskUsage, FactorSysDiskUsage,
	FactorCreateConcurrentLim, FactorMetricUpdate, FactorMetricLocalUpdateAt, FactorReqCPU, FactorReqMem,
	FactorTemplateLocality,
}
