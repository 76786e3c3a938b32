package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// The sandbox's init: with namespaces, the exec stage is started in new PID, mount, IPC, UTS
// and network namespaces, where it is process 1. It brings up the loopback interface and
// starts the stage proper (process 2, a re-exec of the binary), which waits for its
// instructions; both are ready before any sandbox needs them. The first instructions bring
// the sandbox's setup: init makes its mounts (setupMounts) and host name, takes the sandbox's
// user as the stage does, and passes the instructions on. From then on it reaps whatever ends
// in the namespace, and when the stage's program (the sandbox's main process) ends, it
// writes its wait status on fd 5 and exits: the kernel then kills whatever else is left in
// the PID namespace.
//
// With a user namespace (Isolation.UserNamespace), the stage proper is started in a new one
// too, and only it: the other namespaces are the supervisor's clone's, owned by the host's
// initial user namespace, so that the init (root of the host there) mounts the work
// directory's disk, makes the host's file system read-only and mounts /proc and /sys, and the
// supervisor moves a public sandbox's veth in, as without one. The user namespace owns no other
// namespace: a capability held in it (none is, once the program runs) reaches nothing but
// the user namespace itself. Its maps, written by the init with the first instructions, are one
// line each, the sandbox's leased uid and gid to themselves (mapUser): the sandbox's processes
// are that uid on the host, as without one, no other id is theirs to become (not even its root,
// 0), and files of any other owner are seen as the overflow id (nobody).
//
// Why not exec the program as process 1: a process 1 gets only the signals it has handlers
// for (a `sleep` would not stop on SIGTERM), and every orphan of the sandbox would be its to
// reap.

// initArg is the stage's first argument when it is the sandbox's init.
const initArg = "init"

// initGo is the byte the supervisor writes to the init once it is in all the sandbox's cgroups
// (the v1 ones are entered after it started): the stage proper it then starts is in them too.
const initGo = 'G'

// namespaceFlags are the namespaces every sandbox gets (Isolation.Namespaces).
const namespaceFlags = unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWNET

// namespaceNames names namespaceFlags, in the order they are described.
var namespaceNames = []string{"pid", "mount", "ipc", "uts", "net"}

// userNamespaceName is the name Isolation.Namespaces has for the user namespace, when sandboxes
// get one.
const userNamespaceName = "user"

// sandboxSetup is what init sets up for a sandbox, in the first instructions.
type sandboxSetup struct {
	Hostname string `json:"hostname"` // the sandbox id (cut to 64 bytes, the kernel's limit)
	Root     string `json:"root"`     // the sandbox's work directory on the host: the one place it may write
	TmpBytes int64  `json:"tmpBytes"` // the size of its /tmp and /dev/shm (tmpfs; they count as its memory)
	// With a disk limit: the loop device of its work directory's file system (workdisk,
	// attached by the supervisor), mounted with its root owned by UID:GID.
	DiskDevice string `json:"diskDevice,omitempty"`
	UID        int    `json:"uid"`
	GID        int    `json:"gid"`
}

