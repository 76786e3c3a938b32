// Package process is the process driver of the agent (driver.Driver): each sandbox is a child
// process on the host, in a directory of its own, as a user of its own.
//
// # Isolation
//
// A sandbox runs as its own unprivileged user and group, leased from a configured range
// (Config.FirstUID, Config.UIDCount) for as long as it runs, with no
// supplementary groups and no_new_privs (a set-user-ID program does not raise it). So it cannot
// read the agent's files: the agent's state directory is 0700 root, its credential 0600. Its
// working directory (<Dir>/<id>/work, mode 0700) is its user's; its records and captured
// output beside it are the agent's. Its environment is exactly the spec's, nothing of the
// agent's (whose environment may hold secrets); the values are never logged or written to
// disk, only the names. It runs in a session and process group of its own, so that signals
// reach all of it and none of the agent's. As root, it gets PID, mount, IPC, UTS and network
// namespaces of its own and, where the host allows it, a user namespace whose maps are its
// uid and gid to themselves alone (Isolation.Namespaces; the sandbox's init, init.go).
//
// Limits: every sandbox gets a cgroup of its own under Config.CgroupParent in each cgroup
// hierarchy the host has (package cgroups: a cgroup v2 hierarchy with delegated controllers,
// cgroup v1 hierarchies, or both on a hybrid host), which tracks all its processes (so a stop
// kills them at once) and, for each controller there is, limits the sandbox as a whole: CPU
// as a CFS quota (CPUMillicores), memory with no swap (MemoryMiB; a sandbox past it is
// OOM-killed and ends killed with driver.ReasonOOM), processes (Config.MaxProcesses). Its CPU
// time and peak memory are the cgroup's, for all its processes. A limit without its
// controller falls back to an rlimit (memory: RLIMIT_AS, the address space; processes:
// RLIMIT_NPROC, per user) or, for CPU, is not enforced; RLIMIT_NOFILE (Config.MaxOpenFiles) is
// always set. Isolation.String says which applies.
//
// Without root, the driver refuses to start unless Config.AllowOwnUser is set, for development:
// then sandboxes run as the agent's own user and can read what it can.
//
// # Supervisors and recovery
//
// Each sandbox has a supervisor: the agent's own binary re-executed in a hidden mode
// (MaybeRunSupervisor; `ps` shows cubefleet-sandbox-supervisor), in a session of its own, which
// starts the sandbox's process, captures its output into files of the sandbox's directory
// (Spec.OutputLimitBytes per stream, then driver.TruncationMarker), enforces its timeout
// (SIGTERM to its process group, SIGKILL to all of it after the grace), stops it on SIGTERM,
// collects it and records its end, and outlives the agent. A new driver on the same directory
// finds every sandbox again (List) and checks each supervisor by pid, start time and boot id, so
// a recycled pid is never taken for it: a sandbox whose supervisor vanished without recording an
// end is reported lost (and what is left of it is killed). The sandbox's process dies with its
// supervisor (parent-death signal).
//
// Supervisors are started ahead of need (Config.Spares), each with its exec stage, so that Start
// only hands over the spec and waits for exec: a few milliseconds.
//
// # Layout
//
//	<Dir>/                  0711 root (0700 in own-user mode); .lock: the driver's flock
//	<Dir>/<id>/             0711 root, 0700 once ended (its uid may be lent again): sandbox.json,
//	                        supervisor.json, state.json, result.json, stdout, stderr,
//	                        supervisor.log (all 0600 root)
//	<Dir>/<id>/work/        0700, the sandbox's user: its working directory
//	<UIDLeaseDir>/<uid>     0600 root: which sandbox directory holds uid while it runs
package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
)

// Defaults of Config.
const (
	DefaultFirstUID     = 2_000_000
	DefaultUIDCount     = 65_536
	DefaultUIDLeaseDir  = "/run/cubefleet/sandbox-uids"
	DefaultCgroupParent = "cubefleet"
	DefaultMaxProcesses = 1024
	DefaultMaxOpenFiles = 4096
	DefaultSpares       = 1
)

// DefaultNetworkCIDR is Config.NetworkCIDR's default (the agent's sandbox network default).
var DefaultNetworkCIDR = netip.MustParsePrefix("192.168.0.0/18")

