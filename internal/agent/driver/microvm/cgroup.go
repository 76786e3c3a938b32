package microvm

import (
	"fmt"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
)

// The VMM's own memory, on top of its guest's, that its cgroup's memory limit allows.
const (
	// VMMOverheadMiB is QEMU's own memory (its code, device models, I/O buffers, threads).
	VMMOverheadMiB = 128
	// TCGCacheMiB is the translation cache a VMM under TCG is given (QEMU's tb-size): the
	// emulator's code cache is bounded so that its memory is.
	TCGCacheMiB = 64
	// VMMProcesses bounds the threads of a VMM (vCPUs, I/O workers, the monitor).
	VMMProcesses = 512
)

// cgroupPrefix starts the name of every VMM's cgroup under the driver's parent.
const cgroupPrefix = "vm-"

// MemoryLimitMiB is the memory limit of the cgroup of a VMM running m: its guest's memory, the
// VMM's overhead and, under TCG, its translation cache.
func MemoryLimitMiB(m Machine) int64 {
	l := m.MemoryMiB + VMMOverheadMiB
	if m.Accel == AccelTCG {
		l += TCGCacheMiB
	}
	return l
}

// cgroupLimits returns the limits of the cgroup of a VMM running m for spec, by the controllers
// the driver has: the flavor's CPU (a quota of spec's millicores; none when 0), the guest's
// memory with the VMM's (MemoryLimitMiB, no swap) and VMMProcesses.
func (d *Driver) cgroupLimits(spec driver.Spec, m Machine) cgroups.Limits {
	var l cgroups.Limits
	if d.cgroups.Has(cgroups.CPU) {
		l.CPUMillicores = spec.CPUMillicores
	}
	if d.cgroups.Has(cgroups.Memory) {
		l.MemoryBytes = MemoryLimitMiB(m) << 20
	}
	if d.cgroups.Has(cgroups.Pids) {
		l.Processes = VMMProcesses
	}
	return l
}

// Cgroups describes the cgroups the driver's VMMs run in, on one line, for `agent check` and
// the log, e.g. "each VMM in a cgroup of its own (cgroup v1: cpu, memory, pids; ...): memory
// the guest's + 128 MiB (+ 64 MiB translation cache under TCG), CPU the flavor's, 512
// threads"; or why there are none.
func (d *Driver) Cgroups() string { return DescribeCgroups(d.cgroups) }

// DescribeCgroups is Driver.Cgroups for the cgroups of host h (cgroups.Detect, Prepare).
func DescribeCgroups(h cgroups.Host) string {
	if !h.Tracks() {
		s := "VMMs in no cgroup: memory bounded by the guest's size and QEMU's overhead, CPU by the guest's vCPUs"
		if len(h.Notes) > 0 {
			s += fmt.Sprintf(" (%s)", h.Notes[0])
		}
		return s
	}
	var lim []string
	if h.Has(cgroups.Memory) {
		lim = append(lim, fmt.Sprintf("memory the guest's + %d MiB (+ %d MiB translation cache under TCG), no swap", VMMOverheadMiB, TCGCacheMiB))
	} else {
		lim = append(lim, "memory not limited (no memory controller): bounded by the guest's size and QEMU's overhead")
	}
	if h.Has(cgroups.CPU) {
		lim = append(lim, "CPU the flavor's as a CFS quota")
	} else {
		lim = append(lim, "CPU not limited but by the guest's vCPUs (no cpu controller)")
	}
	if h.Has(cgroups.Pids) {
		lim = append(lim, fmt.Sprintf("%d threads", VMMProcesses))
	}
	s := fmt.Sprintf("each VMM in a cgroup of its own (%s): ", h)
	for i, x := range lim {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s + "; peak memory and CPU of a sandbox whose guest reports none: its VMM's cgroup's"
}

// createCgroup creates the cgroup of v's VMM with its limits and records it in v.rec; a host
// without cgroups leaves it zero.
func (d *Driver) createCgroup(v *vm) error {
	if !d.cgroups.Tracks() {
		return nil
	}
	g := d.cgroups.Group(d.cfg.CgroupParent, cgroupPrefix+v.id)
	if err := g.Create(d.cgroupLimits(v.rec.Spec, v.rec.Machine)); err != nil {
		g.Remove()
		return fmt.Errorf("the VMM's cgroup: %w", err)
	}
	v.rec.Cgroup = g
	return nil
}

// removeCgroup kills what is left in v's cgroup and removes it.
func (v *vm) removeCgroup() {
	if v.rec.Cgroup.IsZero() {
		return
	}
	v.rec.Cgroup.Kill(time.Now().Add(5 * time.Second))
	v.rec.Cgroup.Remove()
}

// cgroupStats returns the figures of v's VMM's cgroup as driver.Stats, and whether it has any
// (false without a cgroup, or on a host that counts neither CPU nor memory in it).
func (v *vm) cgroupStats() (driver.Stats, cgroups.Stats, bool) {
	if v.rec.Cgroup.IsZero() {
		return driver.Stats{}, cgroups.Stats{}, false
	}
	s := v.rec.Cgroup.Stats()
	if s.CPU < 0 && s.PeakMemoryBytes < 0 {
		return driver.Stats{}, s, false
	}
	return driver.Stats{CPU: max(s.CPU, 0), MemoryBytes: max(s.MemoryBytes, 0), PeakMemoryBytes: max(s.PeakMemoryBytes, 0)}, s, true
}