// runInit is the sandbox's init (see above); fds as the stage's, and 5: the main process's wait
// status, written once it ended.
func runInit() int {
	runtime.LockOSThread()
	userns := len(os.Args) > 2 && os.Args[2] == userNamespaceArg
	status := os.NewFile(4, "status")
	exit := os.NewFile(5, "exit")
	fail := func(format string, args ...any) int {
		fmt.Fprintf(status, format, args...)
		return 127
	}
	// Signals of the sandbox's process group reach its main process directly; init only must
	// not die of them, nor of any the program sends it (it runs as the sandbox's user): every
	// signal is caught and dropped, SIGABRT and a SIGSEGV sent by kill included, which would
	// end a Go program (and with it the sandbox, as if its program had exited with code 2).
	signal.Notify(make(chan os.Signal, 1))
	if err := sandboxnet.LoopbackUp(); err != nil {
		return fail("bring up the loopback interface: %v", err)
	}
	instrFile := os.NewFile(3, "instructions")
	var b [1]byte
	if _, err := io.ReadFull(instrFile, b[:]); err != nil || b[0] != initGo {
		return fail("the supervisor did not let the init go on (%v)", err)
	}
	instrR, instrW, err := os.Pipe()
	if err != nil {
		return fail("%v", err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail("%v", err)
	}
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if userns { // mapped with the first instructions, which bring the sandbox's user
		sys = userNamespaceAttr()
	}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{stageArg0}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{"GOMAXPROCS=1", "GOGC=off"},
		Files: []uintptr{devnull.Fd(), 1, 2, instrR.Fd(), status.Fd()},
		Sys:   sys,
	})
	devnull.Close()
	instrR.Close()
	if err != nil {
		return fail("start the exec stage: %v", err)
	}
	os.Stdout.Close()
	os.Stderr.Close()

	exited := make(chan unix.WaitStatus, 1)
	go reapAll(pid, exited)
	go func() {
		ws := <-exited
		exit.WriteString(strconv.Itoa(int(ws)) + "\n")
		os.Exit(0)
	}()

	dec := json.NewDecoder(instrFile)
	enc := json.NewEncoder(instrW)
	var in stageInstr
	if err := dec.Decode(&in); errors.Is(err, io.EOF) { // the supervisor gave up on it
		return 0
	} else if err != nil {
		return fail("read the instructions: %v", err)
	}
	if in.Sandbox == nil {
		return fail("the instructions bring no sandbox setup")
	}
	if err := setupMounts(*in.Sandbox); err != nil {
		return fail("set up the sandbox's mounts: %v", err)
	}
	host := in.Sandbox.Hostname
	if len(host) > 64 {
		host = host[:64]
	}
	if err := unix.Sethostname([]byte(host)); err != nil {
		return fail("set the host name: %v", err)
	}
	if userns { // before become: writing the maps takes root of the host's namespace
		if err := mapUser(pid, in.UID, in.GID); err != nil {
			return fail("map the sandbox's user namespace: %v", err)
		}
	}
	if msg := become(in); msg != "" {
		return fail("%s", msg)
	}
	// The stage's parent is this init, process 1 of the namespace.
	in.Supervisor = os.Getpid()
	if err := enc.Encode(in); err != nil {
		return fail("hand the instructions to the exec stage: %v", err)
	}
	// Set up: from now on the stage reports (its copy of the status pipe closes on its exec).
	status.Close()
	for {
		var next stageInstr
		if err := dec.Decode(&next); err != nil {
			instrW.Close()
			break
		}
		next.Supervisor = os.Getpid()
		if err := enc.Encode(next); err != nil {
			break
		}
	}
	select {} // until the main process ends (or the supervisor kills the namespace)
}

// reapAll collects every process that ends in the namespace, and sends main's wait status on
// exited.
func reapAll(main int, exited chan<- unix.WaitStatus) {
	runtime.LockOSThread()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if pid == main {
			exited <- ws
			return
		}
	}
}

// namespacesArg is a supervisor's second argument when its sandbox gets namespaces;
// userNamespaceArg its third, and its init's second, when it also gets a user namespace.
const (
	namespacesArg    = "namespaces"
	userNamespaceArg = "user"
)

// userNamespaceAttr starts a process in a new user namespace (with SIGKILL as its parent-death
// signal) that keeps CAP_SETUID and CAP_SETGID there through its exec, as ambient capabilities:
// its uid (root's, not mapped in the namespace) is not the namespace's root, so the exec would
// clear every capability it has there, and it needs those two to take the sandbox's user once
// mapped (become, which then drops them all).
func userNamespaceAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL,
		AmbientCaps: []uintptr{unix.CAP_SETUID, unix.CAP_SETGID},
	}
}

// mapUser writes the one-line uid and gid maps of the user namespace of process pid (as this
// process's /proc shows it: the init's, mounted by setupMounts): uid and gid to themselves.
// setgroups stays allowed there, for the stage to drop the supplementary groups it inherited
// (become); once its program runs it has no capability left to call it with.
func mapUser(pid, uid, gid int) error {
	if uid < 0 || gid < 0 {
		return errors.New("a user namespace needs the sandbox's own user, and it has none")
	}
	for _, m := range []struct {
		file string
		id   int
	}{{"uid_map", uid}, {"gid_map", gid}} {
		f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/"+m.file, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "%d %d 1\n", m.id, m.id) // one write: the kernel takes no second
		if err := errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("%s: %w", m.file, err)
		}
	}
	return nil
}