// Config configures the process driver. Only Dir is required.
type Config struct {
	// Dir holds one directory per sandbox, e.g. /var/lib/cubefleet/sandboxes; created (with
	// its parents) when missing. Every directory above it must be searchable by others (mode
	// o+x), since each sandbox's user must reach its working directory in it: it cannot be
	// inside the agent's state directory (0700).
	Dir string
	// FirstUID and UIDCount are the range of user ids sandboxes run as (each also its group
	// id): FirstUID to FirstUID+UIDCount-1. Defaults: DefaultFirstUID, DefaultUIDCount. No
	// account of /etc/passwd may be in it. Two agents on one host share the leases in
	// UIDLeaseDir, so they may share a range.
	FirstUID, UIDCount int
	// UIDLeaseDir is where the host's agents lease those ids (default DefaultUIDLeaseDir).
	UIDLeaseDir string
	// AllowOwnUser lets a driver that is not root run sandboxes as its own user, for
	// development: they are then not isolated from the agent. Without it, New refuses to run
	// without root. Root never runs a sandbox as root.
	AllowOwnUser bool
	// RequireIsolation makes New fail, naming what is missing (Isolation.Missing), unless
	// sandboxes get a memory limit and a process limit from cgroup controllers and a network
	// namespace of their own.
	RequireIsolation bool
	// CgroupParent is the cgroup, relative to each cgroup hierarchy's root, that holds the
	// sandboxes' cgroups, <mount>/<CgroupParent>/sandbox-<16 hex digits> (each sandbox's are in
	// its sandbox.json). It must be the driver's own: default DefaultCgroupParent/<the first 12
	// hex digits of the SHA-256 of Dir>, so that two agents of a host never share one.
	CgroupParent string
	// MaxProcesses caps each sandbox's processes (pids.max, else RLIMIT_NPROC of its user);
	// default DefaultMaxProcesses.
	MaxProcesses int
	// MaxOpenFiles caps each sandbox process's open files (RLIMIT_NOFILE); default
	// DefaultMaxOpenFiles.
	MaxOpenFiles int
	// NetworkCIDR is the sandbox network public sandboxes' links are numbered in (a /30
	// each, by their user id's place in the range; sandboxnet.LinkFor); default
	// DefaultNetworkCIDR.
	NetworkCIDR netip.Prefix
	// MaxConnections caps the connections a public sandbox has open at once in the host's
	// connection tracking (new ones past it are rejected); default
	// sandboxnet.DefaultMaxConnections. The host's policy keeps the value of the first public
	// sandbox that installed it.
	MaxConnections int
	// Spares is how many supervisors are kept started ahead of need (default DefaultSpares;
	// negative: none, every Start starts its own, slower by two process starts).
	Spares int
	// Executable is the binary re-executed as supervisor; default /proc/self/exe, the running
	// binary (which must call MaybeRunSupervisor first thing in main).
	Executable string
	// Log receives the driver's log: sandbox ids, pids, users, programs and the names (never
	// the values) of environment variables. Nil discards.
	Log *slog.Logger
}

// Driver is the process driver; see the package documentation. Create it with New.
type Driver struct {
	cfg    Config
	iso    Isolation
	log    *slog.Logger
	lock   *os.File
	leases *uidLeases

	mu     sync.Mutex
	idMu   map[string]*sync.Mutex
	closed bool

	spares chan *supervisorProc
	refill chan struct{}
	quit   chan struct{}
	// refilling is set while keepSpares starts a spare, awaiting while a caller waits for it;
	// refillEnded is signalled when keepSpares stops starting one.
	refilling, awaiting atomic.Bool
	refillEnded         chan struct{}
	wg                  sync.WaitGroup
}

var _ driver.Driver = (*Driver)(nil)

