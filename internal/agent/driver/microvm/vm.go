package microvm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// The records of a sandbox's directory.
const (
	fileVM      = "vm.json"    // vmRecord: written once its VMM runs
	fileClaim   = "claim.json" // claimRecord: written when its command is handed over
	fileScratch = "scratch.ext4"
)

// vmRecord is what the driver keeps of a VM (never its environment).
type vmRecord struct {
	Spec      driver.Spec      `json:"spec"` // its warm spec: limits and image, no command or environment
	UID       int              `json:"uid"`
	VMM       process.Ident    `json:"vmm"`
	Machine   Machine          `json:"machine"`
	Cgroup    cgroups.Group    `json:"cgroup,omitzero"` // the VMM's cgroup, zero on a host without cgroups
	Link      *sandboxnet.Link `json:"link,omitempty"`  // a public guest's veth pair, nil for a private one
	CreatedAt time.Time        `json:"createdAt"`
}

// claimRecord is the claim of a VM: the command's spec without its environment.
type claimRecord struct {
	Spec      driver.Spec `json:"spec"`
	ClaimedAt time.Time   `json:"claimedAt"`
}

// vm is one sandbox of the driver.
type vm struct {
	id, dir string
	rec     vmRecord
	vmm     VMM
	done    chan struct{} // closed once it ended and its end is recorded

	mu     sync.Mutex
	claim  *claimRecord
	final  *driver.Status // its end, once done
	cause  driver.Reason  // why the driver killed its VMM ("" when it did not)
	ctl    net.Conn       // the control socket, nil while not connected
	cmd    *exec.Cmd      // the VMM process when this driver started it
	exited chan struct{}  // closed when the VMM process ended
}

func (v *vm) vmDir() string { return filepath.Join(v.dir, "vm") }

// Warm boots a guest for spec (its image, limits and disk) and returns once it waits for its
// claim (State warm) or could not boot (State failed, with the console's last lines).
func (d *Driver) Warm(ctx context.Context, spec driver.Spec) (driver.Status, error) {
	if err := spec.ValidateWarm(); err != nil {
		return driver.Status{}, err
	}
	return d.boot(ctx, spec)
}

// Start boots a guest for spec and hands it spec's command at once: a cold start pays the boot.
// An id started (or warmed) before returns its current status.
func (d *Driver) Start(ctx context.Context, spec driver.Spec) (driver.Status, error) {
	if err := spec.Validate(); err != nil {
		return driver.Status{}, err
	}
	if v, err := d.get(spec.ID); err == nil { // started before: its status, whatever spec says
		return v.status(), nil
	}
	warm := spec
	warm.Argv, warm.Env, warm.WorkDir = nil, nil, ""
	st, err := d.boot(ctx, warm)
	if err != nil || st.State != driver.StateWarm {
		return st, err
	}
	return d.Claim(ctx, spec)
}

func (d *Driver) boot(ctx context.Context, spec driver.Spec) (driver.Status, error) {
	unlock := d.lockID(spec.ID)
	defer unlock()
	if v, err := d.get(spec.ID); err == nil {
		return v.status(), nil
	}
	image, err := ImagePath(d.cfg.ImageDir, spec.Image)
	if err != nil {
		return driver.Status{}, err
	}
	dir := filepath.Join(d.cfg.Dir, spec.ID)
	if err := os.Mkdir(dir, 0o711); err != nil {
		return driver.Status{}, fmt.Errorf("sandbox directory: %w", err)
	}
	v := &vm{id: spec.ID, dir: dir, done: make(chan struct{}), exited: make(chan struct{}), vmm: d.vmm}
	fail := func(err error) (driver.Status, error) {
		os.RemoveAll(dir)
		return driver.Status{}, err
	}
	links := 0 // a public guest's uid must have a link no running sandbox has
	if spec.Network == driver.NetworkPublic {
		links = sandboxnet.Links(d.cfg.NetworkCIDR)
	}
	uid, err := d.leases.Acquire(dir, links)
	if err != nil {
		return fail(err)
	}
	if err := os.Mkdir(v.vmDir(), 0o700); err != nil {
		d.leases.Release(uid, dir)
		return fail(err)
	}
	disk := spec.DiskMiB
	if disk == 0 {
		disk = DefaultDiskMiB
	}
	scratch := filepath.Join(v.vmDir(), fileScratch)
	if err := makeScratch(ctx, scratch, disk); err != nil {
		d.leases.Release(uid, dir)
		return fail(err)
	}
	for _, p := range []string{v.vmDir(), scratch} {
		if err := os.Chown(p, uid, uid); err != nil {
			d.leases.Release(uid, dir)
			return fail(err)
		}
	}
	mem := spec.MemoryMiB
	if mem == 0 {
		mem = DefaultMemoryMiB
	}
	m := Machine{
		Dir: v.vmDir(), Kernel: d.kernel.Path, Initramfs: d.initramfs, Cmdline: cmdline(""),
		Image: image, Scratch: scratch, VCPUs: int((spec.CPUMillicores + 999) / 1000), MemoryMiB: max(mem, MinMemoryMiB),
		Accel: d.cfg.Accel, Type: d.cfg.MachineType,
	}
	if spec.Network == driver.NetworkPublic {
		link, err := sandboxnet.LinkFor(d.cfg.NetworkCIDR, uid-d.cfg.FirstUID)
		if err != nil {
			d.leases.Release(uid, dir)
			return fail(err)
		}
		link.Allow, link.Deny = spec.EgressAllow, spec.EgressDeny
		m.Tap, m.Cmdline = sandboxnet.TapName, cmdline(guest.NetArg+link.GuestNet())
		v.rec.Link = &link
	}
	spec.Image = filepath.Base(image)
	spec.Image = spec.Image[:len(spec.Image)-len(ImageExt)]
	v.rec = vmRecord{Spec: spec, UID: uid, Machine: m, Link: v.rec.Link, CreatedAt: time.Now().UTC()}
	if err := d.createCgroup(v); err != nil {
		d.leases.Release(uid, dir)
		return fail(err)
	}
	if err := d.startVMM(v, uid); err != nil {
		v.removeCgroup()
		d.leases.Release(uid, dir)
		return fail(err)
	}
	d.mu.Lock()
	d.vms[spec.ID] = v
	d.mu.Unlock()
	d.watch(v)
	d.log.Info("microvm booting", "sandbox", spec.ID, "uid", uid, "pid", v.rec.VMM.PID, "accel", m.Accel, "vcpus", m.VCPUs, "memory_mib", m.MemoryMiB, "image", spec.Image)
	if err := d.waitReady(ctx, v); err != nil {
		d.log.Warn("microvm did not boot", "sandbox", spec.ID, "error", err.Error())
		v.kill(driver.ReasonFailed)
		select {
		case <-v.done:
		case <-ctx.Done():
			return driver.Status{}, ctx.Err()
		}
	}
	return v.status(), nil
}

