package agent

import (
	"fmt"

	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
)

// Prerequisites returns what keeps this host from running the agent, each with its fix; none
// when it is ready: the architecture (x86_64 or aarch64), the cpu cgroup controller (in a cgroup
// v2 hierarchy or a cgroup v1 one: the sandboxes' limits use either, detected per controller),
// the memory floor (cfg.MinMemoryKB of MemTotal) and, for the microvm runtime only, a guest
// kernel (cfg.GuestKernel). KVM is not one: without it (no /dev/kvm, or a nested host whose KVM
// boots no guest) the microvm runtime's guests run under TCG.
func Prerequisites(cfg *Config, f hostinfo.Facts) []string {
	var p []string
	if f.Arch != "x86_64" && f.Arch != "aarch64" {
		p = append(p, fmt.Sprintf("this host's architecture is %q; the agent runs on x86_64 or aarch64", f.Arch))
	}
	if f.CgroupCPU == "" {
		p = append(p, "no cgroup hierarchy offers the cpu controller (neither the cgroup v2 hierarchy's cgroup.controllers lists it nor is a cgroup v1 hierarchy of it mounted): enable it in cgroup v2 (`echo +cpu > /sys/fs/cgroup/cgroup.subtree_control`), mount it as cgroup v1, or use a kernel built with CONFIG_CGROUP_SCHED")
	}
	if f.MemTotalKB < cfg.MinMemoryKB {
		p = append(p, fmt.Sprintf("this host has %d kB of memory (MemTotal) and the floor is %d kB: use a host with more memory", f.MemTotalKB, cfg.MinMemoryKB))
	}
	// KVM is no prerequisite of the microvm runtime: a host without /dev/kvm, or a virtual
	// machine whose KVM boots no guest, runs its guests under TCG (the driver proves KVM by a
	// probe boot, `agent check` says which it got). Its guest kernel is one.
	if cfg.Runtime == RuntimeMicroVM && cfg.GuestKernel == "" {
		p = append(p, "the microvm runtime boots its guests with a guest kernel and none is set: set CUBEFLEET_GUEST_KERNEL (docs/sandbox-runtime.md says how to get Debian's cloud kernel), or use --runtime process")
	}
	return p
}