// namespaceProbeArg0 is the argv[0] of the process New starts in new namespaces to learn
// whether this host lets the driver make them (runNamespaceProbe).
const namespaceProbeArg0 = "cubefleet-sandbox-namespace-probe"

// namespaceProbeTimeout bounds one namespace probe (it takes milliseconds on an idle host).
const namespaceProbeTimeout = 20 * time.Second

// defaultTmpBytes sizes the /tmp and /dev/shm of a sandbox without a memory limit.
const defaultTmpBytes = 1 << 30

// setup returns the sandbox's setup for its init; nil without namespaces.
func (s *supervisor) setup() *sandboxSetup {
	if !s.namespaces {
		return nil
	}
	tmp := int64(defaultTmpBytes)
	if m := s.l.Spec.MemoryMiB; m > 0 {
		tmp = m << 20
	}
	st := &sandboxSetup{Hostname: s.l.Spec.ID, Root: filepath.Join(s.l.Dir, dirWork), TmpBytes: tmp, UID: s.l.UID, GID: s.l.GID}
	if s.disk != nil {
		st.DiskDevice = s.disk.Device
	}
	return st
}

// probeNamespaces starts the binary in new namespaces (namespaceFlags) as a probe that does what
// a sandbox's init needs of them (loopback up, private and read-only mounts; with user, also a
// /proc of its own and a user namespace for a process of its own mapped to uid as a sandbox's
// stage is, which takes that user), and returns why it could not ("" when it could): note for
// the namespaces, userNote for the user namespace alone (the others work then).
func probeNamespaces(executable string, user bool, uid int) (note, userNote string) {
	r, w, err := os.Pipe()
	if err != nil {
		return err.Error(), ""
	}
	defer r.Close()
	argv := []string{namespaceProbeArg0}
	if user {
		argv = append(argv, userNamespaceArg, strconv.Itoa(uid))
	}
	pid, err := syscall.ForkExec(executable, argv, &syscall.ProcAttr{
		Dir: "/", Env: []string{"GOMAXPROCS=1"}, Files: []uintptr{0, w.Fd(), w.Fd()},
		Sys: &syscall.SysProcAttr{Cloneflags: namespaceFlags, Pdeathsig: syscall.SIGKILL},
	})
	w.Close()
	if err != nil {
		return fmt.Sprintf("cannot create namespaces (%v)", err), ""
	}
	// A probe that does not end in time is killed (its own probes die with it: Pdeathsig), so
	// that an executable which is not cubefleet's, and so runs something else under the probe's
	// name, cannot hang the driver's start or agent check.
	overdue := time.AfterFunc(namespaceProbeTimeout, func() { syscall.Kill(pid, syscall.SIGKILL) })
	msg, _ := io.ReadAll(io.LimitReader(r, 4096))
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if !overdue.Stop() {
		return fmt.Sprintf("the namespace probe did not end within %s (is %s the cubefleet binary?)", namespaceProbeTimeout, executable), ""
	}
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return "", ""
	case ws.Exited() && ws.ExitStatus() == probeUserFailed:
		return "", string(msg)
	case len(msg) == 0:
		return "the namespace probe " + howEnded(ws), ""
	}
	return string(msg), ""
}

// probeUserFailed is the namespace probe's exit code when only the user namespace failed.
const probeUserFailed = 3

// probeMappedArg is the first argument of the probe's process in its user namespace.
const probeMappedArg = "mapped"

// runNamespaceProbe is the probe of probeNamespaces, in its new namespaces (or, with
// probeMappedArg, in the user namespace it made: it waits for its maps, then checks them and
// takes the user).
func runNamespaceProbe() int {
	runtime.LockOSThread()
	if len(os.Args) > 2 && os.Args[1] == probeMappedArg {
		return runMappedProbe(os.Args[2])
	}
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"bring up lo", sandboxnet.LoopbackUp},
		{"make the mounts private", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"make the mounts read-only (mount_setattr, Linux 5.12+)", func() error {
			return unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		}},
	} {
		if err := step.do(); err != nil {
			fmt.Printf("in new namespaces: %s: %v", step.what, err)
			return 1
		}
	}
	if len(os.Args) > 2 && os.Args[1] == userNamespaceArg {
		if msg := probeUserNamespace(os.Args[2]); msg != "" {
			fmt.Print(msg)
			return probeUserFailed
		}
	}
	return 0
}