// startVMM starts v's VMM as uid and records it.
func (d *Driver) startVMM(v *vm, uid int) error {
	cmd, err := d.vmm.Command(v.rec.Machine)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(v.vmDir(), "qemu.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if err := logf.Chown(uid, uid); err != nil {
		return err
	}
	var groups []uint32
	if v.rec.Machine.Accel == AccelKVM {
		if fi, err := os.Stat("/dev/kvm"); err == nil {
			groups = append(groups, fi.Sys().(*syscall.Stat_t).Gid)
		}
	}
	cmd.SysProcAttr = vmmProcAttr(uid, groups, v.rec.Link == nil)
	cmd.Stdout, cmd.Stderr, cmd.Dir, cmd.Env = logf, logf, v.vmDir(), []string{}
	if v.rec.Link != nil {
		if err := d.startPublic(cmd, *v.rec.Link, uid); err != nil {
			return err
		}
	} else if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the VMM: %w", err)
	}
	v.cmd = cmd
	go func() {
		cmd.Wait()
		close(v.exited)
	}()
	if err := v.rec.Cgroup.Enter(cmd.Process.Pid, ""); err != nil {
		cmd.Process.Kill()
		return err
	}
	id, err := process.IdentOf(cmd.Process.Pid)
	if err != nil {
		cmd.Process.Kill()
		return fmt.Errorf("the VMM ended at once: %w (see %s)", err, filepath.Join(v.vmDir(), "qemu.log"))
	}
	v.rec.VMM = id
	if err := process.WriteRecord(filepath.Join(v.dir, fileVM), v.rec); err != nil {
		cmd.Process.Kill()
		return err
	}
	return nil
}

// cmdline is the guest kernel's command line; extra is appended.
func cmdline(extra string) string {
	s := "console=ttyS0 quiet loglevel=3 panic=-1 no_timer_check tsc=reliable mitigations=off"
	if extra != "" {
		s += " " + extra
	}
	return s
}

