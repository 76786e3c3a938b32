package process

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"golang.org/x/sys/unix"
)

// requireController skips a test that needs cgroup controller c when this host has none for
// it, except under CI, whose machine has them (as cgroup v1 or v2 controllers).
func requireController(t *testing.T, iso Isolation, c string) {
	t.Helper()
	if iso.Cgroups.Has(c) {
		return
	}
	if isCI() {
		t.Fatalf("CI's machine has the %s controller; this host: %s", c, iso)
	}
	t.Skipf("no %s controller: %s", c, iso)
}

// Three processes of 800 MiB in a sandbox of 1 GiB: the sandbox as a whole goes past its
// memory, so it ends killed with reason oom and a peak of about its limit, while a sandbox
// beside it and this test (the host) live on.
func TestMemoryLimitIsTheWholeSandboxes(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	requireController(t, d.Isolation(), cgroups.Memory)
	argv, env := probe(t, "hold", "800")
	bystander := start(t, d, driver.Spec{ID: "bystander", Argv: []string{"sleep", "60"}})
	script := strings.Join([]string{argv[0], argv[0], argv[0]}, " 800 & ") + " 800 & wait"
	st, out := run(t, d, driver.Spec{ID: "hog", MemoryMiB: 1024, Env: env, Argv: sh(script)})
	if st.State != driver.StateKilled || st.Reason != driver.ReasonOOM {
		t.Fatalf("3 x 800 MiB in 1 GiB: %s/%s %q, want killed/oom\nstdout %q\nstderr %q", st.State, st.Reason, st.Message, out.Stdout, out.Stderr)
	}
	t.Logf("%s/%s: %s; peak %d MiB", st.State, st.Reason, st.Message, st.Stats.PeakMemoryBytes>>20)
	if p := st.Stats.PeakMemoryBytes; p < 800<<20 || p > 1100<<20 {
		t.Errorf("peak memory %d MiB, want the whole sandbox's, about its 1024 MiB", p>>20)
	}
	if !strings.Contains(st.Message, "1024 MiB") {
		t.Errorf("message %q does not name the limit", st.Message)
	}
	if got, _ := d.Status(testCtx(t), bystander.ID); got.State != driver.StateRunning {
		t.Errorf("the sandbox beside it: %+v, want it still running", got)
	}
}

// answerEach writes reply to every connection ln accepts and closes it, until ln is closed.
func answerEach(ln net.Listener, reply string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.WriteString(c, reply)
		c.Close()
	}
}

// isCI reports whether the tests run in CI (as root, on a machine with the isolation the
// tests need: they fail there rather than skip).
func isCI() bool { return os.Getenv("CI") == "true" }

// requireNamespaces skips a test that needs the sandboxes' namespaces when the driver has none
// here, except under CI (root on a kernel that has them).
func requireNamespaces(t *testing.T, d *Driver) {
	t.Helper()
	requireOnCI(t, d, len(d.Isolation().Namespaces) > 0, "namespaces", "CI's machine lets root make namespaces")
}

// requireOnCI skips a test when the driver lacks what it needs (has is false), except under CI,
// whose machine has it (ci says why): the test fails there.
func requireOnCI(t *testing.T, d *Driver, has bool, what, ci string) {
	t.Helper()
	if has {
		return
	}
	if isCI() {
		t.Fatalf("%s; this driver: %s", ci, d.Isolation())
	}
	t.Skipf("no %s: %s", what, d.Isolation())
}