// probeUserNamespace starts the probe again in a new user namespace, maps uid there as an init
// does (mapUser), and returns why that failed ("" when the mapped probe succeeded). A mapped
// probe killed by a signal, which says nothing about the host, is tried again (at most
// userProbeAttempts in all), so that one unlucky probe does not leave a driver without user
// namespaces for its whole life.
func probeUserNamespace(uid string) string {
	id, err := strconv.Atoi(uid)
	if err != nil {
		return "the probe's uid: " + err.Error()
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Sprintf("mount /proc: %v", err)
	}
	var msg string
	for range userProbeAttempts {
		var signaled bool
		if msg, signaled = probeMapped(uid, id); !signaled {
			break
		}
	}
	return msg
}

// userProbeAttempts is how often probeUserNamespace starts a mapped probe that a signal killed.
const userProbeAttempts = 3

// probeMapped starts one mapped probe as uid (id) in a new user namespace and returns why it
// failed ("" when it succeeded), and whether a signal ended it.
func probeMapped(uid string, id int) (string, bool) {
	r, w, err := os.Pipe()
	if err != nil {
		return err.Error(), false
	}
	defer w.Close()
	out, outW, err := os.Pipe()
	if err != nil {
		return err.Error(), false
	}
	defer out.Close()
	pid, err := syscall.ForkExec("/proc/self/exe", []string{namespaceProbeArg0, probeMappedArg, uid}, &syscall.ProcAttr{
		Dir: "/", Env: []string{"GOMAXPROCS=1"}, Files: []uintptr{r.Fd(), outW.Fd(), outW.Fd()},
		Sys: userNamespaceAttr(),
	})
	r.Close()
	outW.Close()
	if err != nil {
		return fmt.Sprintf("create a user namespace: %v", err), false
	}
	merr := mapUser(pid, id, id)
	w.Close() // the mapped probe goes on
	msg, _ := io.ReadAll(io.LimitReader(out, 4096))
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case merr != nil:
		return "map a user namespace: " + merr.Error(), false
	case !ws.Exited() || ws.ExitStatus() != 0:
		return fmt.Sprintf("in a user namespace: %s (%s)", strings.TrimSpace(string(msg)), howEnded(ws)), ws.Signaled()
	}
	return "", false
}

// runMappedProbe is the probe's process in its user namespace: once its maps are written (its
// stdin ends), its uid map must be the one line of uid, and it must take that user.
func runMappedProbe(uid string) int {
	io.Copy(io.Discard, os.Stdin)
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		fmt.Print(err)
		return 1
	}
	if f := strings.Fields(string(m)); len(f) != 3 || f[0] != uid || f[1] != uid || f[2] != "1" {
		fmt.Printf("uid map %q, want %s %s 1", m, uid, uid)
		return 1
	}
	id, _ := strconv.Atoi(uid)
	if msg := become(stageInstr{UID: id, GID: id}); msg != "" {
		fmt.Print(msg)
		return 1
	}
	return 0
}

// staleLink reports whether the public link whose host end is named name is a leftover of a
// sandbox of directory dir that ended, and of none that runs: none of dir's, and none of another
// directory (another agent's or driver's of the host) that holds the ended sandbox's uid, or
// another uid of its link (links: the sandbox network's, sandboxnet.Links), now: its link has
// the same name.
func staleLink(dir, name string, leases *uidLeases, links int) bool {
	stale := false
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !e.IsDir() || !driver.ValidID(e.Name()) {
			continue
		}
		var rec sandboxRecord
		if ok, _ := readJSON(filepath.Join(dir, e.Name(), fileSandbox), &rec); !ok || rec.Link == nil || rec.Link.HostIf != name {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), fileResult)); err != nil {
			return false // one of this directory's that runs
		}
		if leases.linkLentElsewhere(rec.UID, links, filepath.Join(dir, e.Name())) {
			return false
		}
		stale = true
	}
	return stale
}
