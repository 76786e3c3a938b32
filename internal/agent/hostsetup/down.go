package hostsetup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent"
)

// DownOptions tune Down.
type DownOptions struct {
	// Root, when set and not "/", stops the agent whose PID is in Root/run/cubefleet-agent.pid
	// instead of running systemctl.
	Root string
	// Out receives one line per step; nil discards.
	Out io.Writer
	// Systemctl runs systemctl; nil runs the real one.
	Systemctl Systemctl
	// Wait is how long to wait for a signalled agent to exit; 0 means 15 s.
	Wait time.Duration
	// Config is the agent's configuration: with the process runtime, once the agent stopped,
	// every sandbox in its Config.SandboxDir (under Root) is stopped too. Nil stops only the
	// agent.
	Config *agent.Config
	// SandboxWait bounds how long the sandboxes get between SIGTERM and SIGKILL; 0 means each
	// its own grace (its terminationGraceSeconds, at most MaxSandboxGrace).
	SandboxWait time.Duration
}

// MaxSandboxGrace is the longest grace a sandbox can have (terminationGraceSeconds 3600): agent
// down waits at most this long, and a little more, for the sandboxes it stops.
const MaxSandboxGrace = time.Hour

// Down is `cubefleet agent down`: it stops this node's agent (the control plane and the other
// nodes are not affected), then every sandbox it ran (with the process runtime and
// opt.Config), so that no process of the agent survives; it deletes no state. It finds the
// agent by its settings (findAgent): the PID in its PID file (opt.Config.PIDFile, else
// /run/cubefleet-agent.pid), else the process holding its state directory's agent.lock; a PID
// is signalled only when its process is a cubefleet agent that holds that lock (when the state
// directory has one). On the real system, an agent of the installed unit (or, when no agent is
// found, the installed settings) is stopped with `systemctl stop cubefleet-agent.service`, so
// that the unit does not start it again; another is sent SIGTERM and waited for (opt.Wait). Under
// Root every path is taken under it and systemctl is not used. The sandboxes are stopped
// through the process driver (its StopAll, with no spare supervisor): SIGTERM, then SIGKILL
// after their own grace (or opt.SandboxWait, when set and shorter); their uid leases end; the next
// agent reports their ends to the control plane. An agent that is not running is not an error;
// an agent that does not exit, or a sandbox process that survives, is.
func Down(ctx context.Context, opt DownOptions) error {
	if err := downAgent(ctx, opt); err != nil {
		return err
	}
	return downSandboxes(ctx, opt)
}

// downAgent stops the agent (see Down).
func downAgent(ctx context.Context, opt DownOptions) error {
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	if opt.Systemctl == nil {
		opt.Systemctl = runSystemctl
	}
	if opt.Wait <= 0 {
		opt.Wait = 15 * time.Second
	}
	pidFile, lockFile := rooted(opt.Root, PIDFilePath), ""
	if cfg := opt.Config; cfg != nil {
		if cfg.PIDFile != "" {
			pidFile = rooted(opt.Root, cfg.PIDFile)
		}
		lockFile = filepath.Join(rooted(opt.Root, cfg.StateDir), agent.LockFile)
	}
	found := findAgent(pidFile, lockFile)
	if real := opt.Root == "" || opt.Root == "/"; real {
		if _, err := os.Stat(UnitPath); err == nil {
			installed := opt.Config == nil || opt.Config.EnvFile == agent.InstalledEnvFile
			if found.pid == 0 && installed || found.pid != 0 && inUnit(found.pid) {
				if err := opt.Systemctl(ctx, "stop", UnitName); err != nil {
					return err
				}
				fmt.Fprintf(out, "Stopped %s (only this node's agent)\n", UnitName)
				return nil
			}
		}
	}
	if found.pid == 0 {
		fmt.Fprintf(out, "The agent is not running (%s)\n", found.why)
		if found.stalePIDFile {
			os.Remove(pidFile)
		}
		return nil
	}
	return stopAgent(ctx, found.pid, pidFile, opt.Wait, out)
}

// foundAgent is what findAgent found: the agent's PID, or 0 and why none.
type foundAgent struct {
	pid          int
	why          string // when pid is 0: what was looked at
	stalePIDFile bool   // the PID file names a process that is not the agent
}

