// Package cgroups puts a sandbox's processes in a cgroup of their own and limits them as a
// whole, on whatever the host has: a cgroup v2 hierarchy with delegated controllers, cgroup v1
// hierarchies (memory, cpu and cpuacct, pids), or a hybrid host with both (the controllers bound
// to v1, an empty v2 hierarchy beside them, used for tracking). It detects where each
// controller is (Detect), prepares a parent cgroup for a driver's sandboxes (Host.Prepare), and
// for one sandbox creates its cgroup with its limits (Group.Create: CPU as a CFS quota, memory
// with no swap, processes), moves processes in (Group.Enter), kills everything in it
// (Group.Kill), reads its whole CPU time, memory, peak memory and OOM kills (Group.Stats) and
// removes it (Group.Remove).
//
// A runtime driver (the process driver, a microVM driver's QEMU process) calls it with the
// sandbox's limits; the package knows nothing of sandboxes beyond that. It only reads and
// writes cgroup files: nothing runs in a shell.
package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
)

// The controllers a sandbox is limited with.
const (
	CPU    = "cpu"    // CFS quota: cpu.max (v2), cpu.cfs_quota_us (v1)
	Memory = "memory" // memory.max and memory.swap.max (v2), memory.limit_in_bytes and memory.memsw.limit_in_bytes (v1)
	Pids   = "pids"   // pids.max (v1 and v2)
	// CPUAcct is cgroup v1's CPU accounting controller (cpuacct.usage), used only to read a
	// sandbox's CPU time on a v1 host; cgroup v2's cpu.stat is always there.
	CPUAcct = "cpuacct"
)

// Controllers are the limit controllers, in the order they are described.
var Controllers = []string{CPU, Memory, Pids}

// Host is where a host's cgroup controllers are, for the current user: what Detect found and
// Prepare kept. The zero value is a host without usable cgroups.
type Host struct {
	// V2 is the mount point of the writable cgroup v2 hierarchy every sandbox gets a cgroup in
	// (it tracks the sandbox's processes and kills them at once, with cgroup.kill), e.g.
	// /sys/fs/cgroup or, on a hybrid host, /sys/fs/cgroup/unified; "" when there is none.
	V2 string `json:"v2,omitempty"`
	// V2Controllers are the controllers of Controllers that V2 offers (delegated to it).
	V2Controllers []string `json:"v2Controllers,omitempty"`
	// V1 maps each controller of Controllers, and CPUAcct, that is bound to a writable cgroup
	// v1 hierarchy (and not offered by V2) to the hierarchy's mount point, e.g. "memory" to
	// /sys/fs/cgroup/memory.
	V1 map[string]string `json:"v1,omitempty"`
	// Notes say why a controller of Controllers is not available, or V2 not usable, one
	// sentence each; empty when all are.
	Notes []string `json:"notes,omitempty"`
}

// Version returns the cgroup version that limits controller c on h: 2, 1, or 0 for none.
func (h Host) Version(c string) int {
	switch {
	case h.V2 != "" && slices.Contains(h.V2Controllers, c):
		return 2
	case h.V1[c] != "":
		return 1
	}
	return 0
}

// Has reports whether h limits controller c (in either version).
func (h Host) Has(c string) bool { return h.Version(c) > 0 }

// Tracks reports whether h gives a sandbox a cgroup at all (to track and kill its processes).
func (h Host) Tracks() bool { return h.V2 != "" || len(h.V1) > 0 }

// String describes h on one line, e.g. "cgroup v2 at /sys/fs/cgroup: cpu, memory, pids" or
// "cgroup v1: cpu, memory, pids; cgroup v2 at /sys/fs/cgroup/unified: tracking only"; "" when
// h has no cgroups. Notes are not part of it.
func (h Host) String() string {
	var v1, v2 []string
	for _, c := range Controllers {
		switch h.Version(c) {
		case 1:
			v1 = append(v1, c)
		case 2:
			v2 = append(v2, c)
		}
	}
	var parts []string
	if len(v1) > 0 {
		parts = append(parts, "cgroup v1: "+strings.Join(v1, ", "))
	}
	switch {
	case h.V2 != "" && len(v2) > 0:
		parts = append(parts, fmt.Sprintf("cgroup v2 at %s: %s", h.V2, strings.Join(v2, ", ")))
	case h.V2 != "":
		parts = append(parts, fmt.Sprintf("cgroup v2 at %s: tracking only", h.V2))
	}
	return strings.Join(parts, "; ")
}

