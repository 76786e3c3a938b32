// Package microvm is the microVM driver of the agent (driver.Driver): each sandbox is a
// virtual machine with its own guest kernel, started through a VMM (QEMU, the first back end).
//
// # The guest
//
// The guest boots Config.Kernel with an initramfs the driver builds and caches per kernel and
// init binary (Initramfs): the cubefleet binary itself, static, as PID 1 (package guest), and
// the kernel modules it needs from that kernel's module tree (GuestModules). The init mounts the
// template's image read-only under a writable layer of the flavor's disk (an overlay), waits
// for its command on the control channel, runs it as an unprivileged user, and sends its output
// and end back on the result channel (package guest: two virtio-serial ports).
//
// # Isolation
//
// The guest's kernel is its own: the tenant's code never runs on the host's. Its processors and
// memory are the flavor's (Spec.CPUMillicores rounded up to whole vCPUs, Spec.MemoryMiB). The
// VMM process runs as the sandbox's leased user (the process driver's leases, shared by both
// drivers of a host) in a session and a network namespace of its own, and in a cgroup of its
// own (package cgroups: the guest's memory plus the VMM's, MemoryLimitMiB; the flavor's CPU),
// and a private VM has no network device: it reaches nothing. A public VM has a virtio NIC on a
// tap device in that namespace, bridged to a veth pair of package sandboxnet under the host's
// policy (the internet only), as a public process sandbox's. The guest shares no file system with the host: it
// sees its image (read-only), its writable layer and the two channel ports.
//
// # Warm microVMs and recovery
//
// A warm sandbox (Warm) is a booted guest waiting on its control port: its claim is one request
// on a socket, milliseconds on any accelerator. Start is a warm boot and its claim at once. The
// VMM outlives the agent; a new driver on the same directory finds every VM again by its
// process identity (pid, start time, boot) and its sockets, or reports it lost.
//
// # Layout
//
//	<Dir>/                0711 root; .lock: the driver's flock; initramfs/: the cached archives
//	<Dir>/<id>/           0711 root: vm.json, claim.json, result.json (0600 root)
//	<Dir>/<id>/vm/        0700, the sandbox's user: the VMM's files (qmp.sock, control.sock,
//	                      channel, console.log, qemu.log, scratch.ext4)
package microvm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
)

// Defaults of Config.
const (
	DefaultBootTimeout = 3 * time.Minute
	DefaultDiskMiB     = 1024
	DefaultMemoryMiB   = 512
	// MinMemoryMiB is the least memory a guest gets: the kernel and the init's archive need it.
	MinMemoryMiB = 256
	// ImageExt is the file name extension of a template's image in Config.ImageDir.
	ImageExt = ".ext4"
)

// Config configures the microvm driver. Dir, Kernel and ImageDir are required.
type Config struct {
	// Dir holds one directory per sandbox and the initramfs cache; created when missing.
	Dir string
	// Kernel is the guest kernel image (CUBEFLEET_GUEST_KERNEL), with its module tree beside
	// it (OpenKernel).
	Kernel string
	// Init is the guest init binary, statically linked (default: /proc/self/exe, the running
	// cubefleet binary, which must call guest.MaybeRun first thing in main).
	Init string
	// ImageDir holds the templates' root file system images, <imageId>.ext4 (ImageExt).
	ImageDir string
	// Accel is the accelerator, AccelKVM or AccelTCG; "" takes the last probe's choice for
	// this kernel and init (CachedAccel, recorded by `agent check`), else probes (ChooseAccel).
	Accel string
	// MachineType is MachineMicroVM or MachinePC; "" is MachinePC (docs/sandbox-runtime.md
	// says why).
	MachineType string
	// VMM starts the VMs (default QEMU{}).
	VMM VMM
	// FirstUID, UIDCount and UIDLeaseDir are the sandbox user ids, as the process driver's
	// (process.Config); their defaults are the same.
	FirstUID, UIDCount int
	UIDLeaseDir        string
	// NetworkCIDR is the sandbox network public guests' links are numbered in, as the process
	// driver's (a /30 each, by their user id's place in the range; sandboxnet.LinkFor);
	// default process.DefaultNetworkCIDR.
	NetworkCIDR netip.Prefix
	// MaxConnections caps the connections a public guest has open at once in the host's
	// connection tracking, as the process driver's; 0 means sandboxnet.DefaultMaxConnections.
	MaxConnections int
	// CgroupParent is the cgroup, relative to each cgroup hierarchy's root, that holds the
	// VMMs' cgroups, <mount>/<CgroupParent>/vm-<sandbox id> (each VM's are in its vm.json).
	// It must be the driver's own: default process.DefaultCgroupParent/<the first 12 hex
	// digits of Dir's SHA-256>, as the process driver's.
	CgroupParent string
	// BootTimeout bounds a guest's boot, from the VMM's start to the guest's ready (default
	// DefaultBootTimeout): a guest that hangs fails instead of blocking.
	BootTimeout time.Duration
	// Log receives the driver's log (never an environment's values). Nil discards.
	Log *slog.Logger
}

