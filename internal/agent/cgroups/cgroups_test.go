package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// touch creates the files (empty, or with content after '=') under dir.
func touch(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		name, content, _ := strings.Cut(f, "=")
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// Create writes each limit into the directory of the hierarchy that has its controller, in
// that version's files; directories standing for a v2 cgroup and v1 cgroups.
func TestCreateWritesLimitsPerVersion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string // in v2/, v1mem/, v1cpu/, v1pids/
		want  map[string]string
	}{
		{"v2", []string{"v2/cpu.max", "v2/memory.max", "v2/memory.swap.max", "v2/pids.max"},
			map[string]string{"v2/cpu.max": "150000 100000", "v2/memory.max": "268435456", "v2/memory.swap.max": "0", "v2/pids.max": "100"}},
		{"v1", []string{"v1cpu/cpu.cfs_quota_us", "v1cpu/cpu.cfs_period_us", "v1mem/memory.limit_in_bytes", "v1mem/memory.memsw.limit_in_bytes", "v1pids/pids.max"},
			map[string]string{"v1cpu/cpu.cfs_quota_us": "150000", "v1cpu/cpu.cfs_period_us": "100000", "v1mem/memory.limit_in_bytes": "268435456", "v1mem/memory.memsw.limit_in_bytes": "268435456", "v1pids/pids.max": "100"}},
		{"v1 without swap accounting", []string{"v1cpu/cpu.cfs_quota_us", "v1cpu/cpu.cfs_period_us", "v1mem/memory.limit_in_bytes", "v1pids/pids.max"},
			map[string]string{"v1mem/memory.limit_in_bytes": "268435456", "v1mem/memory.memsw.limit_in_bytes": "<open"}},
		{"hybrid: v2 tracks, v1 limits", []string{"v2/cgroup.procs", "v1cpu/cpu.cfs_quota_us", "v1cpu/cpu.cfs_period_us", "v1mem/memory.limit_in_bytes", "v1pids/pids.max"},
			map[string]string{"v1cpu/cpu.cfs_quota_us": "150000", "v1mem/memory.limit_in_bytes": "268435456", "v1pids/pids.max": "100", "v2/memory.max": "<open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			touch(t, root, tc.files...)
			g := Group{V2: filepath.Join(root, "v2"), V1: []string{filepath.Join(root, "v1mem"), filepath.Join(root, "v1cpu"), filepath.Join(root, "v1pids")}}
			if err := g.Create(Limits{CPUMillicores: 1500, MemoryBytes: 256 << 20, Processes: 100}); err != nil {
				t.Fatal(err)
			}
			for f, want := range tc.want {
				if got := read(t, filepath.Join(root, f)); !strings.HasPrefix(got, want) {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
		})
	}
	// The kernel's minimum quota; no limit, no file; a limit without its controller, an error.
	root := t.TempDir()
	touch(t, root, "v2/cpu.max")
	g := Group{V2: filepath.Join(root, "v2")}
	if err := g.Create(Limits{CPUMillicores: 5}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "v2/cpu.max")); got != "1000 100000" {
		t.Errorf("5 millicores: cpu.max = %q, want the kernel's minimum quota, 1000 100000", got)
	}
	if _, err := os.Stat(filepath.Join(root, "v2/memory.max")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("memory.max written without a limit")
	}
	if err := g.Create(Limits{MemoryBytes: 1 << 30}); err == nil || !strings.Contains(err.Error(), "memory controller") {
		t.Errorf("a memory limit without the controller: %v, want an error naming it", err)
	}
}

// Stats reads v2's and v1's files.
func TestStatsPerVersion(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "v2/cpu.stat=usage_usec 1500\nuser_usec 1000\n", "v2/memory.current=4096\n", "v2/memory.peak=8192\n", "v2/memory.events=low 0\noom 2\noom_kill 1\n")
	if got := (Group{V2: filepath.Join(root, "v2")}).Stats(); got != (Stats{CPU: 1500 * time.Microsecond, MemoryBytes: 4096, PeakMemoryBytes: 8192, OOMKills: 1}) {
		t.Errorf("v2 stats = %+v", got)
	}
	touch(t, root, "v2t/cpu.stat=usage_usec 7\n", "mem/memory.usage_in_bytes=100\n", "mem/memory.max_usage_in_bytes=200\n", "mem/memory.oom_control=oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "cpuacct/cpuacct.usage=5000\n")
	g := Group{V2: filepath.Join(root, "v2t"), V1: []string{filepath.Join(root, "mem"), filepath.Join(root, "cpuacct")}}
	if got := g.Stats(); got != (Stats{CPU: 7 * time.Microsecond, MemoryBytes: 100, PeakMemoryBytes: 200, OOMKills: 3}) {
		t.Errorf("hybrid stats = %+v", got)
	}
	if got := (Group{}).Stats(); got != (Stats{CPU: -1, MemoryBytes: -1, PeakMemoryBytes: -1, OOMKills: -1}) {
		t.Errorf("no cgroup: %+v", got)
	}
}