// makeScratch creates the writable layer: a sparse file of mib MiB with an ext4 file system.
func makeScratch(ctx context.Context, path string, mib int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(mib << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the writable layer: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 of the writable layer (e2fsprogs): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitReady waits for the guest's ready frame, the VMM's end or the boot timeout, and connects
// the control socket.
func (d *Driver) waitReady(ctx context.Context, v *vm) error {
	deadline := v.rec.CreatedAt.Add(d.cfg.BootTimeout)
	for {
		r, _ := v.channel(0)
		if r.End != nil {
			return errors.New("the guest ended while booting: " + r.End.Failed)
		}
		if r.Ready != nil {
			break
		}
		select {
		case <-v.exited:
			return errors.New("the VMM ended while the guest booted")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest did not boot within %s", d.cfg.BootTimeout)
		}
	}
	c, err := dialControl(filepath.Join(v.vmDir(), fileControl), time.Now().Add(10*time.Second))
	if err != nil {
		return fmt.Errorf("the control channel: %w", err)
	}
	v.mu.Lock()
	v.ctl = c
	v.mu.Unlock()
	return nil
}

// Claim hands the warm guest spec's command, environment and timeout, and returns once the
// command runs (State running) or could not start (State failed).
func (d *Driver) Claim(ctx context.Context, spec driver.Spec) (driver.Status, error) {
	if err := spec.Validate(); err != nil {
		return driver.Status{}, err
	}
	unlock := d.lockID(spec.ID)
	defer unlock()
	v, err := d.get(spec.ID)
	if err != nil {
		return driver.Status{}, err
	}
	st := v.status()
	v.mu.Lock()
	claimed := v.claim != nil
	v.mu.Unlock()
	if claimed {
		return st, nil
	}
	if st.State != driver.StateWarm {
		return driver.Status{}, cubefleet.Errorf(cubefleet.CodeConflict, "sandbox %s is %s, not warm: it cannot be claimed", spec.ID, st.State)
	}
	c := claimRecord{Spec: spec, ClaimedAt: time.Now().UTC()}
	c.Spec.Env = nil
	c.Spec.Image, c.Spec.CPUMillicores, c.Spec.MemoryMiB, c.Spec.DiskMiB = v.rec.Spec.Image, v.rec.Spec.CPUMillicores, v.rec.Spec.MemoryMiB, v.rec.Spec.DiskMiB
	if err := process.WriteRecord(filepath.Join(v.dir, fileClaim), c); err != nil {
		return driver.Status{}, err
	}
	v.mu.Lock()
	v.claim = &c
	v.mu.Unlock()
	req := guest.Request{
		Op: "run", Argv: spec.Argv, Env: spec.Env, WorkDir: spec.WorkDir, TimeoutMs: spec.Timeout.Milliseconds(),
		GraceMs: spec.GraceOrDefault().Milliseconds(), OutputLimitBytes: spec.OutputLimitOrDefault(),
	}
	if err := v.request(ctx, req, 30*time.Second); err != nil {
		d.log.Warn("microvm claim failed", "sandbox", spec.ID, "error", err.Error())
		v.kill(driver.ReasonFailed)
		<-v.done
	}
	d.log.Info("microvm claimed", "sandbox", spec.ID, "program", spec.Argv[0], "env", driver.EnvNames(spec.Env))
	return v.status(), nil
}

// request sends req on the control socket and reads the guest's ack, within wait.
func (v *vm) request(ctx context.Context, req guest.Request, wait time.Duration) error {
	v.mu.Lock()
	c := v.ctl
	v.mu.Unlock()
	if c == nil {
		var err error
		if c, err = dialControl(filepath.Join(v.vmDir(), fileControl), time.Now().Add(2*time.Second)); err != nil {
			return fmt.Errorf("the control channel: %w", err)
		}
		v.mu.Lock()
		v.ctl = c
		v.mu.Unlock()
	}
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("the control channel: %w", err)
	}
	a, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("the control channel: no answer from the guest: %w", err)
	}
	var ack guest.Ack
	if err := json.Unmarshal(a, &ack); err != nil {
		return fmt.Errorf("the control channel: %w", err)
	}
	if ack.Error != "" {
		return errors.New("the guest refused the request: " + ack.Error)
	}
	return nil
}

func (v *vm) closeControl() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ctl != nil {
		v.ctl.Close()
		v.ctl = nil
	}
}

// Stop asks the guest to stop what it runs (SIGTERM, then SIGKILL after the grace, in the
// guest), waits for its VM to end, and kills the VMM when it has not within the grace and a
// margin.
func (d *Driver) Stop(ctx context.Context, id string) (driver.Status, error) {
	v, err := d.get(id)
	if err != nil {
		return driver.Status{}, err
	}
	select {
	case <-v.done:
		return v.status(), nil
	default:
	}
	grace := v.rec.Spec.GraceOrDefault()
	v.mu.Lock()
	if v.claim != nil {
		grace = v.claim.Spec.GraceOrDefault()
	}
	v.mu.Unlock()
	if err := v.request(ctx, guest.Request{Op: "stop", GraceMs: grace.Milliseconds()}, 5*time.Second); err != nil {
		d.log.Info("microvm stop request failed: killing its VMM", "sandbox", id, "error", err.Error())
		v.kill(driver.ReasonStopped)
	}
	select {
	case <-v.done:
		return v.status(), nil
	case <-time.After(grace + 15*time.Second):
		v.kill(driver.ReasonStopped)
	case <-ctx.Done():
		return driver.Status{}, ctx.Err()
	}
	select {
	case <-v.done:
		return v.status(), nil
	case <-ctx.Done():
		return driver.Status{}, ctx.Err()
	}
}

// kill ends v's VMM at once (QMP quit, then SIGKILL), recording why.
func (v *vm) kill(cause driver.Reason) {
	v.mu.Lock()
	if v.cause == "" {
		v.cause = cause
	}
	v.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v.vmm.Quit(ctx, v.rec.Machine)
	if !v.rec.VMM.WaitGone(time.Now().Add(2 * time.Second)) {
		v.rec.VMM.Signal(syscall.SIGKILL)
	}
}