// Detect reads where this host's controllers are, for a process of user euid: the cgroup v2
// hierarchy of /proc/self/mountinfo and the controllers its cgroup.controllers lists, and the
// cgroup v1 hierarchies; a hierarchy the user cannot write is not used. root is "" for this
// host, or a directory holding a fake one (its proc/self/mountinfo and cgroup files), for
// tests. It only reads: Prepare may still drop a controller. It never fails: what is missing
// is in Notes.
func Detect(root string, euid int) Host {
	cg := hostinfo.Host{Root: root}.Cgroup()
	var h Host
	writable := func(p string) bool { return unix.Access(filepath.Join("/", root, p), unix.W_OK) == nil }
	switch {
	case cg.Mount == "":
	case cg.Problem != "":
		h.Notes = append(h.Notes, cg.Problem)
	case cg.ReadOnly:
		h.Notes = append(h.Notes, fmt.Sprintf("cgroup v2 at %s is mounted read-only", cg.Mount))
	case !writable(filepath.Join(cg.Mount, "cgroup.subtree_control")):
		h.Notes = append(h.Notes, fmt.Sprintf("cgroup v2 at %s is not writable by uid %d", cg.Mount, euid))
	default:
		h.V2 = cg.Mount
		for _, c := range Controllers {
			if cg.Has(c) {
				h.V2Controllers = append(h.V2Controllers, c)
			}
		}
	}
	noted := map[string]bool{}
	for _, c := range append(slices.Clone(Controllers), CPUAcct) {
		mp, ok := cg.V1Mounts[c]
		switch {
		case h.Version(c) == 2 || !ok:
		case slices.Contains(cg.ReadOnlyV1, c):
			h.Notes = append(h.Notes, fmt.Sprintf("the cgroup v1 %s hierarchy at %s is mounted read-only", c, mp))
			noted[c] = true
		case !writable(mp):
			h.Notes = append(h.Notes, fmt.Sprintf("the cgroup v1 %s hierarchy at %s is not writable by uid %d", c, mp, euid))
			noted[c] = true
		default:
			if h.V1 == nil {
				h.V1 = map[string]string{}
			}
			h.V1[c] = mp
		}
	}
	var missing []string
	for _, c := range Controllers {
		if !h.Has(c) && !noted[c] {
			missing = append(missing, c)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		h.Notes = append(h.Notes, fmt.Sprintf("no cgroup hierarchy offers the %s controller", missing[0]))
	default:
		h.Notes = append(h.Notes, fmt.Sprintf("no cgroup hierarchy offers the %s controllers", strings.Join(missing, ", ")))
	}
	return h
}

// hierarchies returns the mount points of h's hierarchies, v2 first, each once.
func (h Host) hierarchies() []string {
	var out []string
	if h.V2 != "" {
		out = append(out, h.V2)
	}
	for _, c := range append(slices.Clone(Controllers), CPUAcct) {
		if mp := h.V1[c]; mp != "" && !slices.Contains(out, mp) {
			out = append(out, mp)
		}
	}
	return out
}

// Prepare creates the cgroup parent (a path relative to each hierarchy's root, e.g.
// cubefleet/0123456789ab) in every hierarchy of h, and enables h's v2 controllers from the v2
// root down to it, so that the sandboxes' cgroups under it have their files. It returns what is
// actually available: a hierarchy whose parent cannot be made, or a v2 controller that cannot
// be enabled, is dropped with a note.
func (h Host) Prepare(parent string) Host {
	parent = filepath.Clean(parent)
	out := Host{Notes: slices.Clone(h.Notes)}
	if h.V2 != "" {
		if err := os.MkdirAll(filepath.Join(h.V2, parent), 0o755); err != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("cannot create the cgroup %s: %v", filepath.Join(h.V2, parent), err))
		} else {
			out.V2 = h.V2
			for _, c := range h.V2Controllers {
				if err := enableController(h.V2, parent, c); err != nil {
					out.Notes = append(out.Notes, fmt.Sprintf("cannot enable the %s controller for %s: %v", c, filepath.Join(h.V2, parent), err))
					continue
				}
				out.V2Controllers = append(out.V2Controllers, c)
			}
		}
	}
	for c, mp := range h.V1 {
		if err := os.MkdirAll(filepath.Join(mp, parent), 0o755); err != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("cannot create the cgroup %s: %v", filepath.Join(mp, parent), err))
			continue
		}
		if out.V1 == nil {
			out.V1 = map[string]string{}
		}
		out.V1[c] = mp
	}
	return out
}

