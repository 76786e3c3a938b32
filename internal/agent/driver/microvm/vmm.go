package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/digitalocean/go-qemu/qmp"

	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
)

// VMM starts and controls virtual machines: the seam between the driver and a hypervisor's
// monitor. QEMU is the first (QEMU); another (Firecracker, Cloud Hypervisor) implements the
// same three methods.
type VMM interface {
	// Command returns the process that runs m (not started): the caller sets its user,
	// session and namespaces, starts it and waits for it.
	Command(m Machine) (*exec.Cmd, error)
	// Quit asks the VMM of m to end the VM at once (no guest shutdown), through its monitor
	// socket; it returns once the request was accepted, or ctx's error.
	Quit(ctx context.Context, m Machine) error
	// Query returns the VM's run state as the monitor says it ("running", "paused", ...).
	Query(ctx context.Context, m Machine) (string, error)
}

// Accelerators a Machine runs under.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"
)

// Machine types a Machine runs as.
const (
	MachineMicroVM = "microvm" // QEMU's minimal machine: virtio-mmio devices, no PCI
	MachinePC      = "pc"      // i440FX with PCI: virtio-pci devices
)

// Machine is one virtual machine as the driver starts it. Every path is the host's.
type Machine struct {
	// Dir is the sandbox's directory; the sockets and files below are in it.
	Dir string
	// Kernel and Initramfs are the guest kernel image and the guest init's archive; Cmdline
	// the kernel command line.
	Kernel, Initramfs, Cmdline string
	// Image is the root file system image, attached read-only as the first disk (RootDevice);
	// Scratch the writable layer, the second (ScratchDevice). Both "" for a probe.
	Image, Scratch string
	// VCPUs and MemoryMiB are the guest's processors and memory.
	VCPUs     int
	MemoryMiB int64
	// Accel is AccelKVM or AccelTCG; Type MachineMicroVM or MachinePC.
	Accel, Type string
	// Tap is the tap device of the guest's NIC, in the VMM's network namespace; "" for none.
	Tap string `json:"tap,omitempty"`
}

// The files of a Machine's directory.
const (
	fileQMP     = "qmp.sock"     // the VMM's monitor (QMP)
	fileControl = "control.sock" // the control port (guest.PortControl)
	fileChannel = "channel"      // the result port (guest.PortResult): guest.Frame records
	fileConsole = "console.log"  // the guest's serial console: kernel messages
)

// QEMU is the VMM of QEMU (qemu-system-x86_64), controlled over QMP.
type QEMU struct {
	// Binary is the qemu-system-x86_64 executable (default: found in PATH).
	Binary string
}