// Driver is the microvm driver; see the package documentation. Create it with New.
type Driver struct {
	cfg       Config
	vmm       VMM
	kernel    Kernel
	initramfs string
	log       *slog.Logger
	lock      *os.File
	leases    *process.UIDLeases
	cgroups   cgroups.Host // where the VMMs' cgroups are (Tracks false: none)

	mu     sync.Mutex
	vms    map[string]*vm
	idMu   map[string]*sync.Mutex
	closed chan struct{}
	wg     sync.WaitGroup
}

var _ driver.Driver = (*Driver)(nil)

// New checks the kernel and the init, builds (or finds) the initramfs, chooses the accelerator
// when Config.Accel is "" (a probe boot, ChooseAccel), takes the lock on Dir and finds the VMs
// of an earlier agent again. Errors name the setting to fix.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("sandbox directory: %q must be an absolute path", cfg.Dir)
	}
	if cfg.ImageDir == "" {
		return nil, errors.New("image directory: set CUBEFLEET_IMAGE_DIR to the directory of the templates' images (<imageId>" + ImageExt + ")")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the microvm runtime runs each VMM as a sandbox user of its own: the agent must run as root")
	}
	cfg.Dir = filepath.Clean(cfg.Dir)
	if cfg.Init == "" {
		cfg.Init = "/proc/self/exe"
	}
	if cfg.VMM == nil {
		cfg.VMM = QEMU{}
	}
	if cfg.FirstUID == 0 {
		cfg.FirstUID = process.DefaultFirstUID
	}
	if cfg.UIDCount == 0 {
		cfg.UIDCount = process.DefaultUIDCount
	}
	if cfg.UIDLeaseDir == "" {
		cfg.UIDLeaseDir = process.DefaultUIDLeaseDir
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = process.CgroupParentFor(cfg.Dir)
	}
	if !cfg.NetworkCIDR.IsValid() {
		cfg.NetworkCIDR = process.DefaultNetworkCIDR
	}
	if cfg.BootTimeout <= 0 {
		cfg.BootTimeout = DefaultBootTimeout
	}
	if cfg.MachineType == "" {
		cfg.MachineType = MachinePC
	}
	if cfg.MachineType != MachinePC && cfg.MachineType != MachineMicroVM {
		return nil, fmt.Errorf("machine type %q: must be %s or %s", cfg.MachineType, MachinePC, MachineMicroVM)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k, err := OpenKernel(cfg.Kernel)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	if err := os.Chmod(cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	initrd, err := Initramfs(k, cfg.Init, filepath.Join(cfg.Dir, "initramfs"))
	if err != nil {
		return nil, err
	}
	if cfg.Accel == "" {
		choice := CachedAccel(cfg.Dir, initrd)
		if choice == nil {
			c := ChooseAccel(ctx, cfg.VMM, k.Path, initrd, cfg.MachineType, cfg.BootTimeout)
			SaveAccel(cfg.Dir, initrd, c)
			choice = &c
		}
		if choice.Accel == "" {
			return nil, fmt.Errorf("no accelerator boots a guest, so this node refuses microvm sandboxes: %s", choice)
		}
		log.Info("microvm accelerator chosen", "accel", choice.Accel, "probe", choice.String())
		cfg.Accel = choice.Accel
	}
	if cfg.Accel != AccelKVM && cfg.Accel != AccelTCG {
		return nil, fmt.Errorf("accelerator %q: must be %s or %s", cfg.Accel, AccelKVM, AccelTCG)
	}
	lock, err := process.LockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		cfg: cfg, vmm: cfg.VMM, kernel: k, initramfs: initrd, log: log, lock: lock,
		leases: process.NewUIDLeases(cfg.UIDLeaseDir, cfg.FirstUID, cfg.UIDCount),
		vms:    map[string]*vm{}, idMu: map[string]*sync.Mutex{}, closed: make(chan struct{}),
		cgroups: cgroups.Detect("", 0).Prepare(cfg.CgroupParent),
	}
	d.recover()
	if gone := sandboxnet.RemoveLeftovers(d.staleLink); len(gone) > 0 {
		log.Info("removed the links of ended microvms", "links", gone)
	}
	d.cgroups.RemoveEmpty(cfg.CgroupParent, cgroupPrefix)
	log.Info("microvm driver ready", "dir", cfg.Dir, "accel", cfg.Accel, "cgroups", d.Cgroups())
	return d, nil
}

// Accel returns the accelerator the driver's VMs run under.
func (d *Driver) Accel() string { return d.cfg.Accel }

// Kernel returns the guest kernel the driver boots.
func (d *Driver) Kernel() Kernel { return d.kernel }