// New prepares Dir, takes the driver's lock on it (a second driver on the same directory is
// refused, naming the process holding it), sets up the sandboxes' cgroup parent when the host
// has cgroup v2, leases again the user ids of the sandboxes it finds, and starts the spare
// supervisors. Errors name the setting and the fix: not root without AllowOwnUser, a user id
// range holding accounts of /etc/passwd, a Dir other users cannot reach.
func New(cfg Config) (*Driver, error) {
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("sandbox directory: %q must be an absolute path", cfg.Dir)
	}
	cfg.Dir = filepath.Clean(cfg.Dir)
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.FirstUID, DefaultFirstUID)
	def(&cfg.UIDCount, DefaultUIDCount)
	def(&cfg.MaxProcesses, DefaultMaxProcesses)
	def(&cfg.MaxOpenFiles, DefaultMaxOpenFiles)
	def(&cfg.Spares, DefaultSpares)
	cfg.Spares = max(cfg.Spares, 0)
	if cfg.UIDLeaseDir == "" {
		cfg.UIDLeaseDir = DefaultUIDLeaseDir
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = CgroupParentFor(cfg.Dir)
	}
	if !cfg.NetworkCIDR.IsValid() {
		cfg.NetworkCIDR = DefaultNetworkCIDR
	}
	if cfg.Executable == "" {
		cfg.Executable = "/proc/self/exe"
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	euid := os.Geteuid()
	iso, err := Expected(cfg.AllowOwnUser)
	if err != nil {
		return nil, err
	}
	ownUser := iso.OwnUser
	if !ownUser {
		if cfg.FirstUID <= 0 || cfg.UIDCount <= 0 || cfg.FirstUID+cfg.UIDCount-1 > 0xFFFFFFFE-1 {
			return nil, fmt.Errorf("sandbox user ids: %d to %d is not a range of unprivileged user ids (above 0, below 4294967294)", cfg.FirstUID, cfg.FirstUID+cfg.UIDCount-1)
		}
		if acc := accountsInRange("/etc/passwd", cfg.FirstUID, cfg.UIDCount); len(acc) > 0 {
			return nil, fmt.Errorf("sandbox user ids: %d to %d holds the accounts %s of /etc/passwd, whose files sandboxes could read: choose a range no account uses", cfg.FirstUID, cfg.FirstUID+cfg.UIDCount-1, strings.Join(acc, ", "))
		}
		if err := searchable(filepath.Dir(cfg.Dir)); err != nil {
			return nil, fmt.Errorf("sandbox directory %s: %w", cfg.Dir, err)
		}
	}
	mode := fs.FileMode(0o711)
	if ownUser {
		mode = 0o700
	}
	// Missing parents are made 0755 whatever the umask: the sandboxes' users pass through them.
	if err := atomicfile.MkdirAll(filepath.Dir(cfg.Dir), 0o755); err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	if err := atomicfile.MkdirAll(cfg.Dir, mode); err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	if fi, err := os.Lstat(cfg.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("sandbox directory: %s is not a directory (a symlink is not followed)", cfg.Dir)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid {
		return nil, fmt.Errorf("sandbox directory: %s is owned by uid %d, not by the agent's user (uid %d): chown it, or use another directory", cfg.Dir, st.Uid, euid)
	}
	if err := os.Chmod(cfg.Dir, mode); err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	leases := &uidLeases{dir: cfg.UIDLeaseDir, first: cfg.FirstUID, count: cfg.UIDCount}
	if !ownUser {
		iso.Cgroups = iso.Cgroups.Prepare(cfg.CgroupParent)
		iso.Cgroups.RemoveEmpty(cfg.CgroupParent, sandboxCgroupPrefix)
		iso = iso.Probed(cfg.Executable, cfg.FirstUID)
		if gone := sandboxnet.RemoveLeftovers(func(name string) bool { return staleLink(cfg.Dir, name, leases, sandboxnet.Links(cfg.NetworkCIDR)) }); len(gone) > 0 {
			log.Info("removed the links of ended sandboxes", "links", gone)
		}
		if len(iso.Namespaces) == 0 && iso.Disk { // the init mounts the disk in its namespace
			iso.Disk, iso.DiskNote = false, "a work directory's disk needs the sandbox's mount namespace"
		}
	}
	if missing := iso.Missing(); cfg.RequireIsolation && len(missing) > 0 {
		lock.Close()
		return nil, fmt.Errorf("isolation is required (require-isolation) and this host lacks: %s; the driver has %s", strings.Join(missing, ", "), iso)
	}
	d := &Driver{
		cfg: cfg, iso: iso, log: log, lock: lock,
		leases:      leases,
		idMu:        map[string]*sync.Mutex{},
		spares:      make(chan *supervisorProc, cfg.Spares),
		refill:      make(chan struct{}, 1),
		quit:        make(chan struct{}),
		refillEnded: make(chan struct{}, 1),
	}
	if !ownUser {
		d.claimLeases()
	}
	if cfg.Spares > 0 {
		d.wg.Add(1)
		go d.keepSpares()
		d.refill <- struct{}{}
	}
	log.Info("sandbox driver ready", "driver", "process", "dir", cfg.Dir, "isolation", iso.String())
	return d, nil
}

// Isolation returns what the driver enforces on this host (see Isolation.String).
func (d *Driver) Isolation() Isolation { return d.iso }

// lockWait is how long lockDir tries again for a sandbox directory's lock that is held.
const lockWait = 2 * time.Second

// searchable checks that every directory from dir up to / lets others search it (o+x).
func searchable(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s has mode %04o, so a sandbox's user cannot reach its working directory: use a directory outside of it (not in the agent's state directory), or chmod o+x %s", p, fi.Mode().Perm(), p)
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}

