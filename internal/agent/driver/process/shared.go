package process

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
)

// What the process driver has that another driver of the same host reuses (the microvm driver
// runs each VM's VMM process as a leased user, identifies it across agent restarts, and words a
// sandbox's end the same way).

// UIDLeases are the host's leases of sandbox user ids (shared by every agent of the host and by
// both drivers): a sandbox directory holding an end (FileResult) gives its uid back.
type UIDLeases struct{ l *uidLeases }

// FileResult is the file of a sandbox directory that records its end: once it exists, the
// sandbox's uid lease is stale.
const FileResult = fileResult

// NewUIDLeases returns the leases of the ids first to first+count-1, kept in dir (created when
// missing; DefaultUIDLeaseDir for the host's).
func NewUIDLeases(dir string, first, count int) *UIDLeases {
	return &UIDLeases{l: &uidLeases{dir: dir, first: first, count: count}}
}

// Acquire leases a free uid to the sandbox directory owner (which must exist); links is, for a
// public sandbox, how many links its sandbox network has (sandboxnet.Links), so that the uid's
// link is no other leased uid's, and 0 for a sandbox without one. Errors say the range (or the
// links) is exhausted or the lease directory cannot be written.
func (u *UIDLeases) Acquire(owner string, links int) (int, error) { return u.l.acquire(owner, links) }

// Claim records again, after an agent restart, that uid is lent to owner.
func (u *UIDLeases) Claim(uid int, owner string) error { return u.l.claim(uid, owner) }

// LinkLentElsewhere reports whether uid, or another uid of its link (links: the sandbox
// network's, sandboxnet.Links), is lent now to a sandbox directory other than owner, of a
// sandbox that has not ended: the link named after uid (sandboxnet.LinkFor) is that sandbox's.
func (u *UIDLeases) LinkLentElsewhere(uid, links int, owner string) bool {
	return u.l.linkLentElsewhere(uid, links, owner)
}

// Release ends owner's lease of uid (a lease lent to another directory is left alone).
func (u *UIDLeases) Release(uid int, owner string) { u.l.release(uid, owner) }

// IdentOf returns the identity of the running process pid (its pid, start time and boot).
func IdentOf(pid int) (Ident, error) { return identOf(pid) }

// Alive reports whether the process id names still runs (same boot, pid and start time, not a
// zombie).
func (id Ident) Alive() bool { return id.alive() }

// Signal sends sig to the process id names, through a pidfd (never to a recycled pid); a
// process that is gone is no error.
func (id Ident) Signal(sig syscall.Signal) error { return id.signal(sig) }

// WaitGone blocks until the process id names has ended (true), or the deadline passed (false).
func (id Ident) WaitGone(deadline time.Time) bool { return id.waitGone(deadline) }

// CgroupParentFor is the default cgroup parent of the sandboxes of a driver on dir, under the
// controllers' hierarchies: DefaultCgroupParent/<the first 12 hex digits of dir's SHA-256>, so
// two drivers of one host (other directories) never share one.
func CgroupParentFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return DefaultCgroupParent + "/" + hex.EncodeToString(sum[:6])
}

// EndMessage returns the Reason and the message of a sandbox whose main process ended with ws:
// cause is "" (it ended by itself), ReasonTimeout, ReasonStopped or ReasonOOM (the kernel's
// OOM killer ended one of its processes); afterGrace that it was killed after ignoring SIGTERM
// for spec's grace.
func EndMessage(cause driver.Reason, ws unix.WaitStatus, afterGrace bool, spec driver.Spec) (driver.Reason, string) {
	return endMessage(cause, ws, afterGrace, spec)
}

// ProcessStats returns the CPU time and resident memory of the running processes pids, summed
// (a process that is gone counts nothing).
func ProcessStats(pids ...int) driver.Stats {
	cpu, rss := usage(pids)
	return driver.Stats{CPU: ticks(cpu), MemoryBytes: rss}
}

// LockDir takes a driver's exclusive lock on dir/.lock (flock(2), writing this process's id in
// it); a second driver on the same directory is refused, naming the process holding it.
func LockDir(dir string) (*os.File, error) { return lockDir(dir) }

// WriteRecord replaces path with v as JSON, atomically (renamed over it), mode 0600, without
// fsync: a sandbox's records must survive the agent, not the host (after a reboot every
// sandbox is lost anyway).
func WriteRecord(path string, v any) error { return writeJSON(path, v) }

// ReadRecord reads the JSON record at path into v; ok is false when the file does not exist.
func ReadRecord(path string, v any) (ok bool, err error) { return readJSON(path, v) }