// lockID returns the lock of one sandbox id, held while it is started, claimed or removed.
func (d *Driver) lockID(id string) func() {
	d.mu.Lock()
	m := d.idMu[id]
	if m == nil {
		m = new(sync.Mutex)
		d.idMu[id] = m
	}
	d.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (d *Driver) get(id string) (*vm, error) {
	select {
	case <-d.closed:
		return nil, errClosed
	default:
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.vms[id]
	if v == nil {
		return nil, cubefleet.Errorf(cubefleet.CodeNotFound, "sandbox %s is not on this node", id)
	}
	return v, nil
}

// ImagePath returns the file of image id in the driver's image directory, or an INVALID_INPUT
// error naming the file (missing) or the id (not a plain file name).
func ImagePath(dir, id string) (string, error) {
	if id == "" {
		return "", cubefleet.Invalid("image", "the template names no image: a microvm sandbox boots its template's imageId")
	}
	if id != filepath.Base(id) || id == "." || id == ".." {
		return "", cubefleet.Invalid("image", "image %q is not a plain file name: the microvm runtime finds images as <imageId>%s in its image directory", id, ImageExt)
	}
	p := filepath.Join(dir, id+ImageExt)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return "", cubefleet.Invalid("image", "image %q is not on this node: no file %s (import it with `cubefleet agent image import %s FILE|DIR`)", id, p, id)
	}
	return p, nil
}

// HasImage reports whether image id is in the driver's image directory: a template is
// prepared on a microvm node only then.
func (d *Driver) HasImage(id string) error {
	_, err := ImagePath(d.cfg.ImageDir, id)
	return err
}

// Wait blocks until the sandbox ended and returns its final Status.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Status, error) {
	v, err := d.get(id)
	if err != nil {
		return driver.Status{}, err
	}
	select {
	case <-v.done:
		return v.status(), nil
	case <-ctx.Done():
		return driver.Status{}, ctx.Err()
	}
}

// Status returns the sandbox's current Status.
func (d *Driver) Status(ctx context.Context, id string) (driver.Status, error) {
	v, err := d.get(id)
	if err != nil {
		return driver.Status{}, err
	}
	return v.status(), nil
}

// Stats returns the sandbox's resources: while it runs, its VMM's on the host (its cgroup's CPU
// time, memory and peak memory; without a cgroup, the VMM process's CPU time and resident
// memory); once it ended, its command's in the guest, or its VMM's cgroup's when the guest
// reported none (it did not boot, was killed, or ran no command).
func (d *Driver) Stats(ctx context.Context, id string) (driver.Stats, error) {
	st, err := d.Status(ctx, id)
	return st.Stats, err
}

// Output returns what the guest sent of the command's stdout and stderr so far.
func (d *Driver) Output(ctx context.Context, id string) (driver.Output, error) {
	v, err := d.get(id)
	if err != nil {
		return driver.Output{}, err
	}
	return v.output(), nil
}

// List returns every sandbox's Status, sorted by id.
func (d *Driver) List(ctx context.Context) ([]driver.Status, error) {
	d.mu.Lock()
	vms := make([]*vm, 0, len(d.vms))
	for _, v := range d.vms {
		vms = append(vms, v)
	}
	d.mu.Unlock()
	out := make([]driver.Status, 0, len(vms))
	for _, v := range vms {
		out = append(out, v.status())
	}
	slices.SortFunc(out, func(a, b driver.Status) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out, nil
}

// Remove stops the sandbox if it runs and deletes its directory.
func (d *Driver) Remove(ctx context.Context, id string) error {
	v, err := d.get(id)
	if err != nil {
		return err
	}
	if _, err := d.Stop(ctx, id); err != nil {
		return err
	}
	unlock := d.lockID(id)
	defer unlock()
	if err := os.RemoveAll(v.dir); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	d.mu.Lock()
	delete(d.vms, id)
	d.mu.Unlock()
	return nil
}

// errClosed is the error of a closed driver's methods.
var errClosed = errors.New("the microvm driver is closed")

// StopAll stops every sandbox in parallel; when ctx ends first, it kills the VMs that remain.
func (d *Driver) StopAll(ctx context.Context) error {
	select {
	case <-d.closed:
		return errClosed
	default:
	}
	d.mu.Lock()
	vms := make([]*vm, 0, len(d.vms))
	for _, v := range d.vms {
		vms = append(vms, v)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, v := range vms {
		wg.Go(func() {
			if _, err := d.Stop(ctx, v.id); err != nil {
				v.kill("stopped")
				<-v.done
			}
		})
	}
	wg.Wait()
	var left []string
	for _, v := range vms {
		if v.rec.VMM.Alive() {
			left = append(left, v.id)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("the VMs of sandboxes %v survived", left)
	}
	return nil
}

// Close releases the driver; running VMs keep running (a new driver finds them again).
func (d *Driver) Close() error {
	select {
	case <-d.closed:
		return nil
	default:
	}
	close(d.closed)
	d.wg.Wait()
	d.mu.Lock()
	for _, v := range d.vms {
		v.closeControl()
	}
	d.mu.Unlock()
	return d.lock.Close()
}

// dialControl connects to a VM's control socket, retrying while the VMM has not created it yet.
func dialControl(path string, until time.Time) (net.Conn, error) {
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil || time.Now().After(until) {
			return c, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
