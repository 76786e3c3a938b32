package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on every Linux
// architecture cubefleet runs on (x86_64, aarch64).
const clockTicks = 100

// procStat is what the process driver reads of /proc/<pid>/stat (proc(5)).
type procStat struct {
	State      byte  // R, S, D, Z, ...
	PPID       int   // parent process
	PGID       int   // process group
	SID        int   // session
	CPUTicks   int64 // utime + stime + cutime + cstime, in clock ticks
	StartTicks int64 // when it started, in clock ticks after boot: with the pid, its identity
	RSSPages   int64 // resident set, in pages
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	st, err := parseStat(data)
	if err != nil {
		return st, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// parseStat parses the content of a /proc/<pid>/stat file. The command name, in parentheses, is
// the sandbox's to choose (prctl PR_SET_NAME: spaces, parentheses, anything): it is skipped by
// looking for the last ')'.
func parseStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errors.New("no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 22", len(f))
	}
	n := func(k int) int64 { // field k of proc(5), counted from 1
		v, _ := strconv.ParseInt(f[k-3], 10, 64)
		return v
	}
	return procStat{
		State:      f[0][0],
		PPID:       int(n(4)),
		PGID:       int(n(5)),
		SID:        int(n(6)),
		CPUTicks:   n(14) + n(15) + n(16) + n(17),
		StartTicks: n(22),
		RSSPages:   n(24),
	}, nil
}

// readUID returns the real user id of process pid (the first of /proc/<pid>/status's "Uid:"
// line), and whether it is a zombie (ended, not yet collected by its parent).
func readUID(pid int) (uid int, zombie bool, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1, false, err
	}
	uid = -1
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && f[0] == "State:":
			zombie = f[1] == "Z" || f[1] == "X"
		case len(f) > 1 && f[0] == "Uid:":
			uid, err = strconv.Atoi(f[1])
			return uid, zombie, err
		}
	}
	return -1, false, fmt.Errorf("/proc/%d/status has no Uid line", pid)
}

// bootID returns this boot's id (/proc/sys/kernel/random/boot_id): a process identity recorded
// before a reboot never matches a process after it.
func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// Ident identifies one process for as long as the host runs: a pid alone is recycled, a pid with
// its start time (and the boot) is not.
type Ident struct {
	PID        int    `json:"pid"`
	StartTicks int64  `json:"startTicks"` // /proc/<pid>/stat field 22
	BootID     string `json:"bootId"`
}

// identOf returns the identity of the running process pid.
func identOf(pid int) (Ident, error) {
	st, err := readStat(pid)
	if err != nil {
		return Ident{}, err
	}
	return Ident{PID: pid, StartTicks: st.StartTicks, BootID: bootID()}, nil
}

// alive reports whether the process id names still runs: same boot, same pid, same start time,
// and not a zombie (a zombie has ended; only its parent has not collected it yet).
func (id Ident) alive() bool {
	if id.PID <= 0 || id.BootID != bootID() {
		return false
	}
	st, err := readStat(id.PID)
	return err == nil && st.StartTicks == id.StartTicks && st.State != 'Z' && st.State != 'X'
}

// open returns a pidfd (pidfd_open(2)) for the process id names, checked to be that very
// process after it was opened, so that signals sent through it cannot reach a recycled pid.
// It fails with os.ErrProcessDone when the process is gone.
func (id Ident) open() (int, error) {
	if !id.alive() {
		return -1, os.ErrProcessDone
	}
	fd, err := unix.PidfdOpen(id.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, os.ErrProcessDone
	}
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	if !id.alive() { // the pid was recycled between the check and the open
		unix.Close(fd)
		return -1, os.ErrProcessDone
	}
	return fd, nil
}

// signal sends sig to the process id names; a process that is gone is no error.
func (id Ident) signal(sig syscall.Signal) error {
	fd, err := id.open()
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %d: %w", id.PID, err)
	}
	return nil
}

// waitGone blocks until the process id names has ended, or until the deadline passes (returning
// false). It polls the process's pidfd, which becomes readable when the process ends.
func (id Ident) waitGone(deadline time.Time) bool {
	fd, err := id.open()
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return !id.alive()
		}
		ms := min(left.Milliseconds()+1, 100)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(ms))
		if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) || !id.alive() {
			return true
		}
	}
}

// pids returns every process id on the host (the numeric entries of /proc).
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// member reports whether process pid is a live process of a sandbox tracked by uid (a user id
// only the sandbox runs as; -1 when it has none of its own) or else by its session sid. Zombies
// are not: they have ended.
func member(pid, uid, sid int) bool {
	if uid >= 0 {
		u, zombie, err := readUID(pid)
		return err == nil && u == uid && !zombie
	}
	st, err := readStat(pid)
	return err == nil && sid > 0 && st.SID == sid && st.State != 'Z'
}

// members returns the processes of a sandbox tracked by uid or sid (see member).
func members(uid, sid int) []int {
	var out []int
	self := os.Getpid()
	for _, pid := range pids() {
		if pid != self && member(pid, uid, sid) {
			out = append(out, pid)
		}
	}
	return out
}

// killMembers sends SIGKILL to every process of a sandbox tracked by uid or sid until none is
// left, or until the deadline (returning the pids still there). Each kill goes through a pidfd
// opened after the process was matched and matched again, so no recycled pid is hit.
func killMembers(uid, sid int, deadline time.Time) []int {
	for {
		left := members(uid, sid)
		if len(left) == 0 {
			return nil
		}
		for _, pid := range left {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if member(pid, uid, sid) {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			unix.Close(fd)
		}
		if time.Now().After(deadline) {
			return members(uid, sid)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// usage sums the CPU time and resident memory of the given processes, in clock ticks and
// bytes.
func usage(pids []int) (cpuTicks, rssBytes int64) {
	page := int64(os.Getpagesize())
	for _, pid := range pids {
		if st, err := readStat(pid); err == nil {
			cpuTicks += st.CPUTicks
			rssBytes += st.RSSPages * page
		}
	}
	return cpuTicks, rssBytes
}

// ticks converts clock ticks to a duration.
func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
