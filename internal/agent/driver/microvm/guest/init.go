package guest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Arg0 is the initramfs path of the guest init: the kernel starts it as PID 1.
const Arg0 = "/init"

// The files of the initramfs besides Arg0: ModuleDir holds the kernel modules, ModuleList
// their names in load order, one a line.
const (
	ModuleDir  = "/lib/cubefleet-modules"
	ModuleList = "/lib/cubefleet-modules/order"
)

// The kernel command line's words the guest init reads: ProbeArg makes it a probe (ready, then
// power off, no disks); without it, it mounts RootDevice read-only under the writable layer
// ScratchDevice.
const (
	ProbeArg      = "cubefleet.probe=1"
	RootDevice    = "/dev/vda"
	ScratchDevice = "/dev/vdb"
)

// SandboxDir is the sandbox's directory in the guest (its user's home and the base of
// Request.WorkDir); SandboxUID is the unprivileged user (and group) its command runs as.
const (
	SandboxDir = "/sandbox"
	SandboxUID = 1000
)

// MaybeRun runs the guest init and never returns when this process is the guest's PID 1
// (started as Arg0); otherwise it returns at once. Call it first thing in main.
func MaybeRun() {
	if os.Getpid() != 1 || os.Args[0] != Arg0 {
		return
	}
	err := runInit()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubefleet guest init: %v\n", err)
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	for {
		time.Sleep(time.Hour)
	}
}

// initState is the guest init's: its result port and what it sent.
type initState struct {
	mu     sync.Mutex
	result *os.File
}

func (s *initState) send(t FrameType, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result.Write(AppendFrame(nil, t, p))
}

func (s *initState) sendJSON(t FrameType, v any) {
	p, _ := json.Marshal(v)
	s.send(t, p)
}

func runInit() error {
	for _, m := range []struct{ src, dst, fs string }{{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	phase("init started")
	if err := loadModules(); err != nil {
		return err
	}
	phase("kernel modules loaded")
	cmdline, _ := os.ReadFile("/proc/cmdline")
	if err := setupNetwork(string(cmdline)); err != nil {
		return err
	}
	probe := slices.Contains(strings.Fields(string(cmdline)), ProbeArg)
	need := []string{PortResult, PortControl}
	if probe {
		need = need[:1]
	}
	ports, err := findPorts(need, 30*time.Second)
	if err != nil {
		return err
	}
	phase("channel ports found")
	result, err := os.OpenFile(ports[PortResult], os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open the result port: %w", err)
	}
	s := &initState{result: result}
	if probe {
		s.sendJSON(FrameReady, ready())
		return nil
	}
	f, err := os.OpenFile(ports[PortControl], os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open the control port: %w", err)
	}
	control := &controlPort{f: f, r: bufio.NewReaderSize(f, 64<<10)}
	if err := mountRoot(); err != nil {
		s.sendJSON(FrameEnd, End{ExitCode: -1, Failed: err.Error()})
		return err
	}
	phase("root file system mounted")
	// Nothing the command starts may gain privileges (set-user-ID programs of the image).
	unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	s.sendJSON(FrameReady, ready())
	for {
		req, err := control.read()
		if err != nil {
			s.sendJSON(FrameEnd, End{ExitCode: -1, Failed: "the control channel: " + err.Error()})
			return err
		}
		switch req.Op {
		case "stop":
			control.ack("")
			s.sendJSON(FrameEnd, End{ExitCode: -1, Cause: "stopped"})
			return nil
		case "run":
			s.run(control, req)
			return nil
		default:
			control.ack(fmt.Sprintf("unknown op %q", req.Op))
		}
	}
}

// controlPort is the guest's end of the control port: buffered, since every read of a
// virtio-serial port is a trip to the host.
type controlPort struct {
	f *os.File
	r *bufio.Reader
}

// read reads the next request from the control port; while the host is not connected the
// port reads as ended, and it waits for the host.
func (c *controlPort) read() (Request, error) {
	for {
		line, err := ReadLine(c.r, 16<<20)
		if errors.Is(err, io.EOF) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			return Request{}, err
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			c.ack("the request is not JSON: " + err.Error())
			continue
		}
		return req, nil
	}
}

// ack answers a request ("" when it was carried out).
func (c *controlPort) ack(msg string) {
	p, _ := json.Marshal(Ack{Error: msg})
	c.f.Write(append(p, '\n'))
}

// phase writes a step of the boot, with the guest's uptime, to the console (the host keeps it in
// the sandbox's console.log, and quotes its end when a guest does not boot).
func phase(what string) {
	var si unix.Sysinfo_t
	unix.Sysinfo(&si)
	fmt.Fprintf(os.Stderr, "cubefleet guest init: %s (uptime %ds)\n", what, si.Uptime)
}

func ready() Ready {
	var u unix.Utsname
	unix.Uname(&u)
	var si unix.Sysinfo_t
	unix.Sysinfo(&si)
	return Ready{Kernel: unix.ByteSliceToString(u.Release[:]), UptimeMs: si.Uptime * 1000}
}

// loadModules loads the initramfs's kernel modules in their order (one already present is
// fine).
func loadModules() error {
	order, err := os.ReadFile(ModuleList)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(order)) {
		f, err := os.Open(filepath.Join(ModuleDir, name))
		if err != nil {
			return fmt.Errorf("kernel module %s: %w", name, err)
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load kernel module %s: %w", name, err)
		}
	}
	return nil
}

