package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The mount tables of hosts, from /proc/self/mountinfo.
const (
	// This machine's kind: cgroup v1 controllers, and a cgroup v2 hierarchy beside them.
	mountsHybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// A current distribution: the unified hierarchy only.
	mountsUnified = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	mountsReadOnly = `26 22 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw
`
	mountsNone = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
`
	mountsEscaped = `26 22 0:23 / /run/my\040cgroups rw,relatime - cgroup2 none rw
`
)

// fakeHost writes a host's mount table and the cgroup.controllers of its cgroup v2 hierarchy
// under a directory, for detect.
func fakeHost(t *testing.T, mounts, mountPoint, controllers string) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, data string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/self/mountinfo", mounts)
	if mountPoint != "" {
		write(filepath.Join(mountPoint, "cgroup.controllers"), controllers)
		write(filepath.Join(mountPoint, "cgroup.subtree_control"), "")
	}
	return root
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name, mounts, mountPoint, controllers string
		want                                  string
	}{
		{"hybrid", mountsHybrid, "/sys/fs/cgroup/unified", "hugetlb\n",
			"cgroup v2 at /sys/fs/cgroup/unified (tracking only); rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; CPU not limited (cpu, memory, pids are bound to cgroup v1, not in /sys/fs/cgroup/unified)"},
		{"unified", mountsUnified, "/sys/fs/cgroup", "cpuset cpu io memory hugetlb pids rdma misc\n",
			"cgroup v2 at /sys/fs/cgroup: cpu, memory, pids; rlimits: open files via RLIMIT_NOFILE"},
		{"unified without pids", mountsUnified, "/sys/fs/cgroup", "cpu memory\n",
			"cgroup v2 at /sys/fs/cgroup: cpu, memory; rlimits: processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE (/sys/fs/cgroup has no pids controller)"},
		{"unified without controllers", mountsUnified, "/sys/fs/cgroup", "\n",
			"cgroup v2 at /sys/fs/cgroup (tracking only); rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; CPU not limited (/sys/fs/cgroup has no cpu, memory, pids controller)"},
		{"read-only", mountsReadOnly, "/sys/fs/cgroup", "cpu memory pids\n",
			"rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; CPU not limited (cgroup v2 at /sys/fs/cgroup is mounted read-only)"},
		{"none", mountsNone, "", "",
			"rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; CPU not limited (no cgroup v2 hierarchy is mounted)"},
		{"escaped mount point", mountsEscaped, "/run/my cgroups", "cpu memory pids",
			"cgroup v2 at /run/my cgroups: cpu, memory, pids; rlimits: open files via RLIMIT_NOFILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeHost(t, tc.mounts, tc.mountPoint, tc.controllers)
			if got := detect(root, 0).String(); got != tc.want {
				t.Errorf("detect:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	// The hierarchy exists but cannot be written: no cgroups.
	root := fakeHost(t, mountsUnified, "/sys/fs/cgroup", "cpu memory pids")
	if os.Geteuid() != 0 {
		os.Chmod(filepath.Join(root, "sys/fs/cgroup/cgroup.subtree_control"), 0o444)
		want := "rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; CPU not limited (cgroup v2 at /sys/fs/cgroup is not writable by uid " + strconv.Itoa(os.Geteuid()) + ")"
		if got := detect(root, os.Geteuid()).String(); got != want {
			t.Errorf("detect, not writable:\n got %s\nwant %s", got, want)
		}
	}
	own := Isolation{OwnUser: true, UID: 1000, Note: "cgroups are used only as root"}
	want := "rlimits: memory via RLIMIT_AS, open files via RLIMIT_NOFILE; CPU not limited; processes not limited (cgroups are used only as root); sandboxes run as the agent's own user (uid 1000): they can read everything the agent can, for development only"
	if got := own.String(); got != want {
		t.Errorf("own user:\n got %s\nwant %s", got, want)
	}
}

// This host, for the record (the test log shows what the driver would use here).
func TestDetectThisHost(t *testing.T) {
	iso := Detect()
	t.Logf("Detect() = %s", iso)
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil && !strings.Contains(string(data), " - cgroup2 ") && iso.Cgroup != "" {
		t.Errorf("no cgroup2 mount, yet Detect found %s", iso.Cgroup)
	}
}

// The cgroup files written for a sandbox's limits, into a directory standing for its cgroup.
func TestCreateCgroupWritesLimits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sbx")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("max\n"), 0o644)
	if err := createCgroup(dir, cgroupLimits{CPUMillicores: 1500, MemoryBytes: 256 << 20, Processes: 100}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"cpu.max": "150000 100000", "memory.max": "268435456", "memory.swap.max": "0", "pids.max": "100",
	} {
		if b, _ := os.ReadFile(filepath.Join(dir, file)); string(b) != want {
			t.Errorf("%s = %q, want %q", file, b, want)
		}
	}
	small := filepath.Join(t.TempDir(), "small")
	if err := createCgroup(small, cgroupLimits{CPUMillicores: 5}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(small, "cpu.max")); string(b) != "1000 100000" {
		t.Errorf("5 millicores: cpu.max = %q, want the kernel's minimum quota, 1000 100000", b)
	}
	for _, f := range []string{"memory.max", "memory.swap.max", "pids.max"} {
		if _, err := os.Stat(filepath.Join(small, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s written without a limit", f)
		}
	}
}

// The real cgroup v2 hierarchy of this host, when it has a writable one: a process placed in a
// sandbox's cgroup is killed with it, and the cgroup is removed.
func TestCgroupKillOnThisHost(t *testing.T) {
	iso := Detect()
	if iso.Cgroup == "" {
		t.Skipf("no usable cgroup v2 hierarchy: %s", iso)
	}
	parent := filepath.Join(iso.Cgroup, "cubefleet-test-kill-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(parent)
	cg := filepath.Join(parent, "sbx")
	if err := createCgroup(cg, cgroupLimits{}); err != nil {
		t.Fatal(err)
	}
	cgFD, err := unix.Open(cg, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cgFD)
	var pids []int
	for range 3 {
		pid, err := forkSleep(cgFD)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if got := cgroupProcs(cg); len(got) != 3 {
		t.Fatalf("cgroup.procs = %v, want the 3 processes %v", got, pids)
	}
	if left := killCgroup(cg, timeNowPlus(2)); len(left) > 0 {
		t.Fatalf("left after the kill: %v", left)
	}
	for _, pid := range pids {
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
			t.Errorf("pid %d: %v, want killed by SIGKILL", pid, ws)
		}
	}
	if err := removeCgroup(cg); err != nil {
		t.Fatal(err)
	}
}

// setupCgroup enables the controllers from the hierarchy's root down to the sandboxes' parent,
// in a directory tree standing for the hierarchy (whose subtree_control files are plain files).
func TestSetupCgroupEnablesControllers(t *testing.T) {
	mount := t.TempDir()
	for _, d := range []string{"", "cubefleet", "cubefleet/abc"} {
		os.MkdirAll(filepath.Join(mount, d), 0o755)
		os.WriteFile(filepath.Join(mount, d, "cgroup.subtree_control"), nil, 0o644)
	}
	os.WriteFile(filepath.Join(mount, "cgroup.subtree_control"), []byte("cpu memory\n"), 0o644) // already on at the root
	iso := setupCgroup(Isolation{Cgroup: mount, Controllers: []string{"cpu", "memory", "pids"}}, "cubefleet/abc")
	if iso.Cgroup != mount || len(iso.Controllers) != 3 || iso.Note != "" {
		t.Fatalf("setupCgroup = %+v", iso)
	}
	for d, want := range map[string]string{"": "+pids", "cubefleet": "+pids", "cubefleet/abc": "+pids"} {
		if b, _ := os.ReadFile(filepath.Join(mount, d, "cgroup.subtree_control")); string(b) != want {
			t.Errorf("%s/cgroup.subtree_control = %q, want the last write %q", d, b, want)
		}
	}
	// A level that refuses: that controller falls back, and the note says why.
	os.Remove(filepath.Join(mount, "cubefleet/abc", "cgroup.subtree_control"))
	iso = setupCgroup(Isolation{Cgroup: mount, Controllers: []string{"cpu"}}, "cubefleet/abc")
	if len(iso.Controllers) != 0 || !strings.Contains(iso.Note, "cannot enable the cpu controller") {
		t.Errorf("setupCgroup with a broken level = %+v", iso)
	}
}

// TestUIDLeasesStaleTakeoverOnce: agents of one host that find the same stale lease at the same
// time never both take it over (the host-wide lock of the lease directory), whatever the order
// in which their sandboxes' directories go.
func TestUIDLeasesStaleTakeoverOnce(t *testing.T) {
	dir, owners := t.TempDir(), t.TempDir()
	agents := []*uidLeases{{dir: dir, first: 6000, count: 3}, {dir: dir, first: 6000, count: 3}, {dir: dir, first: 6000, count: 3}}
	var mu sync.Mutex
	held := map[int]string{}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := agents[g%len(agents)]
			for i := range 200 {
				owner := filepath.Join(owners, fmt.Sprintf("sbx-%d-%d", g, i))
				if err := os.Mkdir(owner, 0o700); err != nil {
					t.Error(err)
					return
				}
				uid, err := l.acquire(owner)
				if err != nil { // all 3 in use: try again
					os.Remove(owner)
					continue
				}
				mu.Lock()
				if prev, dup := held[uid]; dup {
					t.Errorf("uid %d leased to %s and %s at once", uid, prev, owner)
				}
				held[uid] = owner
				mu.Unlock()
				mu.Lock()
				delete(held, uid)
				mu.Unlock()
				os.Remove(owner) // the sandbox's directory goes first: its lease is stale until released
				l.release(uid, owner)
			}
		}()
	}
	wg.Wait()
}

// TestUIDLeaseNeedsItsDirectory: a lease is given only to a sandbox directory that exists, since
// a lease whose directory does not exist is stale and another agent of the host takes it over
// (two sandboxes of two agents then ran as one uid, and one's end killed the other).
func TestUIDLeaseNeedsItsDirectory(t *testing.T) {
	l := &uidLeases{dir: t.TempDir(), first: 6100, count: 2}
	if uid, err := l.acquire(filepath.Join(t.TempDir(), "not-yet")); err == nil {
		t.Errorf("acquire for a directory that does not exist = %d, want an error", uid)
	}
}

func TestUIDLeases(t *testing.T) {
	dir := t.TempDir()
	owners := t.TempDir()
	// Two agents sharing the host's lease directory and a range of 50 ids.
	a := &uidLeases{dir: dir, first: 5000, count: 50}
	b := &uidLeases{dir: dir, first: 5000, count: 50}
	var mu sync.Mutex
	seen := map[int]string{}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			owner := filepath.Join(owners, "sbx"+strconv.Itoa(i))
			os.Mkdir(owner, 0o700)
			uid, err := l.acquire(owner)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if prev, dup := seen[uid]; dup {
				t.Errorf("uid %d leased to %s and %s", uid, prev, owner)
			}
			seen[uid] = owner
		}()
	}
	wg.Wait()
	os.Mkdir(filepath.Join(owners, "one-too-many"), 0o700)
	os.Mkdir(filepath.Join(owners, "new"), 0o700)
	if _, err := a.acquire(filepath.Join(owners, "one-too-many")); err == nil || !strings.Contains(err.Error(), "all 50 sandbox user ids from 5000 to 5049 are in use") {
		t.Errorf("acquire past the range: %v", err)
	}
	// A released id is free again; a lease whose directory vanished is taken over.
	a.release(5003, seen[5003])
	os.Remove(seen[5007])
	got := map[int]bool{}
	for range 2 {
		uid, err := b.acquire(filepath.Join(owners, "new"))
		if err != nil {
			t.Fatal(err)
		}
		got[uid] = true
	}
	if !got[5003] || !got[5007] {
		t.Errorf("acquired %v, want 5003 (released) and 5007 (stale)", got)
	}
	// After a reboot emptied the leases, a sandbox claims its id back; another may not take it.
	if err := a.claim(5007, filepath.Join(owners, "new")); err != nil {
		t.Errorf("claim own lease: %v", err)
	}
	if err := a.claim(5007, filepath.Join(owners, "thief")); err == nil {
		t.Error("claimed a lease another sandbox holds")
	}
}

func TestAccountsInRange(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\nbroken\nbob:x:2000005:1::/:/bin/false\n"), 0o644)
	if got := accountsInRange(passwd, 2_000_000, 65536); len(got) != 1 || got[0] != "bob (uid 2000005)" {
		t.Errorf("accountsInRange = %v, want bob", got)
	}
	if got := accountsInRange(passwd, 3_000_000, 10); len(got) != 0 {
		t.Errorf("accountsInRange = %v, want none", got)
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses, as a sandbox may choose.
	line := "4242 (evil) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 123456 1000000 50 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{State: 'S', PPID: 1, PGID: 4242, SID: 4242, CPUTicks: 13, StartTicks: 123456, RSSPages: 50}
	if st != want {
		t.Errorf("parseStat = %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "1 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// FuzzParseStat: the command name in /proc/<pid>/stat is the sandbox's to choose.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("4242 (evil) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 123456 1000000 50 0\n"))
	f.Add([]byte("1 ()) R"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseStat(data)
		if err == nil && st.State == 0 {
			t.Errorf("parseStat(%q) accepted without a state", data)
		}
	})
}

func timeNowPlus(seconds int) time.Time { return time.Now().Add(time.Duration(seconds) * time.Second) }

// forkSleep starts `sleep 30` directly in the cgroup cgFD (clone3 with CLONE_INTO_CGROUP).
func forkSleep(cgFD int) (int, error) {
	return syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgFD},
	})
}