// Inside its namespaces a sandbox sees its own processes only (ps), its id as host name, a
// /tmp of its own, the host's file system read-only outside its work directory, a minimal
// /dev, and a network of loopback only: a server of the host on 127.0.0.1 is not there.
func TestNamespaces(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	requireNamespaces(t, d)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go answerEach(ln, "host server\n")
	start(t, d, driver.Spec{ID: "neighbour", Argv: []string{"sleep", "30"}})
	argv, env := probe(t, "connect", ln.Addr().String())
	marker := filepath.Join(os.TempDir(), "cubefleet-sandbox-tmp-"+strconv.Itoa(os.Getpid()))
	script := strings.Join([]string{
		`echo "ps: $(ps -e -o pid= | tr -s ' \n' ' ')"`,
		`echo "host: $(cat /proc/sys/kernel/hostname)"`,
		`echo x > ` + marker + ` && echo "tmp: written"`,
		`echo x > work-file && echo "work: written"`,
		`echo x > /var/tmp/cubefleet-escape 2>/dev/null || echo "host: read-only"`,
		`echo "dev: $(ls /dev | tr '\n' ' ')"`,
		`echo "net: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"`,
		`echo x > /dev/null && echo "null: ok"`,
		strings.Join(argv, " "),
	}, "; ")
	st, out := run(t, d, driver.Spec{ID: "inside", Argv: sh(script), Env: env})
	t.Logf("inside:\n%s%s", out.Stdout, out.Stderr)
	if st.ExitCode != 0 {
		t.Fatalf("%+v", st)
	}
	got := string(out.Stdout)
	for _, want := range []string{
		"host: inside\n", "tmp: written\n", "work: written\n", "host: read-only\n", "null: ok\n",
		"dev: fd full null random shm stderr stdin stdout tty urandom zero \n", "net: lo \n", "refused:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("inside the sandbox: want %q in\n%s", want, got)
		}
	}
	// ps: the init (1), the shell, ps and its pipe's neighbours; nothing of the host (which
	// runs hundreds).
	for _, l := range strings.Split(got, "\n") {
		if rest, ok := strings.CutPrefix(l, "ps: "); ok {
			if f := strings.Fields(rest); len(f) > 5 || len(f) == 0 || f[0] != "1" {
				t.Errorf("ps inside the sandbox lists %v: want its init (1) and its own few processes only", f)
			}
		}
	}
	if _, err := os.Stat(marker); err == nil {
		os.Remove(marker)
		t.Errorf("the sandbox's /tmp file %s is on the host", marker)
	}
	if _, err := os.Stat("/var/tmp/cubefleet-escape"); err == nil {
		os.Remove("/var/tmp/cubefleet-escape")
		t.Error("the sandbox wrote outside its work directory")
	}
	if _, err := os.Stat(filepath.Join(d.dir("inside"), dirWork, "work-file")); err != nil {
		t.Errorf("the work directory's file is not on the host: %v", err)
	}
}