// findPorts waits for the virtio-serial ports named need and returns their device paths by
// name.
func findPorts(need []string, wait time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(wait)
	for {
		ports := map[string]string{}
		dirs, _ := filepath.Glob("/sys/class/virtio-ports/*")
		for _, d := range dirs {
			name, err := os.ReadFile(filepath.Join(d, "name"))
			if err == nil {
				ports[strings.TrimSpace(string(name))] = "/dev/" + filepath.Base(d)
			}
		}
		missing := ""
		for _, n := range need {
			if _, err := os.Stat(ports[n]); ports[n] == "" || err != nil {
				missing = n
				break
			}
		}
		if missing == "" {
			return ports, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no virtio-serial port %s after %s", missing, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountRoot mounts the image (read-only) under the writable layer as an overlay, makes it the
// root, and prepares /proc, /dev, /tmp and the sandbox's directory in it.
func mountRoot() error {
	for _, dev := range []string{RootDevice, ScratchDevice} {
		if err := waitFor(dev, 30*time.Second); err != nil {
			return err
		}
	}
	steps := []struct {
		src, dst, fs string
		flags        uintptr
		data         string
	}{
		{RootDevice, "/mnt/image", "ext4", unix.MS_RDONLY, ""},
		{ScratchDevice, "/mnt/scratch", "ext4", unix.MS_NOSUID | unix.MS_NODEV, ""},
	}
	for _, m := range steps {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.src, m.dst, err)
		}
	}
	for _, d := range []string{"/mnt/scratch/upper", "/mnt/scratch/work", "/mnt/root"} {
		os.MkdirAll(d, 0o755)
	}
	if err := unix.Mount("overlay", "/mnt/root", "overlay", 0, "lowerdir=/mnt/image,upperdir=/mnt/scratch/upper,workdir=/mnt/scratch/work"); err != nil {
		return fmt.Errorf("mount the root overlay: %w", err)
	}
	for _, m := range []struct{ src, dst, fs, data string }{
		{"proc", "/mnt/root/proc", "proc", ""}, {"devtmpfs", "/mnt/root/dev", "devtmpfs", ""},
		{"tmpfs", "/mnt/root/tmp", "tmpfs", "mode=1777"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, unix.MS_NOSUID, m.data); err != nil {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	if err := unix.Chroot("/mnt/root"); err != nil {
		return fmt.Errorf("enter the root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := os.MkdirAll(SandboxDir, 0o700); err != nil {
		return fmt.Errorf("the sandbox's directory: %w", err)
	}
	return os.Chown(SandboxDir, SandboxUID, SandboxUID)
}

func waitFor(path string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %s", path, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// oomKills returns the guest kernel's count of OOM kills (/proc/vmstat oom_kill).
func oomKills() int64 {
	data, _ := os.ReadFile("/proc/vmstat")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