// findAgent returns the agent of a PID file and a state directory's lock file ("" for none):
// the process in the PID file, else the one whose PID the lock file holds, as long as it is a
// live cubefleet agent (isAgentProcess) that has the lock file open while its lock is held. A PID
// that fails the check is never the agent, whatever the files say.
func findAgent(pidFile, lockFile string) foundAgent {
	lockHeld := lockFile != "" && isLocked(lockFile)
	lockExists := false
	if lockFile != "" {
		_, err := os.Stat(lockFile)
		lockExists = err == nil
	}
	verified := func(pid int) bool {
		if !isAgentProcess(pid) {
			return false
		}
		// An agent of this state directory holds its lock: a PID file that names another
		// agent (a recycled PID, another node's agent) is not this one.
		return !lockExists || lockHeld && hasOpen(pid, lockFile)
	}
	var why []string
	stale := false
	switch pid, err := readPID(pidFile); {
	case errors.Is(err, fs.ErrNotExist):
		why = append(why, "no "+pidFile)
	case err != nil:
		why = append(why, err.Error())
	case verified(pid):
		return foundAgent{pid: pid}
	default:
		why = append(why, fmt.Sprintf("process %d from %s is gone or is not a cubefleet agent; removed the stale PID file", pid, pidFile))
		stale = true
	}
	if lockFile != "" {
		if pid, err := readPID(lockFile); err == nil && lockHeld && verified(pid) {
			return foundAgent{pid: pid}
		}
		if lockHeld {
			why = append(why, "the process holding "+lockFile+" is not a cubefleet agent")
		} else {
			why = append(why, "no agent holds "+lockFile)
		}
	}
	return foundAgent{why: strings.Join(why, "; "), stalePIDFile: stale}
}

// readPID reads the process ID a PID file or lock file holds.
func readPID(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s does not hold a process ID; remove it", path)
	}
	return pid, nil
}

// isLocked reports whether some process holds an flock on path (an exclusive lock of our own
// cannot be taken; one taken is released at once).
func isLocked(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// hasOpen reports whether process pid has the file at path open (one of /proc/<pid>/fd is it).
func hasOpen(pid int, path string) bool {
	want, err := os.Stat(path)
	if err != nil {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && os.SameFile(fi, want) {
			return true
		}
	}
	return false
}

// inUnit reports whether process pid runs in the installed unit's cgroup.
func inUnit(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && bytes.Contains(data, []byte("/"+UnitName))
}

// stopAgent sends SIGTERM to the agent pid and waits for it to exit, then removes its PID file
// (when it still names it).
func stopAgent(ctx context.Context, pid int, pidFile string, wait time.Duration, out io.Writer) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop process %d: %w", pid, err)
	}
	deadline := time.Now().Add(wait)
	for isAgentProcess(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent (process %d) did not stop within %s of SIGTERM", pid, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if p, err := readPID(pidFile); err == nil && p == pid {
		os.Remove(pidFile)
	}
	fmt.Fprintf(out, "Stopped the agent (process %d; only this node's agent)\n", pid)
	return nil
}

// isAgentProcess reports whether pid is a live (not zombie) process, other than this one, whose
// command line runs `agent` (as `cubefleet agent` and `cubefleet agent run` do).
func isAgentProcess(pid int) bool {
	if pid == os.Getpid() {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == "agent" {
			return true
		}
	}
	return false
}

// downSandboxes stops every sandbox (processes, or microVMs) in opt.Config.SandboxDir (under
// opt.Root), once the agent no longer holds the directory.
func downSandboxes(ctx context.Context, opt DownOptions) error {
	cfg := opt.Config
	if cfg == nil {
		return nil
	}
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	wait := opt.SandboxWait
	if wait <= 0 {
		wait = MaxSandboxGrace + 10*time.Second // each sandbox's own grace ends its stop first
	}
	c := *cfg
	c.SandboxDir = rooted(opt.Root, cfg.SandboxDir)
	if _, err := os.Stat(c.SandboxDir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "No sandboxes to stop (no %s)\n", c.SandboxDir)
		return nil
	}
	d, err := c.SandboxDriver(ctx, nil)
	if err != nil {
		return fmt.Errorf("stop the sandboxes: %w", err)
	}
	defer d.Close()
	list, _ := d.List(ctx)
	live := 0
	for _, st := range list {
		if !st.Ended() {
			live++
		}
	}
	sctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := d.StopAll(sctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "Stopped %s in %s (the next agent reports their ends)\n", cubefleet.Count(live, "sandbox", "sandboxes"), c.SandboxDir)
	return nil
}