// Command returns the qemu-system-x86_64 command line of m: no default devices, no network
// device (or, with m.Tap, a virtio NIC on that tap device), no reboot (the guest's power-off or reboot ends the process), the serial console to
// fileConsole, the monitor on fileQMP, the two channel ports, and the disks.
func (q QEMU) Command(m Machine) (*exec.Cmd, error) {
	bin := q.Binary
	if bin == "" {
		p, err := exec.LookPath("qemu-system-x86_64")
		if err != nil {
			return nil, errors.New("qemu-system-x86_64 is not installed (Debian: apt-get install qemu-system-x86)")
		}
		bin = p
	}
	dev := func(kind string) string { // the virtio device of kind for the machine type's bus
		if m.Type == MachineMicroVM {
			return "virtio-" + kind + "-device"
		}
		return "virtio-" + kind + "-pci"
	}
	machine := m.Type
	if m.Type == MachineMicroVM {
		machine += ",pit=off,pic=off,rtc=off"
	}
	accel := m.Accel
	if m.Accel == AccelTCG { // a bounded translation cache: the VMM's memory is bounded (MemoryLimitMiB)
		accel += ",tb-size=" + strconv.Itoa(TCGCacheMiB)
	}
	args := []string{
		"-name", "cubefleet-" + filepath.Base(m.Dir),
		"-M", machine, "-accel", accel, "-cpu", map[string]string{AccelKVM: "host", AccelTCG: "max"}[m.Accel],
		"-smp", strconv.Itoa(max(m.VCPUs, 1)), "-m", strconv.FormatInt(m.MemoryMiB, 10),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-display", "none",
		"-kernel", m.Kernel, "-initrd", m.Initramfs, "-append", m.Cmdline,
		"-serial", "file:" + filepath.Join(m.Dir, fileConsole),
		"-qmp", "unix:" + filepath.Join(m.Dir, fileQMP) + ",server=on,wait=off",
		"-device", dev("serial"),
		"-chardev", "file,id=result,path=" + filepath.Join(m.Dir, fileChannel),
		"-device", "virtserialport,chardev=result,name=" + guest.PortResult,
		"-chardev", "socket,id=control,path=" + filepath.Join(m.Dir, fileControl) + ",server=on,wait=off",
		"-device", "virtserialport,chardev=control,name=" + guest.PortControl,
	}
	if m.Tap == "" {
		args = append(args, "-nic", "none")
	} else {
		args = append(args, "-netdev", "tap,id=net0,ifname="+m.Tap+",script=no,downscript=no", "-device", dev("net")+",netdev=net0")
	}
	for i, d := range []struct {
		path string
		ro   bool
	}{{m.Image, true}, {m.Scratch, false}} {
		if d.path == "" {
			continue
		}
		if strings.Contains(d.path, ",") {
			return nil, fmt.Errorf("disk %s: a path with a comma cannot be given to QEMU", d.path)
		}
		drive := fmt.Sprintf("file=%s,if=none,id=disk%d,format=raw,cache=none,aio=threads", d.path, i)
		if d.ro {
			drive += ",readonly=on"
		}
		args = append(args, "-drive", drive, "-device", dev("blk")+fmt.Sprintf(",drive=disk%d", i))
	}
	return exec.Command(bin, args...), nil
}

// Quit sends QMP "quit".
func (q QEMU) Quit(ctx context.Context, m Machine) error {
	_, err := q.run(ctx, m, "quit")
	return err
}

// Query sends QMP "query-status" and returns its status.
func (q QEMU) Query(ctx context.Context, m Machine) (string, error) {
	raw, err := q.run(ctx, m, "query-status")
	if err != nil {
		return "", err
	}
	var r struct {
		Return struct {
			Status string `json:"status"`
		} `json:"return"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", fmt.Errorf("QMP query-status: %w", err)
	}
	return r.Return.Status, nil
}

// run connects to m's monitor, runs one command and disconnects, all before ctx ends (2 s when
// ctx has no deadline): a hung VMM fails the call instead of blocking it.
func (q QEMU) run(ctx context.Context, m Machine, cmd string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	type answer struct {
		raw []byte
		err error
	}
	done := make(chan answer, 1)
	mon, err := qmp.NewSocketMonitor("unix", filepath.Join(m.Dir, fileQMP), time.Until(deadlineOf(ctx)))
	if err != nil {
		return nil, fmt.Errorf("QMP %s: %w", cmd, err)
	}
	go func() {
		if err := mon.Connect(); err != nil {
			done <- answer{err: err}
			return
		}
		raw, err := mon.Run([]byte(`{"execute":"` + cmd + `"}`))
		mon.Disconnect()
		done <- answer{raw, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return nil, fmt.Errorf("QMP %s: %w", cmd, a.err)
		}
		return a.raw, nil
	case <-ctx.Done():
		mon.Disconnect()
		return nil, fmt.Errorf("QMP %s: %w", cmd, ctx.Err())
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// vmmProcAttr returns the process attributes of a VMM process run as uid (and gid uid, with
// groups, e.g. kvm's for /dev/kvm): a session of its own (it outlives the agent, which finds it
// again), and, when netns is set, a network namespace of its own holding only a loopback
// device (a VM without a NIC reaches no network even through its VMM).
func vmmProcAttr(uid int, groups []uint32, netns bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: groups}
	}
	if netns {
		a.Cloneflags = syscall.CLONE_NEWNET
	}
	return a
}

// removeSockets removes a Machine's sockets (a stale socket file keeps QEMU from listening).
func removeSockets(dir string) {
	for _, f := range []string{fileQMP, fileControl} {
		os.Remove(filepath.Join(dir, f))
	}
}
