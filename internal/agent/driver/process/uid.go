package process

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/cubefleet/cubefleet/internal/atomicfile"
)

// uidLeases hands out the user ids of a range, one per running sandbox, through lease files in
// a directory shared by every agent of the host (<dir>/<uid>, holding the sandbox directory it
// is lent to): two agents on one host never give the same uid to two sandboxes, and neither
// does one agent after a restart. Every change is made under an flock of <dir>/.lock, which the
// host's agents share (lock). A lease ends when its sandbox ends (Driver.retire) or its directory is
// removed; one whose sandbox directory is gone or holds the sandbox's end (result.json) is
// stale, and taken over by the next acquire.
type uidLeases struct {
	dir          string
	first, count int
	mu           sync.Mutex
	next         int // offset of the next uid to try: round robin, so a freed uid rests a while
}

// hostLockFile is the lock file in the lease directory that every agent of the host holds
// (flock(2), exclusive) while it reads or changes leases, so that two agents never both take
// over one stale lease.
const hostLockFile = ".lock"

// lock takes the in-process mutex and the host-wide lock of the lease directory (creating the
// directory when missing), and returns the function that releases both.
func (l *uidLeases) lock() (func(), error) {
	l.mu.Lock()
	if err := atomicfile.MkdirAll(l.dir, 0o700); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(l.dir, hostLockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		for err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX); errors.Is(err, syscall.EINTR); {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	return func() { f.Close(); l.mu.Unlock() }, nil
}

// acquire leases a free uid of the range to the sandbox directory owner, which must exist
// already. When every uid is leased, a stale lease (see stale: its sandbox ended or its
// directory is gone) is taken over. links is, for a public sandbox, how many links its sandbox
// network has (sandboxnet.Links): the uid's link (its offset modulo links, sandboxnet.LinkFor)
// must then be no other leased uid's, so that it never takes a running sandbox's veth and
// addresses; 0 for a sandbox without a link.
func (l *uidLeases) acquire(owner string, links int) (int, error) {
	// A lease names its directory, and a lease whose directory does not exist is stale: leasing
	// before the directory exists would let another agent take the lease over at once.
	if _, err := os.Stat(owner); err != nil {
		return -1, fmt.Errorf("sandbox user leases: the sandbox directory must exist before its lease: %w", err)
	}
	unlock, err := l.lock()
	if err != nil {
		return -1, fmt.Errorf("sandbox user leases: %w", err)
	}
	defer unlock()
	// A free uid first; only when there is none, a stale lease is taken over (so that a uid
	// rests a while after its sandbox ended).
	linkTaken := false
	for _, takeOver := range []bool{false, true} {
		for i := 0; i < l.count; i++ {
			uid := l.first + (l.next+i)%l.count
			if l.linkHeld(uid, links) {
				linkTaken = true
				continue
			}
			path := filepath.Join(l.dir, strconv.Itoa(uid))
			err := l.create(path, owner)
			if errors.Is(err, fs.ErrExist) && takeOver && l.stale(path) {
				os.Remove(path)
				err = l.create(path, owner)
			}
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				return -1, fmt.Errorf("sandbox user leases: %w", err)
			}
			l.next = (l.next + i + 1) % l.count
			return uid, nil
		}
	}
	if linkTaken {
		return -1, fmt.Errorf("every link of the sandbox network (%d) is in use by a sandbox (the uids from %d to %d share them): stop sandboxes, or widen the sandbox network (--network-cidr)", links, l.first, l.first+l.count-1)
	}
	return -1, fmt.Errorf("all %d sandbox user ids from %d to %d are in use: remove ended sandboxes, or widen the range", l.count, l.first, l.first+l.count-1)
}

func (l *uidLeases) create(path, owner string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(owner + "\n")
	return errors.Join(err, f.Close())
}