// The host's services listen on unix sockets in /run (the system bus, the journal, a
// database's socket), which a read-only mount does not close: a sandbox has a /run of its own,
// empty, so a socket of the host there that any user may connect to is not there for it.
func TestHostRunSocketsHidden(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	requireNamespaces(t, d)
	path := filepath.Join("/run", "cubefleet-test-"+strconv.Itoa(os.Getpid())+".sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	go answerEach(ln, "host service\n")
	argv, env := probe(t, "connect-unix", path)
	st, out := run(t, d, driver.Spec{ID: "unix-socket", Argv: argv, Env: env})
	t.Logf("%s%s", out.Stdout, out.Stderr)
	if st.ExitCode != 0 || !strings.HasPrefix(string(out.Stdout), "refused:") || !strings.Contains(string(out.Stdout), "no such file") {
		t.Errorf("a sandbox connecting to the host's %s: %+v, %q; want it not there", path, st, out.Stdout)
	}
}

// A refused system call gets EPERM: the default seccomp profile refuses them even where the
// sandbox's user might otherwise make them (an unprivileged user namespace, a keyring).
func TestSeccompRefusesWithEPERM(t *testing.T) {
	d := newDriver(t, testConfig(t))
	if !d.Isolation().Seccomp {
		if isCI() {
			t.Fatalf("CI's kernel has seccomp filters; this driver: %s", d.Isolation())
		}
		t.Skipf("no seccomp: %s", d.Isolation())
	}
	argv, env := probe(t, "syscalls")
	st, out := run(t, d, driver.Spec{ID: "syscalls", Argv: argv, Env: env})
	t.Logf("%s%s", out.Stdout, out.Stderr)
	if st.ExitCode != 0 {
		t.Fatalf("%+v: %s", st, out.Stderr)
	}
	for _, c := range refusedCalls {
		if want := c.name + ": EPERM\n"; !strings.Contains(string(out.Stdout), want) {
			t.Errorf("want %q in\n%s", want, out.Stdout)
		}
	}
	// A 32-bit call (int 0x80 on amd64) is not let past the rules: the process is killed.
	if runtime.GOARCH == "amd64" && !strings.Contains(string(out.Stdout), "i386 unshare(CLONE_NEWUSER): signal: bad system call\n") {
		t.Errorf("a 32-bit unshare from the sandbox: want it killed by SIGSYS in\n%s", out.Stdout)
	}
	// Everything else works: the sandbox's own processes, files and clock.
	st, out = run(t, d, driver.Spec{ID: "allowed", Argv: sh("date >/dev/null && echo x > f && cat f && (sleep 0 &) && wait && echo ok")})
	if st.ExitCode != 0 || string(out.Stdout) != "x\nok\n" {
		t.Errorf("ordinary calls under the profile: %+v, %q %q", st, out.Stdout, out.Stderr)
	}
}

// A sandbox with a 1 GiB disk that writes 2 GiB into its work directory gets ENOSPC there at
// about 1 GiB, and nothing outside fills up (it cannot write outside its work directory at
// all). Under -short: 64 MiB into 32.
func TestDiskLimitENOSPC(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	if !d.Isolation().Disk {
		if isCI() {
			t.Fatalf("CI's machine has loop devices and mkfs.ext4; this driver: %s", d.Isolation())
		}
		t.Skipf("no disk limit: %s", d.Isolation())
	}
	disk, write := int64(1024), "2048"
	if testing.Short() {
		disk, write = 32, "64"
	}
	argv, env := probe(t, "write", "big", write)
	st, out := run(t, d, driver.Spec{ID: "filler", DiskMiB: disk, Argv: argv, Env: env})
	t.Logf("%s%s", out.Stdout, out.Stderr)
	var wrote int64
	var errno string
	if _, err := fmt.Sscanf(string(out.Stdout), "wrote %d MiB: %s", &wrote, &errno); err != nil || errno != "ENOSPC" || st.ExitCode != 0 {
		t.Fatalf("%s MiB into a %d MiB disk: %+v, %q; want ENOSPC", write, disk, st, out.Stdout)
	}
	if wrote > disk || wrote < disk*9/10 {
		t.Errorf("wrote %d MiB before ENOSPC, want about the disk's %d", wrote, disk)
	}
	if err := d.Remove(testCtx(t), "filler"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.dir("filler")); err == nil {
		t.Error("Remove left the sandbox's directory (and its disk)")
	}
}

// A sandbox's program gets stdin, stdout and stderr only: no descriptor of the agent's (one
// it inherited without close-on-exec, from a shell or a service manager), of its supervisor or
// of its init, such as the pipe the init reports the program's end on, on which the program
// could write an exit status of its choosing.
func TestProgramGetsNoOtherDescriptor(t *testing.T) {
	r, w, err := os.Pipe() // what the agent's parent left open in it
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, testConfig(t))
	argv, env := probe(t, "fds")
	st, out := run(t, d, driver.Spec{ID: "fds", Argv: argv, Env: env})
	if st.ExitCode != 0 || string(out.Stdout) != "fds: []\n" {
		t.Errorf("%+v: %q %q, want no descriptor past stderr", st, out.Stdout, out.Stderr)
	}
	// Nor can it say how it ended: it writes an exit status of 0 wherever it can, then fails.
	st, out = run(t, d, driver.Spec{ID: "liar", Argv: sh("for fd in 3 4 5 6 7 8 9; do (echo 0 >&$fd) 2>/dev/null; done; exit 3")})
	if st.ExitCode != 3 {
		t.Errorf("%+v: %q, want the exit code it ended with, 3", st, out.Stderr)
	}
}