// lockDir takes the driver's exclusive lock on dir/.lock, writing this process's id in it. A
// lock still held is tried again for up to lockWait: the driver before this one (an agent
// restarted at once) may have closed it while a child it was starting still had the file open
// between fork and exec.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox directory: %w", err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	for deadline := time.Now().Add(lockWait); errors.Is(err, unix.EWOULDBLOCK) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		data, _ := os.ReadFile(path)
		f.Close()
		who := "another process"
		if pid := strings.TrimSpace(string(data)); pid != "" {
			who = "process " + pid
		}
		return nil, fmt.Errorf("sandbox directory %s is in use by %s: give each agent its own sandbox directory", dir, who)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// claimLeases leases again the uids of the sandboxes in Dir that have not ended (after a reboot
// emptied /run), and retires the ended ones (their leases end).
func (d *Driver) claimLeases() {
	ents, _ := os.ReadDir(d.cfg.Dir)
	for _, e := range ents {
		if !e.IsDir() || !driver.ValidID(e.Name()) {
			continue
		}
		r, _ := d.read(e.Name())
		switch {
		case !r.hasRec || r.rec.UID < 0:
		case r.hasResult:
			d.retire(r)
		default:
			if err := d.leases.claim(r.rec.UID, r.dir); err != nil {
				d.log.Warn("sandbox user id is leased twice", "sandbox", r.rec.ID, "uid", r.rec.UID, "error", err)
			}
		}
	}
}