// holder returns the sandbox directory the lease at path is lent to, "" when unknown.
func (l *uidLeases) holder(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// linkMates returns the uids of the range other than uid whose link (offset modulo links,
// sandboxnet.LinkFor) is uid's; none when links is 0 or every uid has a link of its own.
func (l *uidLeases) linkMates(uid, links int) []int {
	if links <= 0 || links >= l.count || uid < l.first || uid >= l.first+l.count {
		return nil
	}
	var out []int
	for u := l.first + (uid-l.first)%links; u < l.first+l.count; u += links {
		if u != uid {
			out = append(out, u)
		}
	}
	return out
}

// linkHeld reports whether another uid of uid's link (linkMates) is leased, to a sandbox of any
// network: its lease file exists.
func (l *uidLeases) linkHeld(uid, links int) bool {
	for _, u := range l.linkMates(uid, links) {
		if _, err := os.Lstat(filepath.Join(l.dir, strconv.Itoa(u))); err == nil {
			return true
		}
	}
	return false
}

// linkLentElsewhere reports whether uid, or another uid of its link (linkMates), is lent now to
// a sandbox directory other than owner, of a sandbox that has not ended (lentElsewhere): the
// link named after uid may be that sandbox's.
func (l *uidLeases) linkLentElsewhere(uid, links int, owner string) bool {
	for _, u := range append([]int{uid}, l.linkMates(uid, links)...) {
		if l.lentElsewhere(u, owner) {
			return true
		}
	}
	return false
}

// lentElsewhere reports whether uid is lent now to a sandbox directory other than owner, of a
// sandbox that has not ended (any agent's or driver's of the host). It only reads.
func (l *uidLeases) lentElsewhere(uid int, owner string) bool {
	h := l.holder(filepath.Join(l.dir, strconv.Itoa(uid)))
	if h == "" || h == owner || !filepath.IsAbs(h) {
		return false
	}
	if _, err := os.Lstat(h); err != nil {
		return false
	}
	_, err := os.Lstat(filepath.Join(h, fileResult))
	return err != nil
}

// stale reports whether the lease at path belongs to a sandbox that is gone (its directory
// removed) or ended (its directory holds its end, result.json: whoever recorded it killed
// every process of the sandbox first, and nothing runs as its uid any more). An ended sandbox's
// directory is closed to other users (0700) before its uid is lent again, so that the next
// sandbox of that uid cannot reach the files the last one left in its work directory.
func (l *uidLeases) stale(path string) bool {
	h := l.holder(path)
	if h == "" || !filepath.IsAbs(h) {
		return false
	}
	if _, err := os.Lstat(h); errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if _, err := os.Lstat(filepath.Join(h, fileResult)); err != nil {
		return false
	}
	return closeDir(h) == nil
}

// closeDir makes an ended sandbox's directory 0700, so that no other user reaches its work
// directory (which stays its uid's) through it.
func closeDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm() == 0o700 {
		return nil
	}
	return os.Chmod(dir, 0o700)
}

// claim makes sure uid is leased to owner (a sandbox found again after a restart, or after a
// reboot emptied /run). It fails when another sandbox directory holds it.
func (l *uidLeases) claim(uid int, owner string) error {
	unlock, err := l.lock()
	if err != nil {
		return err
	}
	defer unlock()
	path := filepath.Join(l.dir, strconv.Itoa(uid))
	err = l.create(path, owner)
	if errors.Is(err, fs.ErrExist) {
		if h := l.holder(path); h != owner {
			return fmt.Errorf("uid %d is leased to %s", uid, h)
		}
		return nil
	}
	return err
}

// release ends owner's lease of uid (nothing when another directory holds it).
func (l *uidLeases) release(uid int, owner string) {
	unlock, err := l.lock()
	if err != nil {
		return
	}
	defer unlock()
	path := filepath.Join(l.dir, strconv.Itoa(uid))
	if l.holder(path) == owner {
		os.Remove(path)
	}
}

// accountsInRange returns the accounts of /etc/passwd whose uid is in [first, first+count): a
// sandbox given such a uid could read that account's files.
func accountsInRange(passwd string, first, count int) []string {
	f, err := os.Open(passwd)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if len(p) < 3 {
			continue
		}
		if uid, err := strconv.Atoi(p[2]); err == nil && uid >= first && uid < first+count {
			out = append(out, fmt.Sprintf("%s (uid %d)", p[0], uid))
		}
	}
	return out
}