// The sandbox's init (process 1 of its PID namespace) runs as the sandbox's user, so the
// program may signal it: none of the signals that would end a Go program (SIGABRT, SIGSEGV
// sent by kill, ...) ends it, and with it the sandbox, whose end would then read "exited with
// code 2" rather than how the program ended.
func TestInitOutlivesSignalsFromTheSandbox(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	requireNamespaces(t, d)
	// Every signal but SIGKILL, SIGSTOP (the kernel keeps them from a namespace's init) and
	// SIGCHLD, by number: SIGHUP 1 to SIGSYS 31, then the first real-time ones.
	script := "for s in 1 2 3 4 5 6 7 8 10 11 12 13 14 15 16 18 20 21 22 23 24 25 26 27 28 29 30 31 34 35 64; do kill -$s 1; done; sleep 1; echo alive; exit 3"
	st, out := run(t, d, driver.Spec{ID: "init-signals", Argv: sh(script)})
	if st.ExitCode != 3 || string(out.Stdout) != "alive\n" {
		t.Errorf("%+v: %q %q, want the program alive after signalling its init, ending with code 3", st, out.Stdout, out.Stderr)
	}
}

// A sandbox directory under /run (which a sandbox gets empty) stays reachable at its path,
// with a disk and without, as one under /tmp does.
func TestSandboxDirUnderRun(t *testing.T) {
	requireRoot(t)
	base := filepath.Join("/run", "cubefleet-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(base, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	cfg := testConfig(t)
	cfg.Dir = filepath.Join(base, "sandboxes")
	d := newDriver(t, cfg)
	requireNamespaces(t, d)
	for _, disk := range []int64{0, 32} {
		id := "under-run-" + strconv.FormatInt(disk, 10)
		st, out := run(t, d, driver.Spec{ID: id, DiskMiB: disk, Argv: sh("echo x > f && cat f && pwd")})
		want := "x\n" + filepath.Join(d.dir(id), dirWork) + "\n"
		if st.ExitCode != 0 || string(out.Stdout) != want {
			t.Errorf("disk %d MiB: %+v: %q %q, want %q", disk, st, out.Stdout, out.Stderr, want)
		}
	}
}

// requireUserNamespace skips a test that needs the sandboxes' user namespace when the driver
// has none here, except under CI (root on a kernel that allows them).
func requireUserNamespace(t *testing.T, d *Driver) {
	t.Helper()
	requireNamespaces(t, d)
	requireOnCI(t, d, d.Isolation().UserNamespace(), "user namespace", "CI's machine allows user namespaces")
}

// With a user namespace, a sandbox's maps are one line each, its leased uid and gid to
// themselves: it is that uid on the host and inside, has no capability, and sees files of any
// other owner (root's) as the overflow id.
func TestUserNamespaceMapsTheLeasedUID(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	requireUserNamespace(t, d)
	st, out := run(t, d, driver.Spec{ID: "maps", Argv: sh("cat /proc/self/uid_map /proc/self/gid_map; id -u; id -G; grep -E 'Cap(Inh|Prm|Eff|Amb)' /proc/self/status; stat -c %u /")})
	uid := strconv.Itoa(sandboxUID(t, d, "maps"))
	want := strings.Join([]string{uid + " " + uid + " 1", uid + " " + uid + " 1", uid, uid, "CapInh: 0000000000000000", "CapPrm: 0000000000000000", "CapEff: 0000000000000000", "CapAmb: 0000000000000000", "65534"}, "\n")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	if st.ExitCode != 0 || strings.Join(got, "\n") != want {
		t.Errorf("%+v: %q %q, want\n%s", st, out.Stdout, out.Stderr, want)
	}
}

// Capabilities held in a sandbox's user namespace reach nothing of the host's: a process that
// enters the sandbox's mount and user namespaces as its user and gets every capability there
// (from a file-capability binary, which no_new_privs keeps the sandbox's own programs from)
// can override the permissions of its own files, but cannot write, chown or chmod a file of
// root's in its work directory, mount, set the host name, make a device or raise a hard limit.
func TestUserNamespaceCapabilitiesReachNothingOfTheHost(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	requireUserNamespace(t, d)
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("no nsenter (util-linux)")
	}
	st := start(t, d, driver.Spec{ID: "holder", Argv: []string{"sleep", "60"}})
	uid := sandboxUID(t, d, "holder")
	work := filepath.Join(d.dir("holder"), dirWork)
	roots, mine := filepath.Join(work, "roots"), filepath.Join(work, "mine")
	if err := os.WriteFile(roots, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(mine, uid, uid); err != nil {
		t.Fatal(err)
	}
	// A copy of the probe binary with every capability as a file capability (v2: honoured in
	// any user namespace below the host's), where the sandbox's mount namespace shows it.
	capped := probeBinary + "-caps"
	copyFile(t, probeBinary, capped)
	defer os.Remove(capped)
	capData := make([]byte, 20) // struct vfs_cap_data, revision 2, effective
	binary.LittleEndian.PutUint32(capData[0:], 0x02000000|1)
	binary.LittleEndian.PutUint32(capData[4:], 0xffffffff)  // permitted, caps 0-31
	binary.LittleEndian.PutUint32(capData[12:], 0x000001ff) // permitted, caps 32-40
	if err := unix.Setxattr(capped, "security.capability", capData, 0); err != nil {
		t.Skipf("file capabilities: %v", err)
	}
	program := mainPID(t, d, st.PID)
	cmd := exec.Command(nsenter, "-t", strconv.Itoa(program), "-m", "-p", "-U", "-S", strconv.Itoa(uid), "-G", strconv.Itoa(uid), "--", capped, roots, mine)
	cmd.Env = []string{probeEnv + "=caps"}
	b, err := cmd.CombinedOutput()
	t.Logf("in the sandbox's namespaces with its user namespace's capabilities:\n%s", b)
	if err != nil {
		t.Fatalf("nsenter: %v", err)
	}
	got := string(b)
	if !strings.Contains(got, "CapEff: 000001ffffffffff\n") {
		t.Fatalf("the probe did not get every capability of the user namespace:\n%s", got)
	}
	for _, want := range []string{
		"write its own read-only file: ok\n", "write root's file: EACCES\n", "chown root's file: EPERM\n",
		"chmod root's file: EPERM\n", "mount: EPERM\n", "sethostname: EPERM\n", "mknod: EPERM\n",
		"raise its hard open-file limit: EPERM\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q", want)
		}
	}
	if b, _ := os.ReadFile(roots); string(b) != "root's\n" {
		t.Errorf("root's file now holds %q", b)
	}
	if fi, err := os.Stat(roots); err != nil || fi.Mode().Perm() != 0o644 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("root's file: %v, %v", fi.Mode(), err)
	}
}

// A user namespace the probe cannot make (here: no uid to map) is dropped with why, and the
// other namespaces stay.
func TestUserNamespaceProbeFailureKeepsTheOthers(t *testing.T) {
	requireRoot(t)
	iso := Detect()
	if !iso.UserNamespace() {
		t.Skipf("this host allows no user namespace: %s", iso)
	}
	got := iso.Probed("/proc/self/exe", -1)
	if got.UserNamespace() || !strings.HasPrefix(got.UserNamespaceNote, "no user namespace: the probe failed: map a user namespace: ") ||
		!slices.Equal(got.Namespaces, namespaceNames) || !strings.Contains(got.String(), "(no user namespace: the probe failed: ") {
		t.Errorf("probed with an unmappable uid: %+v\n%s", got, got)
	}
	if ok := iso.Probed("/proc/self/exe", DefaultFirstUID); !ok.UserNamespace() {
		t.Errorf("probed with a sandbox uid: %s", ok)
	}
}