// lockID returns the lock of one sandbox id, held while its directory is created, declared
// lost, or removed.
func (d *Driver) lockID(id string) func() {
	d.mu.Lock()
	m := d.idMu[id]
	if m == nil {
		m = &sync.Mutex{}
		d.idMu[id] = m
	}
	d.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (d *Driver) dir(id string) string { return filepath.Join(d.cfg.Dir, id) }

func notFound(id string) error {
	return cubefleet.Errorf(cubefleet.CodeNotFound, "sandbox %s is not on this node", id)
}

// Start implements driver.Driver.
func (d *Driver) Start(ctx context.Context, spec driver.Spec) (driver.Status, error) {
	if err := spec.Validate(); err != nil {
		return driver.Status{}, err
	}
	return d.create(ctx, spec, false)
}

// create makes sandbox spec's directory, leases its user, and hands it to a supervisor: to run
// at once, or (warm) to wait for its claim. An id that exists already starts nothing.
func (d *Driver) create(ctx context.Context, spec driver.Spec, warm bool) (driver.Status, error) {
	unlock := d.lockID(spec.ID)
	defer unlock()
	dir := d.dir(spec.ID)
	if _, err := os.Lstat(dir); err == nil {
		return d.status(spec.ID, true)
	}
	// The directory before the user's lease: a lease names its directory, and another agent of
	// the host takes over a lease whose directory does not exist (see uidLeases.acquire). Its
	// mode whatever the umask: the sandbox's user passes through it.
	err := os.Mkdir(dir, 0o711)
	if err == nil {
		if err = os.Chmod(dir, 0o711); err != nil {
			removeAll(dir)
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return d.status(spec.ID, true)
		}
		return driver.Status{}, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	uid, gid := -1, -1
	if !d.iso.OwnUser {
		var err error
		links := 0 // a public sandbox's uid must have a link no running sandbox has
		if spec.Network == driver.NetworkPublic && len(d.iso.Namespaces) > 0 {
			links = sandboxnet.Links(d.cfg.NetworkCIDR)
		}
		if uid, err = d.leases.acquire(dir, links); err != nil {
			removeAll(dir)
			return driver.Status{}, err
		}
		gid = uid
	}
	// The supervisor first: its cgroup (made when it started) is the sandbox's.
	sup, err := d.supervisor()
	if err != nil {
		removeAll(dir)
		if uid >= 0 {
			d.leases.release(uid, dir)
		}
		return driver.Status{}, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	rec := sandboxRecord{
		ID: spec.ID, Argv: spec.Argv, EnvNames: driver.EnvNames(spec.Env), WorkDir: spec.WorkDir,
		CPUMillicores: spec.CPUMillicores, MemoryMiB: spec.MemoryMiB, DiskMiB: spec.DiskMiB,
		Timeout: spec.Timeout, Grace: spec.GraceOrDefault(), OutputLimitBytes: spec.OutputLimitOrDefault(),
		UID: uid, GID: gid, Cgroup: sup.cgroup, CreatedAt: time.Now().UTC(), Warm: warm,
		Disk: d.iso.Disk && spec.DiskMiB > 0, Network: spec.Network,
	}
	if spec.Network == driver.NetworkPublic && len(d.iso.Namespaces) > 0 && uid >= 0 {
		link, err := sandboxnet.LinkFor(d.cfg.NetworkCIDR, uid-d.cfg.FirstUID)
		if err != nil {
			sup.discard()
			removeAll(dir)
			d.leases.release(uid, dir)
			return driver.Status{}, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
		}
		link.Allow, link.Deny = spec.EgressAllow, spec.EgressDeny
		rec.Link = &link
	}
	work := filepath.Join(dir, dirWork)
	err = writeJSON(filepath.Join(dir, fileSandbox), rec)
	if err == nil {
		err = os.Mkdir(work, 0o700)
	}
	if err == nil {
		err = os.Chmod(work, 0o700)
	}
	if err == nil && uid >= 0 {
		err = os.Chown(work, uid, gid)
	}

	if err != nil { // nothing ran: leave nothing behind
		sup.discard()

		removeAll(dir)
		if uid >= 0 {
			d.leases.release(uid, dir)
		}
		return driver.Status{}, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	l := launch{
		Dir: dir, Work: filepath.Join(work, spec.WorkDir), Spec: spec, UID: uid, GID: gid,
		Cgroup: rec.Cgroup, Rlimits: d.rlimits(spec), Warm: warm, Seccomp: d.iso.Seccomp,
		Disk: rec.Disk, DiskImages: filepath.Join(d.cfg.Dir, dirDiskImages),
		Link: rec.Link, NetworkCIDR: d.cfg.NetworkCIDR, NetLockDir: filepath.Dir(d.cfg.UIDLeaseDir),
		MaxConnections: d.cfg.MaxConnections,
	}
	if warm { // the claim brings them
		l.Work, l.Rlimits = "", nil
	}
	if !rec.Cgroup.IsZero() {
		l.CgroupLimits = d.cgroupLimits(spec)
	}
	if err := d.hand(ctx, dir, sup, l); err != nil {
		// A start that did not complete (ctx ended first, the supervisor failed) leaves
		// nothing running and a definite end: the supervisor, if it still runs, is killed,
		// and with it whatever it started.
		sup.ident.signal(unix.SIGKILL)
		sup.ident.waitGone(time.Now().Add(2 * time.Second))
		r, _ := d.read(spec.ID)
		d.killRest(r, time.Now().Add(2*time.Second))
		if !r.hasResult {
			writeJSON(filepath.Join(dir, fileResult), resultRecord{
				Reason: driver.ReasonFailed, Message: err.Error(), EndedAt: time.Now().UTC(), ExitCode: -1,
			})
		}
		rec.Cgroup.Remove()
	}
	st, err := d.status(spec.ID, true)
	switch {
	case err != nil:
	case warm:
		d.log.Info("sandbox warm", "sandbox", spec.ID, "state", st.State, "uid", uid)
	default:
		d.log.Info("sandbox started", "sandbox", spec.ID, "state", st.State, "pid", st.PID, "uid", uid,
			"program", spec.Argv[0], "env", driver.EnvNames(spec.Env))
	}
	return st, err
}

// rlimits returns the rlimits of a sandbox's processes: RLIMIT_NOFILE always, RLIMIT_AS for
// memory and RLIMIT_NPROC for processes where no cgroup controller limits them (RLIMIT_NPROC
// counts all processes of a user, so only with a user of its own).
func (d *Driver) rlimits(spec driver.Spec) []rlimit {
	r := []rlimit{{Resource: unix.RLIMIT_NOFILE, Value: uint64(d.cfg.MaxOpenFiles)}}
	if !d.iso.has("pids") && !d.iso.OwnUser {
		r = append(r, rlimit{Resource: unix.RLIMIT_NPROC, Value: uint64(d.cfg.MaxProcesses)})
	}
	if !d.iso.has("memory") && spec.MemoryMiB > 0 {
		r = append(r, rlimit{Resource: unix.RLIMIT_AS, Value: uint64(spec.MemoryMiB) << 20})
	}
	return r
}

// cgroupLimits returns what the sandbox's cgroup limits, by the controllers the driver has.
func (d *Driver) cgroupLimits(spec driver.Spec) cgroups.Limits {
	var l cgroups.Limits
	if d.iso.has("cpu") {
		l.CPUMillicores = spec.CPUMillicores
	}
	if d.iso.has("memory") {
		l.MemoryBytes = spec.MemoryMiB << 20
	}
	if d.iso.has("pids") {
		l.Processes = int64(d.cfg.MaxProcesses)
	}
	return l
}

// hand gives l to the supervisor sup, records its identity in the sandbox's directory, and
// waits for its report: the sandbox's process runs, or could not be started (recorded as its
// result either way).
func (d *Driver) hand(ctx context.Context, dir string, sup *supervisorProc, l launch) error {
	data, err := json.Marshal(l)
	if err != nil {
		sup.discard()
		return err
	}
	if err := writeJSON(filepath.Join(dir, fileSupervisor), sup.ident); err != nil {
		sup.discard()
		return fmt.Errorf("record the supervisor: %w", err)
	}
	_, werr := sup.stdin.Write(data)
	werr = errors.Join(werr, sup.stdin.Close())
	if dl, ok := ctx.Deadline(); ok {
		sup.reportFile.SetReadDeadline(dl)
	}
	rerr := sup.ready()
	var answer []byte
	if rerr == nil {
		answer, rerr = io.ReadAll(sup.report)
	}
	sup.reportFile.Close()
	if rerr != nil && !errors.Is(rerr, io.ErrUnexpectedEOF) {
		return fmt.Errorf("wait for the supervisor's report: %w", rerr)
	}
	var r report
	if len(answer) == 0 || json.Unmarshal(answer, &r) != nil {
		if werr != nil {
			return fmt.Errorf("hand the sandbox to its supervisor (pid %d): %w", sup.ident.PID, werr)
		}
		return fmt.Errorf("the supervisor (pid %d) ended without starting the sandbox (see %s)", sup.ident.PID, filepath.Join(dir, fileLog))
	}
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}

// Status implements driver.Driver.
func (d *Driver) Status(ctx context.Context, id string) (driver.Status, error) {
	return d.status(id, false)
}

// Stats implements driver.Driver.
func (d *Driver) Stats(ctx context.Context, id string) (driver.Stats, error) {
	st, err := d.status(id, false)
	return st.Stats, err
}

// Wait implements driver.Driver: it watches the sandbox's supervisor (through a pidfd), which
// records the end before it exits.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Status, error) {
	for {
		st, err := d.status(id, false)
		if err != nil || st.Ended() {
			return st, err
		}
		var sup Ident
		if ok, err := readJSON(filepath.Join(d.dir(id), fileSupervisor), &sup); !ok || err != nil {
			return st, fmt.Errorf("sandbox %s: no supervisor record: %v", id, err)
		}
		for !sup.waitGone(time.Now().Add(100 * time.Millisecond)) {
			if err := ctx.Err(); err != nil {
				return st, err
			}
		}
	}
}

// Stop implements driver.Driver: SIGTERM to the sandbox's supervisor, which sends SIGTERM to the
// sandbox's process group and SIGKILL to all of it after the grace.
func (d *Driver) Stop(ctx context.Context, id string) (driver.Status, error) {
	st, err := d.status(id, false)
	if err != nil || st.Ended() {
		return st, err
	}
	if err := d.signalSupervisor(id, unix.SIGTERM); err != nil {
		return st, err
	}
	return d.Wait(ctx, id)
}

func (d *Driver) signalSupervisor(id string, sig syscall.Signal) error {
	var sup Ident
	if ok, err := readJSON(filepath.Join(d.dir(id), fileSupervisor), &sup); !ok || err != nil {
		return fmt.Errorf("sandbox %s: no supervisor record: %v", id, err)
	}
	return sup.signal(sig)
}

// Output implements driver.Driver.
func (d *Driver) Output(ctx context.Context, id string) (driver.Output, error) {
	r, err := d.read(id)
	if err != nil {
		return driver.Output{}, err
	}
	if r.dirMissing || !r.hasRec {
		return driver.Output{}, notFound(id)
	}
	limit := r.rec.OutputLimitBytes
	read := func(name string) ([]byte, bool, error) {
		f, err := os.Open(filepath.Join(r.dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, limit+int64(len(driver.TruncationMarker(limit)))))
		return b, int64(len(b)) > limit, err
	}
	var o driver.Output
	var err1, err2 error
	o.Stdout, o.StdoutTruncated, err1 = read(fileStdout)
	o.Stderr, o.StderrTruncated, err2 = read(fileStderr)
	return o, errors.Join(err1, err2)
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context) ([]driver.Status, error) {
	ents, err := os.ReadDir(d.cfg.Dir)
	if err != nil {
		return nil, err
	}
	var out []driver.Status
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !driver.ValidID(e.Name()) {
			continue
		}
		st, err := d.status(e.Name(), false)
		if cubefleet.IsCode(err, cubefleet.CodeNotFound) { // removed meanwhile
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
}

// Remove implements driver.Driver.
func (d *Driver) Remove(ctx context.Context, id string) error {
	if _, err := d.Stop(ctx, id); err != nil {
		return err
	}
	unlock := d.lockID(id)
	defer unlock()
	r, err := d.read(id)
	if r.dirMissing {
		return notFound(id)
	}
	if err != nil && !r.hasRec {
		return err
	}
	if left := d.killRest(r, time.Now().Add(2*time.Second)); len(left) > 0 {
		return fmt.Errorf("remove sandbox %s: processes %v survive SIGKILL", id, left)
	}
	if err := r.rec.Cgroup.Remove(); err != nil {
		return err
	}

	if err := removeAll(r.dir); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	if r.rec.UID >= 0 {
		d.leases.release(r.rec.UID, r.dir)
	}
	d.mu.Lock()
	delete(d.idMu, id)
	d.mu.Unlock()
	d.log.Info("sandbox removed", "sandbox", id)
	return nil
}

// StopAll implements driver.Driver.
func (d *Driver) StopAll(ctx context.Context) error {
	d.dropSpares()
	list, err := d.List(ctx)
	if err != nil && list == nil {
		return err
	}
	var wg sync.WaitGroup
	for _, st := range list {
		if st.Ended() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.Stop(ctx, st.ID)
		}()
	}
	wg.Wait()
	// What ctx left running is killed now, and so is anything a sandbox left behind.
	var survivors []string
	deadline := time.Now().Add(5 * time.Second)
	for _, st := range list {
		r, err := d.read(st.ID)
		if r.dirMissing || err != nil && !r.hasRec {
			continue
		}
		left := d.killRest(r, deadline)
		if r.hasSup && !r.sup.waitGone(deadline) {
			r.sup.signal(unix.SIGKILL)
			if !r.sup.waitGone(time.Now().Add(time.Second)) {
				left = append(left, r.sup.PID)
			}
		}
		if len(left) > 0 {
			survivors = append(survivors, fmt.Sprintf("%s: processes %v", st.ID, left))
		}
		if _, err := d.status(st.ID, false); err != nil {
			survivors = append(survivors, err.Error())
		}
	}
	if len(survivors) > 0 {
		return fmt.Errorf("stop all sandboxes: %s", strings.Join(survivors, "; "))
	}
	return nil
}

// Close implements driver.Driver. It also removes the driver's cgroup parent when no sandbox
// holds a cgroup in it any more.
func (d *Driver) Close() error {
	d.dropSpares()
	d.iso.Cgroups.RemoveEmpty(d.cfg.CgroupParent, sandboxCgroupPrefix)
	// The parent, then the directories above it (shared with other agents: removed only once
	// empty).
	d.iso.Cgroups.RemoveParent(d.cfg.CgroupParent)
	return d.lock.Close()
}
