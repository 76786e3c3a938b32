package agent

import (
	"fmt"

	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
)

// Prerequisites returns what keeps this host from running the agent, each with its fix; none
// when it is ready: the architecture (x86_64 or aarch64), cgroup v2 with the cpu controller,
// the memory floor (cfg.MinMemoryKB of MemTotal) and, for the microvm runtime only, /dev/kvm
// and a host that is not itself a virtual machine.
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
	if cfg.Runtime == RuntimeMicroVM {
		if !f.KVM {
			p = append(p, "the microvm runtime needs KVM and /dev/kvm is missing: enable virtualization (VT-x/AMD-V) in the firmware and load kvm_intel or kvm_amd, or use --runtime process")
		}
		if f.Hypervisor {
			p = append(p, "this host is a virtual machine (CPU flag \"hypervisor\"): the microvm runtime needs a physical or bare-metal server (nested virtualization is not supported); use --runtime process on virtual machines")
		}
	}
	return p
}
