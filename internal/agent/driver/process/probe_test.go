package process

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Probes: what a hostile tenant tries from inside a sandbox, run by this test binary itself,
// copied where every sandbox user can run it (probeBinary) and started with probeEnv naming
// the probe. Each prints one line saying what happened, and exits 0 when it could run at all.

// probeEnv names the probe a copy of the test binary runs as a sandbox's program.
const probeEnv = "CUBEFLEET_TEST_PROBE"

// probeBinary is the path of the copy of this test binary sandboxes run probes with ("" until
// TestMain made it).
var probeBinary string

// maybeRunProbe runs the probe probeEnv names and exits, when it names one.
func maybeRunProbe() {
	name := os.Getenv(probeEnv)
	if name == "" {
		return
	}
	if err := runProbe(name, os.Args[1:]); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	os.Exit(0)
}

func runProbe(name string, args []string) error {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch name {
	case "hold": // hold MiB: allocate and touch that much, then wait to be killed
		mib, _ := strconv.Atoi(arg(0))
		b := make([]byte, mib<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Println("held", mib, "MiB")
		time.Sleep(time.Minute)
		fmt.Println(len(b))
	case "write": // write path MiB: write that much into a file, then fsync
		mib, _ := strconv.Atoi(arg(1))
		f, err := os.Create(arg(0))
		if err != nil {
			fmt.Println("create:", errnoName(err))
			return nil
		}
		buf := make([]byte, 1<<20)
		for i := range buf {
			buf[i] = byte(i)
		}
		n := 0
		for ; n < mib; n++ {
			if _, err = f.Write(buf); err != nil {
				break
			}
		}
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			fmt.Printf("wrote %d MiB: %s\n", n, errnoName(err))
			return nil
		}
		fmt.Printf("wrote %d MiB\n", n)
	case "connect": // connect host:port: a TCP connect within two seconds
		c, err := net.DialTimeout("tcp", arg(0), 2*time.Second)
		if err != nil {
			fmt.Println("refused:", err)
			return nil
		}
		io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		fmt.Printf("connected: %q\n", b)
	case "open": // open N host:port: open N TCP connections and hold them; how many opened
		n, _ := strconv.Atoi(arg(0))
		var held []net.Conn
		for range n {
			c, err := net.DialTimeout("tcp", arg(1), 2*time.Second)
			if err != nil {
				fmt.Printf("opened %d, then refused: %v\n", len(held), err)
				return nil
			}
			held = append(held, c)
		}
		fmt.Printf("opened %d\n", len(held))
	case "connect-unix": // connect path: connect to a unix socket of the host's file system
		c, err := net.DialTimeout("unix", arg(0), 2*time.Second)
		if err != nil {
			fmt.Println("refused:", err)
			return nil
		}
		b, _ := io.ReadAll(c)
		c.Close()
		fmt.Printf("connected: %q\n", b)
	case "fds": // the open file descriptors past stdin, stdout and stderr it was given
		// Read with system calls of its own: os.Open would add the runtime's poller's.
		dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		buf := make([]byte, 1<<16)
		n, err := unix.ReadDirent(dir, buf)
		if err != nil {
			return err
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		var fds []int
		for _, n := range names {
			if fd, err := strconv.Atoi(n); err == nil && fd > 2 && fd != dir {
				fds = append(fds, fd)
			}
		}
		unix.Close(dir)
		fmt.Println("fds:", fds)
	case "syscalls": // the calls the default seccomp profile refuses
		runSyscalls()
	case "serve": // serve addr name: answer every connection with name, until killed
		ln, err := net.Listen("tcp", arg(0))
		if err != nil {
			return err
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			io.WriteString(c, arg(1)+"\n")
			c.Close()
		}
	case "pids": // the processes this sandbox sees in /proc
		ents, _ := os.ReadDir("/proc")
		var pids []int
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, pid)
			}
		}
		fmt.Println(pids)
	case "caps": // caps ROOTS MINE: with capabilities of a user namespace, at a root-owned file and its own
		runCaps(arg(0), arg(1))
	default:
		return fmt.Errorf("unknown probe %q", name)
	}
	return nil
}

// errnoName names the errno of err (ENOSPC), or says err.
func errnoName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		switch e {
		case syscall.ENOSPC:
			return "ENOSPC"
		case syscall.EPERM:
			return "EPERM"
		case syscall.EDQUOT:
			return "EDQUOT"
		case syscall.EROFS:
			return "EROFS"
		case syscall.EACCES:
			return "EACCES"
		}
		return e.Error()
	}
	return err.Error()
}

// makeProbeBinary copies the test binary into a directory every sandbox user can reach and
// run, and returns a function removing it.
func makeProbeBinary() (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Not under /tmp: a sandbox with a mount namespace has a /tmp of its own.
	base := "/var/tmp"
	if _, err := os.Stat(base); err != nil {
		base = ""
	}
	dir, err := os.MkdirTemp(base, "cubefleet-probe-")
	if err != nil {
		return nil, err
	}
	os.Chmod(dir, 0o755)
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s is not searchable by others", p)
		}
	}
	bin := filepath.Join(dir, "probe")
	src, err := os.Open(self)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		err = errors.Join(err, dst.Close())
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	probeBinary = bin
	return func() { os.RemoveAll(dir) }, nil
}

// probe returns the argv and env of a sandbox running probe name with args.
func probe(t *testing.T, name string, args ...string) ([]string, []string) {
	t.Helper()
	if probeBinary == "" {
		t.Fatal("no probe binary")
	}
	return append([]string{probeBinary}, args...), []string{probeEnv + "=" + name}
}

