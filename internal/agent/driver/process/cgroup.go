package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/hostinfo"
)

// limitControllers are the cgroup v2 controllers the driver limits sandboxes with, in the order
// they are described.
var limitControllers = []string{"cpu", "memory", "pids"}

// Isolation is what the process driver enforces on a host, and how: which limits a cgroup v2
// hierarchy enforces, and which fall back to rlimits. Detect reads it from the host;
// Driver.Isolation reports what a driver actually set up.
type Isolation struct {
	// Cgroup is the mount point of the cgroup v2 hierarchy the driver puts each sandbox in (a
	// cgroup of its own, for tracking its processes, killing them at once and reading its CPU
	// time), e.g. /sys/fs/cgroup; "" when there is none it can use.
	Cgroup string `json:"cgroup,omitempty"`
	// Controllers are the limit controllers (cpu, memory, pids) that hierarchy offers: each
	// enforces its limit (cpu.max, memory.max and memory.swap.max, pids.max); a limit without
	// its controller falls back to an rlimit (memory: RLIMIT_AS; processes: RLIMIT_NPROC) or,
	// for CPU, is not enforced.
	Controllers []string `json:"controllers,omitempty"`
	// OwnUser is set when sandboxes run as the agent's own user (development only: the agent
	// is not root and Config.AllowOwnUser is set); then UID is that user.
	OwnUser bool `json:"ownUser,omitempty"`
	UID     int  `json:"uid,omitempty"`
	// Note says why cgroup v2 is not used, or not for every limit.
	Note string `json:"note,omitempty"`
}

// has reports whether the cgroup enforces controller c.
func (i Isolation) has(c string) bool { return i.Cgroup != "" && slices.Contains(i.Controllers, c) }

