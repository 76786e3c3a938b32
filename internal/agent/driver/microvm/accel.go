package microvm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
)

// DefaultKVMProbeTimeout bounds the KVM probe's boot: a guest boots under KVM in well under a
// second, and one that has not within this is taken as not booting (a nested host where guests
// hang).
const DefaultKVMProbeTimeout = 20 * time.Second

// Probe is the outcome of one probe boot under one accelerator.
type Probe struct {
	// Accel is the accelerator tried.
	Accel string
	// Present reports whether it is there at all (/dev/kvm opens; TCG always is).
	Present bool
	// Booted reports whether the probe guest became ready within the deadline; BootTime is how
	// long it took.
	Booted   bool
	BootTime time.Duration
	// Error says why it did not boot ("" when it did).
	Error string
}

// String words p for `agent check`: "KVM present, guest did not boot (...)", "TCG: guest booted
// in 8.1s".
func (p Probe) String() string {
	name := map[string]string{AccelKVM: "KVM", AccelTCG: "TCG"}[p.Accel]
	switch {
	case !p.Present:
		return name + " not present: " + p.Error
	case !p.Booted:
		return name + " present, guest did not boot: " + p.Error
	}
	return fmt.Sprintf("%s present, guest booted in %s", name, p.BootTime.Round(10*time.Millisecond))
}

// Choice is the accelerator chosen and the probes that chose it.
type Choice struct {
	// Accel is AccelKVM, AccelTCG, or "" when neither booted a guest.
	Accel  string
	Probes []Probe
}

// String lists the probes, "; "-separated.
func (c Choice) String() string {
	s := ""
	for i, p := range c.Probes {
		if i > 0 {
			s += "; "
		}
		s += p.String()
	}
	return s
}

// ChooseAccel boots a probe guest (the kernel and initramfs, no disks: the init says ready and
// powers off) under KVM, within DefaultKVMProbeTimeout, and, when that does not boot, under TCG
// within tcgTimeout. KVM is chosen only when its guest booted: a /dev/kvm that opens is not
// enough (on a nested host guests may hang under it).
func ChooseAccel(ctx context.Context, vmm VMM, kernel, initramfs, machineType string, tcgTimeout time.Duration) Choice {
	var c Choice
	kvm := Probe{Accel: AccelKVM}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
		kvm.Error = err.Error()
	} else {
		f.Close()
		kvm.Present = true
		kvm = ProbeBoot(ctx, vmm, Machine{Kernel: kernel, Initramfs: initramfs, Accel: AccelKVM, Type: machineType}, DefaultKVMProbeTimeout)
	}
	c.Probes = append(c.Probes, kvm)
	if kvm.Booted {
		c.Accel = AccelKVM
		return c
	}
	tcg := ProbeBoot(ctx, vmm, Machine{Kernel: kernel, Initramfs: initramfs, Accel: AccelTCG, Type: machineType}, tcgTimeout)
	c.Probes = append(c.Probes, tcg)
	if tcg.Booted {
		c.Accel = AccelTCG
	}
	return c
}

// ProbeBoot boots m (its Dir is made, in a temporary directory, when ""), as a probe, and
// reports whether the guest became ready within timeout; the VMM is killed either way.
func ProbeBoot(ctx context.Context, vmm VMM, m Machine, timeout time.Duration) Probe {
	p := Probe{Accel: m.Accel, Present: true}
	if m.Dir == "" {
		dir, err := os.MkdirTemp("", "cubefleet-probe-")
		if err != nil {
			p.Error = err.Error()
			return p
		}
		defer os.RemoveAll(dir)
		m.Dir = dir
	}
	m.Cmdline = cmdline(guest.ProbeArg)
	m.VCPUs, m.MemoryMiB = 1, MinMemoryMiB
	if m.Type == "" {
		m.Type = MachinePC
	}
	cmd, err := vmm.Command(m)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	cmd.SysProcAttr = vmmProcAttr(-1, nil, os.Geteuid() == 0)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		p.Error = err.Error()
		return p
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		data, _ := os.ReadFile(filepath.Join(m.Dir, fileChannel))
		if r, _ := guest.ReadFrames(data, 1); r.Ready != nil {
			p.Booted, p.BootTime = true, time.Since(start)
			return p
		}
		select {
		case err := <-exited:
			// The probe guest powers off once it said it is ready: that may be since the read.
			data, _ := os.ReadFile(filepath.Join(m.Dir, fileChannel))
			if r, _ := guest.ReadFrames(data, 1); r.Ready != nil {
				p.Booted, p.BootTime = true, time.Since(start)
				exited <- err
				return p
			}
			p.Error = fmt.Sprintf("the VMM ended before the guest was ready (%v)", err)
			if last := lastLine(stderr.String()); last != "" {
				p.Error += ": " + last
			}
			exited <- err
			return p
		case <-deadline.C:
			p.Error = fmt.Sprintf("not ready within %s", timeout)
			return p
		case <-ctx.Done():
			p.Error = ctx.Err().Error()
			return p
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lastLine returns the last non-empty line of s, at most 200 bytes of it.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[:200]
	}
	return strings.ToValidUTF8(l, "?")
}

// fileAccel is the file of a driver's directory that records the last probe's choice.
const fileAccel = "accel.json"

type accelRecord struct {
	Initramfs string `json:"initramfs"` // the archive probed (its name hashes the init and the kernel)
	Choice    Choice `json:"choice"`
}

// CachedAccel returns the choice the last probe of dir recorded for initramfs, nil when there is
// none (or it was for another kernel or init).
func CachedAccel(dir, initramfs string) *Choice {
	var r accelRecord
	if ok, err := process.ReadRecord(filepath.Join(dir, fileAccel), &r); !ok || err != nil || r.Initramfs != initramfs {
		return nil
	}
	return &r.Choice
}

// SaveAccel records c as the choice of dir for initramfs (`agent check` and a driver that
// probed).
func SaveAccel(dir, initramfs string, c Choice) error {
	return process.WriteRecord(filepath.Join(dir, fileAccel), accelRecord{Initramfs: initramfs, Choice: c})
}