// enableController writes "+c" to the cgroup.subtree_control of every cgroup from the v2
// hierarchy's root down to root/parent where it is not enabled yet.
func enableController(root, parent, c string) error {
	dir := root
	for _, p := range append([]string{""}, strings.Split(parent, "/")...) {
		dir = filepath.Join(dir, p)
		ctl := filepath.Join(dir, "cgroup.subtree_control")
		cur, err := os.ReadFile(ctl)
		if err != nil {
			return err
		}
		if !slices.Contains(strings.Fields(string(cur)), c) {
			if err := os.WriteFile(ctl, []byte("+"+c), 0o644); err != nil {
				return fmt.Errorf("write +%s to %s: %w", c, ctl, err)
			}
		}
	}
	return nil
}

// Group returns the cgroup name (one path element, e.g. sandbox-0123456789abcdef) under parent
// in every hierarchy of h. It creates nothing (Group.Create does).
func (h Host) Group(parent, name string) Group {
	var g Group
	for _, mp := range h.hierarchies() {
		dir := filepath.Join(mp, parent, name)
		if mp == h.V2 {
			g.V2 = dir
		} else {
			g.V1 = append(g.V1, dir)
		}
	}
	return g
}

// RemoveEmpty removes the cgroups under parent, in every hierarchy of h, whose names start with
// prefix and that hold no process (those of sandboxes that ended without removing theirs); one
// in use stays (rmdir fails with EBUSY).
func (h Host) RemoveEmpty(parent, prefix string) {
	for _, mp := range h.hierarchies() {
		ents, _ := os.ReadDir(filepath.Join(mp, parent))
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				unix.Rmdir(filepath.Join(mp, parent, e.Name()))
			}
		}
	}
}

// RemoveParent removes parent and the directories above it, in every hierarchy of h, as far up
// as they are empty (they may be shared with other drivers of the host).
func (h Host) RemoveParent(parent string) {
	for _, mp := range h.hierarchies() {
		for p := filepath.Join(mp, parent); p != mp && strings.HasPrefix(p, mp+"/"); p = filepath.Dir(p) {
			if unix.Rmdir(p) != nil {
				break
			}
		}
	}
}

// Group is one sandbox's cgroup: a directory in the v2 hierarchy and in each v1 hierarchy the
// host uses. Every process of the sandbox is in all of them. The zero value is no cgroup (every
// method does nothing).
type Group struct {
	V2 string   `json:"v2,omitempty"` // its cgroup v2 directory, "" for none
	V1 []string `json:"v1,omitempty"` // its cgroup v1 directories
}

// IsZero reports whether g is no cgroup.
func (g Group) IsZero() bool { return g.V2 == "" && len(g.V1) == 0 }

// Equal reports whether g and o are the same cgroup.
func (g Group) Equal(o Group) bool { return g.V2 == o.V2 && slices.Equal(g.V1, o.V1) }

// Dirs returns every directory of g, v2 first.
func (g Group) Dirs() []string {
	if g.V2 == "" {
		return g.V1
	}
	return append([]string{g.V2}, g.V1...)
}

// Limits are what Group.Create writes into a sandbox's cgroup; a zero field is not written.
type Limits struct {
	CPUMillicores int64 `json:"cpuMillicores,omitempty"` // a CFS quota of this many millicores (1000 = one CPU) per period
	MemoryBytes   int64 `json:"memoryBytes,omitempty"`   // memory and swap: swap is not allowed
	Processes     int64 `json:"processes,omitempty"`     // processes and threads
}

// PeriodMicros is the CFS period the CPU quota is set for: 100 ms, the kernel's default.
const PeriodMicros = 100_000

