package process

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
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
	// An older distribution: cgroup v1 only.
	mountsV1 = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
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
	write("proc/self/status", "Name:\tcubefleet\nSeccomp:\t0\n")
	write("proc/sys/user/max_user_namespaces", "15000\n")
	for _, ns := range []string{"pid", "mnt", "ipc", "uts", "net", "user"} {
		write("proc/self/ns/"+ns, "")
	}
	for _, l := range strings.Split(mounts, "\n") { // every mount point, for the writable checks
		if f := strings.Fields(l); len(f) > 4 {
			os.MkdirAll(filepath.Join(root, strings.ReplaceAll(f[4], `\040`, " ")), 0o755)
		}
	}
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
			"cgroup v1: cpu, memory, pids; cgroup v2 at /sys/fs/cgroup/unified: tracking only; rlimits: open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited"},
		{"v1 only", mountsV1, "", "",
			"cgroup v1: cpu, memory, pids; rlimits: open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited"},
		{"unified", mountsUnified, "/sys/fs/cgroup", "cpuset cpu io memory hugetlb pids rdma misc\n",
			"cgroup v2 at /sys/fs/cgroup: cpu, memory, pids; rlimits: open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited"},
		{"unified without pids", mountsUnified, "/sys/fs/cgroup", "cpu memory\n",
			"cgroup v2 at /sys/fs/cgroup: cpu, memory; rlimits: processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited (no cgroup hierarchy offers the pids controller)"},
		{"unified without controllers", mountsUnified, "/sys/fs/cgroup", "\n",
			"cgroup v2 at /sys/fs/cgroup: tracking only; rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited; CPU not limited (no cgroup hierarchy offers the cpu, memory, pids controllers)"},
		{"read-only", mountsReadOnly, "/sys/fs/cgroup", "cpu memory pids\n",
			"rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited; CPU not limited (cgroup v2 at /sys/fs/cgroup is mounted read-only; no cgroup hierarchy offers the cpu, memory, pids controllers)"},
		{"none", mountsNone, "", "",
			"rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited; CPU not limited (no cgroup hierarchy offers the cpu, memory, pids controllers)"},
		{"escaped mount point", mountsEscaped, "/run/my cgroups", "cpu memory pids",
			"cgroup v2 at /run/my cgroups: cpu, memory, pids; rlimits: open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited"},
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
		want := "rlimits: memory via RLIMIT_AS, processes via RLIMIT_NPROC, open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net, user (user: the leased uid and gid mapped to themselves, nothing else; network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited; CPU not limited (cgroup v2 at /sys/fs/cgroup is not writable by uid " + strconv.Itoa(os.Geteuid()) + "; no cgroup hierarchy offers the cpu, memory, pids controllers)"
		if got := detect(root, os.Geteuid()).String(); got != want {
			t.Errorf("detect, not writable:\n got %s\nwant %s", got, want)
		}
	}
	// A host that allows no user namespace, or whose kernel has none: the others stay.
	root = fakeHost(t, mountsV1, "", "")
	os.WriteFile(filepath.Join(root, "proc/sys/user/max_user_namespaces"), []byte("0\n"), 0o644)
	want := "cgroup v1: cpu, memory, pids; rlimits: open files via RLIMIT_NOFILE; namespaces: pid, mount, ipc, uts, net (network: loopback only, or for a public template a veth with NAT to the internet only); seccomp: the default profile; disk not limited (no user namespace: user.max_user_namespaces is 0 (sysctl -w user.max_user_namespaces=15000 allows them))"
	if got := detect(root, 0).String(); got != want {
		t.Errorf("detect, max_user_namespaces 0:\n got %s\nwant %s", got, want)
	}
	os.Remove(filepath.Join(root, "proc/self/ns/user"))
	if got := detect(root, 0).UserNamespaceNote; got != "no user namespace: the kernel has no user namespaces" {
		t.Errorf("detect, no user namespaces: note %q", got)
	}
	own := Isolation{OwnUser: true, UID: 1000, Note: "cgroups are used only as root", NamespaceNote: "namespaces are made only as root", Seccomp: true}
	want = "rlimits: memory via RLIMIT_AS, open files via RLIMIT_NOFILE; no namespaces; seccomp: the default profile; disk not limited; CPU not limited; processes not limited (cgroups are used only as root; namespaces are made only as root); sandboxes run as the agent's own user (uid 1000): they can read everything the agent can, for development only"
	if got := own.String(); got != want {
		t.Errorf("own user:\n got %s\nwant %s", got, want)
	}
}

// Missing names what --require-isolation needs and a host lacks.
func TestIsolationMissing(t *testing.T) {
	full := detect(fakeHost(t, mountsHybrid, "/sys/fs/cgroup/unified", ""), 0)
	if m := full.Missing(); len(m) != 0 {
		t.Errorf("hybrid host as root: missing %v, want nothing", m)
	}
	none := detect(fakeHost(t, mountsNone, "", ""), 0)
	none.Namespaces = nil
	want := []string{"memory limit (no memory cgroup controller)", "process limit (no pids cgroup controller)", "network isolation (no network namespace)"}
	if m := none.Missing(); !slices.Equal(m, want) {
		t.Errorf("no cgroups, no namespaces: missing %q, want %q", m, want)
	}
}

// This host, for the record (the test log shows what the driver would use here).
func TestDetectThisHost(t *testing.T) {
	iso := Detect()
	t.Logf("Detect() = %s", iso)
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil && !strings.Contains(string(data), " - cgroup2 ") && iso.Cgroups.V2 != "" {
		t.Errorf("no cgroup2 mount, yet Detect found %s", iso.Cgroups.V2)
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
				uid, err := l.acquire(owner, 0)
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
	if uid, err := l.acquire(filepath.Join(t.TempDir(), "not-yet"), 0); err == nil {
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
			uid, err := l.acquire(owner, 0)
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
	if _, err := a.acquire(filepath.Join(owners, "one-too-many"), 0); err == nil || !strings.Contains(err.Error(), "all 50 sandbox user ids from 5000 to 5049 are in use") {
		t.Errorf("acquire past the range: %v", err)
	}
	// A released id is free again; a lease whose directory vanished is taken over.
	a.release(5003, seen[5003])
	os.Remove(seen[5007])
	got := map[int]bool{}
	for range 2 {
		uid, err := b.acquire(filepath.Join(owners, "new"), 0)
		if err != nil {
			t.Fatal(err)
		}
		got[uid] = true
	}
	if !got[5003] || !got[5007] {
		t.Errorf("acquired %v, want 5003 (released) and 5007 (stale)", got)
	}
	// A lease whose sandbox ended (its directory holds result.json) is taken over too, once its
	// directory is closed to other users; one whose sandbox runs is not.
	ended, running := seen[5010], seen[5011]
	os.Chmod(ended, 0o711)
	os.WriteFile(filepath.Join(ended, fileResult), []byte("{}"), 0o600)
	os.Mkdir(filepath.Join(owners, "after-end"), 0o700)
	if uid, err := b.acquire(filepath.Join(owners, "after-end"), 0); err != nil || uid != 5010 {
		t.Errorf("acquire = %d, %v; want 5010, whose sandbox ended", uid, err)
	}
	if fi, err := os.Stat(ended); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the ended sandbox's directory: %v, %v; want mode 0700 before its uid is lent again", fi.Mode(), err)
	}
	if h := a.holder(filepath.Join(dir, "5011")); h != running {
		t.Errorf("uid 5011 is leased to %q, want %s (still running)", h, running)
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