// Prepare enables the v2 controllers from the hierarchy's root down to the parent, in a tree
// standing for the hierarchy (whose subtree_control files are plain files), and creates the
// parent in each v1 hierarchy.
func TestPrepareEnablesControllers(t *testing.T) {
	v2, v1 := t.TempDir(), t.TempDir()
	for _, d := range []string{"", "cubefleet", "cubefleet/abc"} {
		touch(t, v2, filepath.Join(d, "cgroup.subtree_control"))
	}
	touch(t, v2, "cgroup.subtree_control=cpu memory\n") // already on at the root
	h := Host{V2: v2, V2Controllers: []string{CPU, Memory}, V1: map[string]string{Pids: v1}}.Prepare("cubefleet/abc")
	if h.V2 != v2 || len(h.V2Controllers) != 2 || len(h.Notes) != 0 || h.V1[Pids] != v1 {
		t.Fatalf("Prepare = %+v", h)
	}
	if got := read(t, filepath.Join(v2, "cubefleet/abc/cgroup.subtree_control")); got != "+memory" {
		t.Errorf("cubefleet/abc/cgroup.subtree_control = %q, want the last write +memory", got)
	}
	if fi, err := os.Stat(filepath.Join(v1, "cubefleet/abc")); err != nil || !fi.IsDir() {
		t.Errorf("v1 parent: %v", err)
	}
	if got := h.Group("cubefleet/abc", "sandbox-1"); got.V2 != filepath.Join(v2, "cubefleet/abc/sandbox-1") || len(got.V1) != 1 {
		t.Errorf("Group = %+v", got)
	}
	// A level that refuses: that controller is dropped, and the note says why.
	os.Remove(filepath.Join(v2, "cubefleet/abc", "cgroup.subtree_control"))
	h = Host{V2: v2, V2Controllers: []string{CPU}}.Prepare("cubefleet/abc")
	if len(h.V2Controllers) != 0 || len(h.Notes) != 1 || !strings.Contains(h.Notes[0], "cannot enable the cpu controller") {
		t.Errorf("Prepare with a broken level = %+v", h)
	}
	if h.Has(CPU) || !h.Tracks() {
		t.Errorf("Has(cpu) %v, Tracks %v: want tracking without cpu", h.Has(CPU), h.Tracks())
	}
}

// This host's real hierarchies, when it has any: a cgroup made with a memory and a pids limit,
// a process moved into it, killed with it, and the cgroup removed.
func TestGroupOnThisHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: writes the host's cgroups")
	}
	h := Detect("", 0)
	t.Logf("this host: %s %v", h, h.Notes)
	if !h.Tracks() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI's machine has cgroups; Detect found none: %v", h.Notes)
		}
		t.Skip("no cgroups")
	}
	parent := "cubefleet-test-group-" + strconv.Itoa(os.Getpid())
	h = h.Prepare(parent)
	defer h.RemoveParent(parent)
	g := h.Group(parent, "sandbox-1")
	l := Limits{}
	if h.Has(Memory) {
		l.MemoryBytes = 64 << 20
	}
	if h.Has(Pids) {
		l.Processes = 10
	}
	if err := g.Create(l); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for range 3 {
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Enter(pid, ""); err != nil {
			unix.Kill(pid, unix.SIGKILL)
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if got := g.Procs(); len(got) != 3 {
		t.Errorf("Procs = %v, want the 3 processes %v", got, pids)
	}
	if s := g.Stats(); h.Has(Memory) && (s.MemoryBytes < 0 || s.PeakMemoryBytes < 0) {
		t.Errorf("Stats = %+v, want its memory figures (a moved process brings no charge)", s)
	}
	if left := g.Kill(time.Now().Add(2 * time.Second)); len(left) > 0 {
		t.Fatalf("left after the kill: %v", left)
	}
	for _, pid := range pids {
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
			t.Errorf("pid %d: %v, want killed by SIGKILL", pid, ws)
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there", d)
		}
	}
}
