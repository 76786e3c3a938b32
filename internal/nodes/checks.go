package nodes

import (
	"fmt"

	"github.com/cubefleet/cubefleet"
)

// The rules a node's register and status bodies must follow beyond their JSON shape. Upstream
// (spec §1.3, §1.4) checks only node_id and requestID; every figure it stores is a count, a
// size or a share, so a negative one is a bug or a lie, and cubefleet refuses it (400 naming
// the field) rather than let it reach the scheduler, the drain rule or an operator's screen.

// invalidField is INVALID_INPUT for the field at path whose message is the whole sentence
// (the wire's {"error":...} shows it as it is, `allocated.mvm_num must be >= 0 (got -5)`).
func invalidField(path, format string, args ...any) *cubefleet.Error {
	msg := fmt.Sprintf(format, args...)
	return &cubefleet.Error{Code: cubefleet.CodeInvalidInput, Message: msg,
		Details: map[string]any{"path": path, "errors": []cubefleet.FieldError{{Path: path, Message: msg}}}}
}

// nonNegative refuses a negative figure at path.
func nonNegative(path string, v int64) error {
	if v < 0 {
		return invalidField(path, "%s must be >= 0 (got %d)", path, v)
	}
	return nil
}

// checkRatio refuses a paused_release_ratio outside 0..1 (spec §2.1: `0..1|null`).
func checkRatio(path string, v *float64) error {
	if v != nil && !(*v >= 0 && *v <= 1) {
		return invalidField(path, "%s must be between 0 and 1 (got %g)", path, *v)
	}
	return nil
}

// maxGRPCPort is the largest TCP port; a Cubelet sends grpc_port 0 or nothing (spec §1.3).
const maxGRPCPort = 65535

// checkRegisterFigures checks a register body's figures: capacity, allocatable and the quota
// (quota_cpu, quota_mem_mb, create_concurrent_num, max_mvm_num) at least 0, grpc_port 0 to
// 65535, paused_release_ratio 0 to 1, and the host facts' counts at least 0.
func checkRegisterFigures(req *RegisterRequest) error {
	for _, f := range [...]struct {
		path string
		v    int64
	}{
		{"capacity.milli_cpu", req.Capacity.MilliCPU}, {"capacity.memory_mb", req.Capacity.MemoryMB},
		{"allocatable.milli_cpu", req.Allocatable.MilliCPU}, {"allocatable.memory_mb", req.Allocatable.MemoryMB},
		{"quota_cpu", req.QuotaCPU}, {"quota_mem_mb", req.QuotaMemMB},
		{"create_concurrent_num", req.CreateConcurrentNum}, {"max_mvm_num", req.MaxMvmNum},
	} {
		if err := nonNegative(f.path, f.v); err != nil {
			return err
		}
	}
	if req.GRPCPort < 0 || req.GRPCPort > maxGRPCPort {
		return invalidField("grpc_port", "grpc_port must be 0 to %d (got %d)", maxGRPCPort, req.GRPCPort)
	}
	if err := checkRatio("paused_release_ratio", req.PausedReleaseRatio); err != nil {
		return err
	}
	if req.HostFacts != nil {
		return checkHostFacts(req.HostFacts)
	}
	return nil
}

// checkStatusFigures checks the figures a status report carries on every report (allocated,
// disk_usage, quota): each at least 0, the quota's paused_release_ratio 0 to 1. It runs on the
// hot path, so it only compares.
func checkStatusFigures(req *StatusRequest) error {
	if a := req.Allocated; a != nil {
		if a.MilliCPU < 0 || a.MemoryMB < 0 || a.MvmNum < 0 || a.MvmRunningNum < 0 || a.NICQueues < 0 || a.DataDiskMB < 0 || a.StorageDiskMB < 0 {
			return allocatedError(a)
		}
	}
	if d := req.DiskUsage; d != nil {
		for _, f := range [...]struct {
			path string
			v    float64
		}{
			{"disk_usage.data_disk_usage_per", d.DataDiskUsagePer}, {"disk_usage.storage_disk_usage_per", d.StorageDiskUsagePer},
			{"disk_usage.sys_disk_usage_per", d.SysDiskUsagePer},
		} {
			if f.v < 0 {
				return invalidField(f.path, "%s must be >= 0 (got %g)", f.path, f.v)
			}
		}
	}
	if q := req.Quota; q != nil {
		for _, f := range [...]struct {
			path string
			v    int64
		}{
			{"quota.milli_cpu", q.MilliCPU}, {"quota.mem_mb", q.MemMB}, {"quota.max_mvm_num", q.MaxMvmNum},
			{"quota.create_concurrent_num", q.CreateConcurrentNum},
		} {
			if err := nonNegative(f.path, f.v); err != nil {
				return err
			}
		}
		if err := checkRatio("quota.paused_release_ratio", q.PausedReleaseRatio); err != nil {
			return err
		}
	}
	return nil
}

// allocatedError names the first negative field of a.
func allocatedError(a *Allocated) error {
	for _, f := range [...]struct {
		path string
		v    int64
	}{
		{"allocated.milli_cpu", a.MilliCPU}, {"allocated.memory_mb", a.MemoryMB}, {"allocated.mvm_num", a.MvmNum},
		{"allocated.mvm_running_num", a.MvmRunningNum}, {"allocated.nic_queues", a.NICQueues},
		{"allocated.data_disk_mb", a.DataDiskMB}, {"allocated.storage_disk_mb", a.StorageDiskMB},
	} {
		if err := nonNegative(f.path, f.v); err != nil {
			return err
		}
	}
	return nil
}

// checkHostFacts checks host facts' counts: kvm_api_version, cpu_count and mem_total_mb at
// least 0.
func checkHostFacts(h *HostFacts) error {
	for _, f := range [...]struct {
		path string
		v    int64
	}{
		{"host_facts.kvm_api_version", h.KVMAPIVersion}, {"host_facts.cpu_count", h.CPUCount}, {"host_facts.mem_total_mb", h.MemTotalMB},
	} {
		if err := nonNegative(f.path, f.v); err != nil {
			return err
		}
	}
	return nil
}

// checkImages checks an image inventory: every size_bytes at least 0.
func checkImages(images []Image) error {
	for i, img := range images {
		if img.SizeBytes < 0 {
			return invalidField(fmt.Sprintf("images[%d].size_bytes", i), "images[%d].size_bytes must be >= 0 (got %d)", i, img.SizeBytes)
		}
	}
	return nil
}