// String describes i on one line, for `agent check` and the agent's log, e.g.
// "cgroup v2 at /sys/fs/cgroup: cpu, memory, pids; rlimits: open files via RLIMIT_NOFILE", or
// "rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; CPU
// not limited (no cgroup v2 hierarchy is mounted)".
func (i Isolation) String() string {
	var b strings.Builder
	if i.Cgroup != "" {
		var cs []string
		for _, c := range limitControllers {
			if i.has(c) {
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			fmt.Fprintf(&b, "cgroup v2 at %s (tracking only); ", i.Cgroup)
		} else {
			fmt.Fprintf(&b, "cgroup v2 at %s: %s; ", i.Cgroup, strings.Join(cs, ", "))
		}
	}
	rl := []string{}
	if !i.has("memory") {
		rl = append(rl, "memory via RLIMIT_AS")
	}
	if !i.has("pids") && !i.OwnUser {
		rl = append(rl, "processes via RLIMIT_NPROC")
	}
	rl = append(rl, "open files via RLIMIT_NOFILE")
	b.WriteString("rlimits: " + strings.Join(rl, ", "))
	if !i.has("cpu") {
		b.WriteString("; CPU not limited")
	}
	if !i.has("pids") && i.OwnUser {
		b.WriteString("; processes not limited")
	}
	if i.Note != "" {
		b.WriteString(" (" + i.Note + ")")
	}
	if i.OwnUser {
		fmt.Fprintf(&b, "; sandboxes run as the agent's own user (uid %d): they can read everything the agent can, for development only", i.UID)
	}
	return b.String()
}

// Detect reads what this host offers to limit sandboxes with, for the process driver running
// as the current user: it finds the cgroup v2 hierarchy in /proc/self/mountinfo and the
// controllers its cgroup.controllers lists, and checks it is writable. It only reads: a driver
// may still fall back when enabling the controllers fails (Driver.Isolation says what it
// uses). It never fails: a host without a usable cgroup v2 hierarchy gets rlimits.
func Detect() Isolation { return detect("", os.Geteuid()) }

// Expected returns what a process driver started now, by this process's user, would enforce
// (New may still fall back, when enabling a controller fails; Driver.Isolation says what it
// uses): as root, Detect's; otherwise, with allowOwnUser, sandboxes run as this user without
// cgroups; without it, an error saying that the driver needs root. It only reads.
func Expected(allowOwnUser bool) (Isolation, error) {
	euid := os.Geteuid()
	if euid == 0 {
		return detect("", 0), nil
	}
	if !allowOwnUser {
		return Isolation{}, fmt.Errorf("the process driver runs each sandbox as a user of its own, which needs root, and this agent runs as uid %d: run the agent as root, or allow sandboxes to run as the agent's own user for development (CUBEFLEET_SANDBOX_ALLOW_OWN_USER=1; they can then read the agent's files)", euid)
	}
	iso := Isolation{OwnUser: true, UID: euid, Note: "cgroups are used only as root"}
	if det := detect("", euid); det.Cgroup == "" {
		iso.Note = det.Note
	}
	return iso, nil
}

// detect is Detect for a host whose files are under root ("" for this host).
func detect(root string, euid int) Isolation {
	cg := hostinfo.Host{Root: root}.Cgroup()
	if cg.Problem != "" {
		return Isolation{Note: cg.Problem}
	}
	mp := cg.Mount
	iso := Isolation{Cgroup: mp}
	var missing, onV1 []string
	for _, c := range limitControllers {
		switch {
		case cg.Has(c):
			iso.Controllers = append(iso.Controllers, c)
		case slices.Contains(cg.V1, c):
			onV1 = append(onV1, c)
		default:
			missing = append(missing, c)
		}
	}
	switch {
	case cg.ReadOnly:
		return Isolation{Note: fmt.Sprintf("cgroup v2 at %s is mounted read-only", mp)}
	case unix.Access(filepath.Join("/", root, mp, "cgroup.subtree_control"), unix.W_OK) != nil:
		return Isolation{Note: fmt.Sprintf("cgroup v2 at %s is not writable by uid %d", mp, euid)}
	}
	var notes []string
	if len(onV1) > 0 {
		notes = append(notes, fmt.Sprintf("%s %s bound to cgroup v1, not in %s", strings.Join(onV1, ", "), cubefleet.Plural(len(onV1), "is", "are"), mp))
	}
	if len(missing) > 0 {
		notes = append(notes, fmt.Sprintf("%s has no %s controller", mp, strings.Join(missing, ", ")))
	}
	iso.Note = strings.Join(notes, "; ")
	return iso
}

// setupCgroup prepares the parent cgroup sandboxes are created in (iso.Cgroup/parent) and
// enables iso's controllers for it. It returns the isolation actually available: without the
// parent, no cgroup; with a controller that could not be enabled, that limit falls back.
func setupCgroup(iso Isolation, parent string) Isolation {
	if iso.Cgroup == "" {
		return iso
	}
	dir := filepath.Join(iso.Cgroup, parent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		iso.Note = joinNote(iso.Note, fmt.Sprintf("cannot create the cgroup %s: %v", dir, err))
		iso.Cgroup, iso.Controllers = "", nil
		return iso
	}
	var ok []string
	for _, c := range iso.Controllers {
		if err := enableController(iso.Cgroup, parent, c); err != nil {
			iso.Note = joinNote(iso.Note, fmt.Sprintf("cannot enable the %s controller for %s: %v", c, dir, err))
			continue
		}
		ok = append(ok, c)
	}
	iso.Controllers = ok
	return iso
}

// enableController writes "+c" to the cgroup.subtree_control of every cgroup from the
// hierarchy's root down to root/parent (the parent of the sandboxes' cgroups) where it is not
// enabled yet, so that each sandbox's cgroup has the controller's files.
func enableController(root, parent, c string) error {
	dir := root
	for _, p := range append([]string{""}, strings.Split(filepath.Clean(parent), "/")...) {
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

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// cgroupPeriodMicros is the period of cpu.max: 100 ms, the kernel's default.
const cgroupPeriodMicros = 100_000

// cgroupLimits are the files written into a sandbox's cgroup before its process joins it.
type cgroupLimits struct {
	CPUMillicores int64 `json:"cpuMillicores,omitempty"` // cpu.max; 0: not written
	MemoryBytes   int64 `json:"memoryBytes,omitempty"`   // memory.max, and memory.swap.max 0; 0: not written
	Processes     int64 `json:"processes,omitempty"`     // pids.max; 0: not written
}

// createCgroup creates the cgroup dir and writes l into it. An existing directory (a
// leftover of a sandbox of the same id) is reused.
func createCgroup(dir string, l cgroupLimits) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	write := func(name, v string) error {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			return fmt.Errorf("write %s to %s: %w", v, filepath.Join(dir, name), err)
		}
		return nil
	}
	if l.CPUMillicores > 0 {
		quota := max(l.CPUMillicores*cgroupPeriodMicros/1000, 1000) // the kernel's minimum is 1 ms
		if err := write("cpu.max", fmt.Sprintf("%d %d", quota, cgroupPeriodMicros)); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 {
		if err := write("memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			if err := write("memory.swap.max", "0"); err != nil {
				return err
			}
		}
	}
	if l.Processes > 0 {
		if err := write("pids.max", strconv.FormatInt(l.Processes, 10)); err != nil {
			return err
		}
	}
	return nil
}

// removeEmptyCgroups removes the cgroups under parent that hold no process: those of spare
// supervisors that ended without a sandbox, or of sandboxes whose supervisor was killed. A cgroup
// in use is not removed (rmdir fails with EBUSY).
func removeEmptyCgroups(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "sandbox-") {
			unix.Rmdir(filepath.Join(parent, e.Name()))
		}
	}
}

// cgroupProcs returns the processes in cgroup dir (none when it is gone).
func cgroupProcs(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killCgroup kills every process in cgroup dir (cgroup.kill, Linux 5.14+, else SIGKILL to each
// until none is left) and waits until it is empty or the deadline passes; it returns the
// processes left.
func killCgroup(dir string, deadline time.Time) []int {
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	useKill := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644) == nil
	for {
		left := cgroupProcs(dir)
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

// removeCgroup removes the (empty) cgroup dir, retrying while its last processes are still
// being torn down; a cgroup that is already gone is no error.
func removeCgroup(dir string) error {
	var err error
	for range 100 {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("remove the cgroup %s: %w", dir, err)
}

// cgroupStat reads one "key value" field of a cgroup's flat-keyed file (cpu.stat,
// memory.events); -1 when it is missing.
func cgroupStat(dir, file, key string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// cgroupValue reads a single-value cgroup file (memory.current, memory.peak); -1 when it is
// missing.
func cgroupValue(dir, file string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}
