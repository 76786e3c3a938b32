package agent

import (
	"fmt"

	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
)

// Prerequisites returns what keeps this host from running the agent, each with its fix; none
// when it is ready: the architecture (x86_64 or aarch64), cgroup v2 with the cpu controller,
// the memory floor (cfg.MinMemoryKB of MemTotal) and, for the microvm runtime only, a guest
// kernel (cfg.GuestKernel). KVM is not one: without it (no /dev/kvm, or a nested host whose KVM
// boots no guest) the microvm runtime's guests run under TCG.
func Prerequisites(cfg *Config, f hostinfo.Facts) []string {
	var p []string
	if f.Arch != "x86_64" && f.Arch != "aarch64" {
		p = append(p, fmt.Sprintf("this host's architecture is %q; the agent runs on x86_64 or aarch64", f.Arch))
	}
	switch {
	case !f.Cgroup2:
		p = append(p, "cgroup v2 is required, and /sys/fs/cgroup is not a cgroup v2 mount (cgroup v1 or hybrid): add systemd.unified_cgroup_hierarchy=1 to the kernel command line and reboot")
	case !f.CgroupCPU:
		p = append(p, "the cgroup v2 cpu controller is not available (it is missing from /sys/fs/cgroup/cgroup.controllers): enable it with `echo +cpu > /sys/fs/cgroup/cgroup.subtree_control` or use a kernel built with CONFIG_CGROUP_SCHED")
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