// Create creates g's directories (an existing one is reused) and writes l into them, into the
// directory of the hierarchy that has each controller. A limit that no directory of g has the
// files of (its controller is missing) is an error naming it.
func (g Group) Create(l Limits) error {
	for _, d := range g.Dirs() {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	if l.CPUMillicores > 0 {
		quota := max(l.CPUMillicores*PeriodMicros/1000, 1000) // the kernel's minimum is 1 ms
		if err := g.write("cpu", []file{{"cpu.max", fmt.Sprintf("%d %d", quota, PeriodMicros)}},
			[]file{{"cpu.cfs_period_us", strconv.Itoa(PeriodMicros)}, {"cpu.cfs_quota_us", strconv.FormatInt(quota, 10)}}); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		// v1: memsw (memory and swap) can only be set at or above the memory limit, so after it.
		if err := g.write("memory", []file{{"memory.max", v}, {"memory.swap.max", "0"}},
			[]file{{"memory.limit_in_bytes", v}, {"memory.memsw.limit_in_bytes", v}}); err != nil {
			return err
		}
	}
	if l.Processes > 0 {
		v := strconv.FormatInt(l.Processes, 10)
		if err := g.write("pids", []file{{"pids.max", v}}, []file{{"pids.max", v}}); err != nil {
			return err
		}
	}
	return nil
}

type file struct{ name, value string }

// write writes the v2 files of a controller into the first directory of g that has the first
// of them, else the v1 files into the first that has theirs. A later file of a set that is
// missing (memory.swap.max without swap accounting) is skipped.
func (g Group) write(controller string, v2, v1 []file) error {
	for _, set := range [][]file{v2, v1} {
		for _, d := range g.Dirs() {
			if _, err := os.Stat(filepath.Join(d, set[0].name)); err != nil {
				continue
			}
			for i, f := range set {
				p := filepath.Join(d, f.name)
				if i > 0 {
					if _, err := os.Stat(p); err != nil {
						continue
					}
				}
				if err := os.WriteFile(p, []byte(f.value), 0o644); err != nil {
					return fmt.Errorf("write %s to %s: %w", f.value, p, err)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("no cgroup directory of %v has the %s controller's files", g.Dirs(), controller)
}

// Enter moves process pid into every directory of g but skip (the v2 directory it was started
// in with clone3's CLONE_INTO_CGROUP, or ""). Moving a process waits for an RCU grace period
// (milliseconds): start it in its cgroup where the kernel can.
func (g Group) Enter(pid int, skip string) error {
	for _, d := range g.Dirs() {
		if d == skip {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move process %d into the cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// Procs returns the processes in g (none when it is gone).
func (g Group) Procs() []int {
	var out []int
	for _, d := range g.Dirs() {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Kill kills every process in g (cgroup.kill of its v2 directory, Linux 5.14+; else SIGKILL to
// each until none is left, the pids limit bounding what a fork loop can add) and waits until
// g is empty or the deadline passes; it returns the processes left.
func (g Group) Kill(deadline time.Time) []int {
	if g.IsZero() {
		return nil
	}
	useKill := g.V2 != "" && os.WriteFile(filepath.Join(g.V2, "cgroup.kill"), []byte("1"), 0o644) == nil
	for {
		left := g.Procs()
		if len(left) == 0 {
			return nil
		}
		if !useKill {
			for _, pid := range left {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			return left
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Remove removes g's (empty) directories, retrying while its last processes are still being
// torn down; directories already gone are no error.
func (g Group) Remove() error {
	var errs []error
	for _, d := range g.Dirs() {
		var err error
		for range 100 {
			err = unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				err = nil
				break
			}
			if !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove the cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Stats are a cgroup's figures, for all its processes together (those that ended included);
// -1 where the host does not count it.
type Stats struct {
	CPU             time.Duration // user and system CPU time
	MemoryBytes     int64         // memory in use now (page cache included)
	PeakMemoryBytes int64         // the most it used at once
	OOMKills        int64         // processes the kernel's OOM killer ended for the memory limit
}

// Stats reads g's figures: cpu.stat, memory.current, memory.peak and memory.events on v2;
// cpuacct.usage, memory.usage_in_bytes, memory.max_usage_in_bytes and memory.oom_control on v1.
func (g Group) Stats() Stats {
	s := Stats{CPU: -1, MemoryBytes: -1, PeakMemoryBytes: -1, OOMKills: -1}
	for _, d := range g.Dirs() {
		if s.CPU < 0 {
			if us := keyed(d, "cpu.stat", "usage_usec"); us >= 0 {
				s.CPU = time.Duration(us) * time.Microsecond
			} else if ns := value(d, "cpuacct.usage"); ns >= 0 {
				s.CPU = time.Duration(ns)
			}
		}
		if s.MemoryBytes < 0 {
			s.MemoryBytes = first(value(d, "memory.current"), value(d, "memory.usage_in_bytes"))
		}
		if s.PeakMemoryBytes < 0 {
			s.PeakMemoryBytes = first(value(d, "memory.peak"), value(d, "memory.max_usage_in_bytes"))
		}
		if s.OOMKills < 0 {
			s.OOMKills = first(keyed(d, "memory.events", "oom_kill"), keyed(d, "memory.oom_control", "oom_kill"))
		}
	}
	return s
}

// first returns a unless it is -1, else b.
func first(a, b int64) int64 {
	if a >= 0 {
		return a
	}
	return b
}

// keyed reads one "key value" line of a flat-keyed cgroup file; -1 when it is missing.
func keyed(dir, name, key string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// value reads a single-value cgroup file; -1 when it is missing.
func value(dir, name string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}