// refusedCalls are the calls the "syscalls" probe makes, each refused by the default seccomp
// profile (or, without it, by the sandbox's lack of privileges).
var refusedCalls = []struct {
	name string
	call func() error
}{
	{"unshare(CLONE_NEWUSER)", func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
	{"mount", func() error { return unix.Mount("none", "/tmp", "tmpfs", 0, "") }},
	{"keyctl", func() error { _, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0); return err }},
	{"bpf", func() error {
		_, _, e := unix.Syscall(unix.SYS_BPF, 0, 0, 0)
		if e != 0 {
			return e
		}
		return nil
	}},
	{"ptrace(PTRACE_ATTACH, 1)", func() error { return unix.PtraceAttach(1) }},
	{"io_uring_setup", func() error {
		var params [120]byte // struct io_uring_params, zero: the kernel's defaults
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if e != 0 {
			return e
		}
		unix.Close(int(fd))
		return nil
	}},
}

// i386Unshare is a static i386 ELF program that makes the 32-bit system call unshare
// (int 0x80, number 310) with CLONE_NEWUSER and exits with its errno (0: it got a user
// namespace). On amd64 it checks that a call of another ABI does not get past the profile.
var i386Unshare = func() []byte {
	code := []byte{
		0xb8, 0x36, 0x01, 0x00, 0x00, // mov eax, 310 (unshare)
		0xbb, 0x00, 0x00, 0x00, 0x10, // mov ebx, CLONE_NEWUSER
		0xcd, 0x80, // int 0x80
		0xf7, 0xd8, // neg eax
		0x89, 0xc3, // mov ebx, eax
		0xb8, 0x01, 0x00, 0x00, 0x00, // mov eax, 1 (exit)
		0xcd, 0x80, // int 0x80
	}
	const base, ehsize, phsize = 0x08048000, 52, 32
	size := uint32(ehsize + phsize + len(code))
	b := []byte{0x7f, 'E', 'L', 'F', 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	le := binary.LittleEndian
	b = le.AppendUint16(b, 2)                  // ET_EXEC
	b = le.AppendUint16(b, 3)                  // EM_386
	b = le.AppendUint32(b, 1)                  // EV_CURRENT
	b = le.AppendUint32(b, base+ehsize+phsize) // entry
	b = le.AppendUint32(b, ehsize)             // program headers
	b = le.AppendUint32(b, 0)                  // section headers
	b = le.AppendUint32(b, 0)                  // flags
	for _, v := range []uint16{ehsize, phsize, 1, 0, 0, 0} {
		b = le.AppendUint16(b, v)
	}
	for _, v := range []uint32{1, 0, base, base, size, size, 5, 0x1000} { // PT_LOAD, r-x
		b = le.AppendUint32(b, v)
	}
	return append(b, code...)
}()

// runI386Unshare runs i386Unshare from the work directory and says what it got: "i386
// unshare(CLONE_NEWUSER): allowed", an errno, the signal that killed it, or why it did not run.
func runI386Unshare() {
	const name = "i386 unshare(CLONE_NEWUSER)"
	if runtime.GOARCH != "amd64" {
		fmt.Printf("%s: not amd64\n", name)
		return
	}
	if err := os.WriteFile("i386-unshare", i386Unshare, 0o700); err != nil {
		fmt.Printf("%s: %v\n", name, err)
		return
	}
	err := exec.Command("./i386-unshare").Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		fmt.Printf("%s: allowed\n", name)
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		fmt.Printf("%s: %s\n", name, errnoName(syscall.Errno(exit.ExitCode())))
	default:
		fmt.Printf("%s: %v\n", name, err)
	}
}

// runSyscalls is the "syscalls" probe: each refused call and the errno it got, "name: EPERM".
func runSyscalls() {
	for _, c := range refusedCalls {
		err := c.call()
		if err == nil {
			fmt.Printf("%s: allowed\n", c.name)
			continue
		}
		fmt.Printf("%s: %s\n", c.name, errnoName(err))
	}
	runI386Unshare()
}

// runCaps is the "caps" probe, for a process that holds capabilities (CapEff, printed first) in
// its user namespace: what each of them reaches, "what: ok" or the errno. roots is a file of
// root's (0644), mine one of the probe's own user that no one may write (0400).
func runCaps(roots, mine string) {
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:\t"); ok {
			fmt.Printf("CapEff: %s\n", v)
		}
	}
	say := func(what string, err error) {
		if err == nil {
			fmt.Printf("%s: ok\n", what)
			return
		}
		fmt.Printf("%s: %s\n", what, errnoName(err))
	}
	write := func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString("x\n")
		return errors.Join(err, f.Close())
	}
	say("write its own read-only file", write(mine)) // CAP_DAC_OVERRIDE, in the namespace
	say("write root's file", write(roots))
	say("chown root's file", os.Chown(roots, os.Getuid(), os.Getgid()))
	say("chmod root's file", os.Chmod(roots, 0o666))
	say("mount", unix.Mount("none", filepath.Dir(mine), "tmpfs", 0, ""))
	say("sethostname", unix.Sethostname([]byte("escaped")))
	say("mknod", unix.Mknod(filepath.Join(filepath.Dir(mine), "mem"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1))))
	say("raise its hard open-file limit", unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 1 << 30, Max: 1 << 30}))
}
