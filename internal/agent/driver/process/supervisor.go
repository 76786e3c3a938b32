package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/sandboxnet"
	"github.com/cubefleet/cubefleet/internal/agent/workdisk"
)

// The names the binary is re-executed under (its argv[0]) to act as a sandbox's supervisor or
// as the exec stage that becomes the sandbox's process; `ps` shows them.
const (
	supervisorArg0 = "cubefleet-sandbox-supervisor"
	stageArg0      = "cubefleet-sandbox-exec"
)

// oomPoll is how often a running sandbox with a memory limit is checked for an OOM kill.
const oomPoll = 100 * time.Millisecond

// maxLaunchBytes bounds what a supervisor reads from the driver: a spec with its environment.
const maxLaunchBytes = 16 << 20

// MaybeRunSupervisor runs the hidden modes of the binary and exits when this process was
// started in one of them by the process driver (as a sandbox's supervisor, or as the exec stage
// that becomes the sandbox's process, told apart by argv[0]); otherwise it returns at once.
// Call it first thing in main (and in TestMain of tests that start sandboxes): the driver
// re-executes the running binary (/proc/self/exe) for both.
func MaybeRunSupervisor() {
	switch os.Args[0] {
	case supervisorArg0:
		os.Exit(runSupervisor())
	case stageArg0:
		os.Exit(runStage())
	case namespaceProbeArg0:
		os.Exit(runNamespaceProbe())
	}
}

// launch is what the driver hands a supervisor on its standard input. It holds the
// environment's values, which may be secrets: it only ever travels through that pipe.
type launch struct {
	Dir          string         `json:"dir"`  // the sandbox's directory
	Work         string         `json:"work"` // its working directory (the work directory, or Spec.WorkDir under it)
	Spec         driver.Spec    `json:"spec"`
	UID          int            `json:"uid"` // -1: the agent's own user
	GID          int            `json:"gid"`
	Cgroup       cgroups.Group  `json:"cgroup,omitzero"` // the supervisor's cgroup (its argument), zero for none
	CgroupLimits cgroups.Limits `json:"cgroupLimits"`
	Rlimits      []rlimit       `json:"rlimits,omitempty"`
	Seccomp      bool           `json:"seccomp,omitempty"` // the sandbox's program runs under the default seccomp profile
	// Disk gives the work directory a file system of its own of Spec.DiskMiB (made by the init
	// in the sandbox's mount namespace), copied from the empty one of its size in DiskImages.
	Disk       bool   `json:"disk,omitempty"`
	DiskImages string `json:"diskImages,omitempty"`
	// Link is a public sandbox's veth pair, set up by the supervisor into the init's network
	// namespace (sandboxnet), with the host's policy for NetworkCIDR (its lock in NetLockDir).
	Link        *sandboxnet.Link `json:"link,omitempty"`
	NetworkCIDR netip.Prefix     `json:"networkCIDR,omitzero"`
	NetLockDir  string           `json:"netLockDir,omitempty"`
	// MaxConnections is the host policy's connections per public sandbox (0: the default).
	MaxConnections int `json:"maxConnections,omitempty"`
	// Warm makes a warm sandbox (Driver.Warm): Spec has no Argv, Work and Rlimits are empty,
	// and the claim brings them (claimMsg).
	Warm bool `json:"warm,omitempty"`
}

// rlimit is one resource limit the exec stage sets (soft and hard) before it becomes the
// sandbox's program.
type rlimit struct {
	Resource int    `json:"resource"` // unix.RLIMIT_*
	Value    uint64 `json:"value"`
}

// report is the supervisor's answer to the driver, a line of JSON on fd 3 after the line
// "ready" (written once the supervisor and its exec stage wait for a launch): Error is set when
// it could not even record the sandbox's outcome; otherwise the records in the sandbox's
// directory say what happened.
type report struct {
	Error string `json:"error,omitempty"`
}

// stage is a pre-started exec stage: the process that becomes the sandbox's program once told
// what to run, with the pipes the supervisor holds of it.
type stage struct {
	pid    int
	instr  *os.File // write: the stageInstr
	status *os.File // read: EOF once the program runs (close-on-exec), else why it could not
	exit   *os.File // read, with namespaces: the main process's wait status, from the init; else nil
	stdout *os.File // read: the sandbox's stdout
	stderr *os.File // read: the sandbox's stderr
	// ended is how it ended, once collected (collect): from then on its pid may be another
	// process's, and nothing is sent to it.
	ended *unix.WaitStatus
}

// startStage starts the exec stage in a session of its own, with /dev/null for stdin and the
// write ends of two pipes for stdout and stderr, and SIGKILL as its parent-death signal. With a
// cgroup, it is created and the stage started right into its v2 directory (clone3
// CLONE_INTO_CGROUP), then moved into its v1 directories: moving a process through cgroup.procs
// waits for an RCU grace period, milliseconds, spent here before any sandbox needs the stage.
//
// With namespaces, the stage is started in new ones as the sandbox's init (runInit), which
// starts the stage proper (with userns, in a user namespace of its own) and reports the main
// process's end on a fifth pipe.
func startStage(cg cgroups.Group, namespaces, userns bool) (*stage, error) {
	sys := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	argv := []string{stageArg0}
	if namespaces {
		sys.Cloneflags = namespaceFlags
		argv = append(argv, initArg)
		if userns {
			argv = append(argv, userNamespaceArg)
		}
	}
	if !cg.IsZero() {
		if err := cg.Create(cgroups.Limits{}); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
	}
	if cg.V2 != "" {
		fd, err := unix.Open(cg.V2, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		defer unix.Close(fd)
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	var pipes [5][2]*os.File
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	outW, errW, instrR, statusW, exitW := pipes[0][1], pipes[1][1], pipes[2][0], pipes[3][1], pipes[4][1]
	files := []uintptr{devnull.Fd(), outW.Fd(), errW.Fd(), instrR.Fd(), statusW.Fd()}
	if namespaces {
		files = append(files, exitW.Fd())
	}
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{"GOMAXPROCS=1", "GOGC=off"}, // its own: fewer threads for exec to end
		Files: files,
		Sys:   sys,
	}
	pid, err := syscall.ForkExec("/proc/self/exe", argv, attr)
	moveIn := false
	if sys.UseCgroupFD && (errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.E2BIG)) {
		sys.UseCgroupFD, moveIn = false, true
		pid, err = syscall.ForkExec("/proc/self/exe", argv, attr)
	}
	for _, f := range []*os.File{devnull, outW, errW, instrR, statusW, exitW} {
		f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("start the exec stage: %w", err)
	}
	skip := cg.V2
	if moveIn { // a kernel without clone3 into a cgroup (before 5.7)
		skip = ""
	}
	if err := cg.Enter(pid, skip); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		unix.Wait4(pid, nil, 0, nil)
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if namespaces { // the init may now start the stage proper: it is in every cgroup
		if _, err := pipes[2][1].Write([]byte{initGo}); err != nil {
			unix.Kill(pid, unix.SIGKILL)
			unix.Wait4(pid, nil, 0, nil)
			return nil, fmt.Errorf("start the sandbox's init: %w", err)
		}
	}
	st := &stage{pid: pid, stdout: pipes[0][0], stderr: pipes[1][0], instr: pipes[2][1], status: pipes[3][0]}
	if namespaces {
		st.exit = pipes[4][0]
	} else {
		pipes[4][0].Close()
	}
	return st, nil
}

// ready waits until the stage waits for its instructions.
func (s *stage) ready() error {
	var b [1]byte
	if _, err := io.ReadFull(s.status, b[:]); err != nil || b[0] != stageReady {
		s.abort()
		return fmt.Errorf("the exec stage did not start (%v)", err)
	}
	return nil
}

// readyLine is the supervisor's first line to the driver: it and its exec stage are ready.
const readyLine = "ready\n"

// abort kills a stage that will not run anything (unless it ended already) and collects it.
func (s *stage) abort() {
	if s.ended == nil {
		unix.Kill(s.pid, unix.SIGKILL)
		s.collect(true)
	}
	for _, f := range []*os.File{s.instr, s.status, s.stdout, s.stderr, s.exit} {
		if f != nil {
			f.Close()
		}
	}
}

// collect collects the stage once it ended (block) or if it has ended already, and returns how
// it ended; ok is false when it still runs (or was collected by another wait).
func (s *stage) collect(block bool) (ws unix.WaitStatus, ok bool) {
	if s.ended != nil {
		return *s.ended, true
	}
	opts := unix.WNOHANG
	if block {
		opts = 0
	}
	for {
		pid, err := unix.Wait4(s.pid, &ws, opts, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid != s.pid {
			return ws, false
		}
		s.ended = &ws
		return ws, true
	}
}

// endedWithin collects the stage if it ends within d, and returns how it ended; ok is false
// when it still runs.
func (s *stage) endedWithin(d time.Duration) (ws unix.WaitStatus, ok bool) {
	if s.ended == nil {
		if fd, err := unix.PidfdOpen(s.pid, 0); err == nil {
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(d.Milliseconds()))
			unix.Close(fd)
		}
	}
	return s.collect(false)
}

// howEnded says how a process ended: "exited with code 2", "killed by SIGKILL".
func howEnded(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return "exited with code " + strconv.Itoa(ws.ExitStatus())
}

// runSupervisor is a sandbox's supervisor: started by the driver (often before any sandbox
// needs it) with the sandbox's cgroup as its argument ("" for none), then namespacesArg and
// userNamespaceArg when its sandbox gets them, it starts its exec stage
// in that cgroup, reads a launch on stdin, runs the sandbox through the stage, records its
// start, answers the driver on fd 3, then captures its output, enforces its timeout, stops it
// on SIGTERM, collects it and records its end. It outlives the agent.
func runSupervisor() int {
	// The sandbox's parent-death signal fires when the thread that started it ends: that is
	// this one, locked to the goroutine that lives as long as the supervisor.
	runtime.LockOSThread()
	// A known umask, whatever the agent's, set before this new process creates anything: its
	// files are the agent's alone (the records and output are 0600 anyway, the claim socket
	// is created private).
	unix.Umask(0o077)
	var cgroup cgroups.Group
	namespaces := len(os.Args) > 2 && os.Args[2] == namespacesArg
	userns := namespaces && len(os.Args) > 3 && os.Args[3] == userNamespaceArg
	if len(os.Args) > 1 && os.Args[1] != "" {
		if err := json.Unmarshal([]byte(os.Args[1]), &cgroup); err != nil {
			writeReport(os.NewFile(3, "report"), fmt.Errorf("the supervisor's cgroup argument: %w", err))
			return 1
		}
	}
	reportFile := os.NewFile(3, "report")
	stop := make(chan os.Signal, 4)
	signal.Notify(stop, syscall.SIGTERM)
	// Caught rather than ignored (even when inherited ignored), so that the sandbox does not
	// inherit them ignored.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	st, err := startStage(cgroup, namespaces, userns)
	if err == nil {
		err = st.ready()
	}
	if err != nil {
		cgroup.Remove()
		writeReport(reportFile, err)
		return 1
	}
	io.WriteString(reportFile, readyLine)
	var l launch
	err = json.NewDecoder(io.LimitReader(os.Stdin, maxLaunchBytes)).Decode(&l)
	if err == nil && !l.Cgroup.Equal(cgroup) {
		err = fmt.Errorf("the launch names the cgroup %v, this supervisor's is %v", l.Cgroup, cgroup)
	}
	if err != nil {
		st.abort()
		cgroup.Remove()
		if errors.Is(err, io.EOF) { // a spare the driver no longer needs
			return 0
		}
		writeReport(reportFile, fmt.Errorf("read the launch: %w", err))
		return 1
	}
	if f, err := os.OpenFile(filepath.Join(l.Dir, fileLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		unix.Dup2(int(f.Fd()), 2)
		f.Close()
	}
	s := &supervisor{l: l, st: st, namespaces: namespaces}
	if l.Warm {
		return s.warm(reportFile, stop)
	}
	return s.run(reportFile, stop)
}

func writeReport(f io.WriteCloser, err error) {
	var r report
	if err != nil {
		r.Error = err.Error()
	}
	json.NewEncoder(f).Encode(r)
	f.Close()
}

type supervisor struct {
	l          launch
	st         *stage
	namespaces bool // the stage is the sandbox's init, in namespaces of its own
	// disk is the work directory's file system, attached by begin for the init to mount; held
	// until the init's setup is over (released then).
	disk *workdisk.Disk

	stdout, stderr *os.File // the output files (begin)

	mu       sync.Mutex
	cpu      time.Duration // user+system CPU time of every process collected
	maxRSS   int64         // largest ru_maxrss collected, bytes
	reapDone chan struct{}
}

func (s *supervisor) path(name string) string { return filepath.Join(s.l.Dir, name) }

// fail records that the sandbox could not be started and answers the driver.
func (s *supervisor) fail(reportFile io.WriteCloser, cause error) int {
	s.st.abort()
	s.releaseDisk()
	s.l.Cgroup.Remove()
	err := writeJSON(s.path(fileResult), resultRecord{
		Reason: driver.ReasonFailed, Message: cause.Error(), EndedAt: time.Now().UTC(), ExitCode: -1,
	})
	writeReport(reportFile, err)
	return 0
}

// run carries out a launch of Start: the sandbox's process runs at once.
func (s *supervisor) run(reportFile io.WriteCloser, stop chan os.Signal) int {
	if err := s.begin(); err != nil {
		return s.fail(reportFile, err)
	}
	startedAt, err := s.execute()
	if err != nil {
		return s.fail(reportFile, err)
	}
	writeReport(reportFile, nil)
	return s.watch(startedAt, stop)
}

// begin creates the output files and writes the sandbox's limits into its cgroup, where the
// stage already waits.
func (s *supervisor) begin() error {
	var err1, err2 error
	s.stdout, err1 = os.OpenFile(s.path(fileStdout), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	s.stderr, err2 = os.OpenFile(s.path(fileStderr), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("create the output files: %w", err)
	}
	if err := s.l.Cgroup.Create(s.l.CgroupLimits); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if l := s.l.Link; l != nil && s.namespaces {
		if err := sandboxnet.EnsureHost(s.l.NetworkCIDR, s.l.NetLockDir, s.l.MaxConnections); err != nil {
			return fmt.Errorf("the public network: %w", err)
		}
		if err := l.Setup(s.st.pid); err != nil {
			return fmt.Errorf("the public network: %w", err)
		}
	}
	if s.l.Disk && s.namespaces {
		disk, err := workdisk.Images{Dir: s.l.DiskImages}.Attach(s.path(fileDisk), s.l.Spec.DiskMiB)
		if err != nil {
			return fmt.Errorf("the work directory's disk: %w", err)
		}
		s.disk = disk
	}
	return nil
}

// execute hands the stage what to run (s.l), waits for its exec and records the start
// (state.json). It returns when the sandbox's process started; an error says why it did not
// (nothing of it runs then).
func (s *supervisor) execute() (time.Time, error) {
	in := stageInstr{
		Supervisor: os.Getpid(), UID: s.l.UID, GID: s.l.GID, Work: s.l.Work,
		Argv: s.l.Spec.Argv, Env: s.l.Spec.Env, Rlimits: s.l.Rlimits, Seccomp: s.l.Seccomp,
	}
	if !s.l.Warm { // a warm sandbox's init was set up by become
		in.Sandbox = s.setup()
	}
	err := json.NewEncoder(s.st.instr).Encode(in)
	s.st.instr.Close()
	if err != nil {
		// Its end of the pipe is closed: it ended (a warm sandbox's stage while it waited for
		// the claim, killed from outside), and nothing of the command ran.
		if ws, ok := s.st.endedWithin(time.Second); ok {
			return time.Time{}, fmt.Errorf("the exec stage (pid %d) ended before it got the command (%s): nothing ran", s.st.pid, howEnded(ws))
		}
		return time.Time{}, fmt.Errorf("hand the spec to the exec stage: %w", err)
	}
	msg, _ := io.ReadAll(s.st.status)
	s.st.status.Close()
	s.releaseDisk()
	startedAt := time.Now().UTC()
	if len(msg) > 0 {
		return time.Time{}, errors.New(string(msg))
	}
	pid := s.st.pid
	proc, err := identOf(pid)
	if err != nil {
		// It ended already; its identity is only needed while it runs.
		proc = Ident{PID: pid, BootID: bootID()}
	}
	if err := writeJSON(s.path(fileState), stateRecord{Process: proc, StartedAt: startedAt}); err != nil {
		s.kill()
		return time.Time{}, fmt.Errorf("record the start: %w", err)
	}
	return startedAt, nil
}

// releaseDisk lets the work directory's loop device go with its mount in the sandbox's
// namespace, once the init's setup is over (it mounted it, or failed).
func (s *supervisor) releaseDisk() {
	if s.disk != nil {
		s.disk.Release()
	}
}

// watch runs a started sandbox to its end: it captures its output, enforces its timeout (from
// startedAt), stops it on SIGTERM, collects it and its orphans and records its end.
func (s *supervisor) watch(startedAt time.Time, stop chan os.Signal) int {
	stdout, stderr, pid := s.stdout, s.stderr, s.st.pid
	limit := s.l.Spec.OutputLimitOrDefault()
	var outBytes, errBytes int64
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); outBytes = capture(s.st.stdout, stdout, limit) }()
	go func() { defer copies.Done(); errBytes = capture(s.st.stderr, stderr, limit) }()

	exited := make(chan unix.WaitStatus, 1)
	s.reapDone = make(chan struct{})
	go s.reap(pid, exited)

	var timeoutC, graceC <-chan time.Time
	var oomC <-chan time.Time
	var oomTick *time.Ticker
	if s.l.CgroupLimits.MemoryBytes > 0 {
		oomTick = time.NewTicker(oomPoll)
		defer oomTick.Stop()
		oomC = oomTick.C
	}
	if t := s.l.Spec.Timeout; t > 0 {
		timeoutC = time.After(t - time.Since(startedAt))
	}
	var cause driver.Reason
	var killedAfterGrace bool
	grace := s.l.Spec.GraceOrDefault()
	terminate := func(why driver.Reason) {
		if cause != "" {
			return
		}
		cause = why
		unix.Kill(-pid, unix.SIGTERM)
		graceC = time.After(grace)
	}
	var ws unix.WaitStatus
wait:
	for {
		select {
		case <-stop:
			terminate(driver.ReasonStopped)
		case <-timeoutC:
			terminate(driver.ReasonTimeout)
		case <-graceC:
			killedAfterGrace = true
			s.kill()
		case <-oomC:
			// The sandbox went past its memory as a whole: the kernel ended one of its
			// processes, and the sandbox ends with it, at once (no grace: it has no memory).
			if s.l.Cgroup.Stats().OOMKills > 0 && cause == "" {
				cause, oomC = driver.ReasonOOM, nil
				s.kill()
			}
		case ws = <-exited:
			break wait
		}
	}
	if s.st.exit != nil { // the init's report of how the main process ended
		if b, _ := io.ReadAll(s.st.exit); len(b) > 0 {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				ws = unix.WaitStatus(n)
			}
		}
	}
	endedAt := time.Now().UTC()
	// The sandbox ends with its main process: whatever it left behind goes too.
	s.kill()
	waitTimeout(&copies, 2*time.Second)
	s.st.stdout.Close()
	s.st.stderr.Close()
	stdout.Close()
	stderr.Close()
	select {
	case <-s.reapDone:
	case <-time.After(time.Second):
	}

	res := resultRecord{EndedAt: endedAt, ExitCode: -1, StdoutBytes: outBytes, StderrBytes: errBytes}
	switch {
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.Signal = unix.SignalName(ws.Signal())
	}
	s.mu.Lock()
	res.Stats = driver.Stats{CPU: s.cpu, PeakMemoryBytes: s.maxRSS}
	s.mu.Unlock()
	if l := s.l.Link; l != nil { // it also goes with the namespace
		l.Teardown()
	}
	// With a cgroup, the figures are the whole sandbox's, processes not collected here (of
	// another session, or still in the kernel's hands) included.
	if cg := s.l.Cgroup; !cg.IsZero() {
		cs := cg.Stats()
		if cs.CPU >= 0 {
			res.Stats.CPU = cs.CPU
		}
		if cs.PeakMemoryBytes >= 0 {
			res.Stats.PeakMemoryBytes = cs.PeakMemoryBytes
		}
		if cs.OOMKills > 0 && cause == "" {
			cause = driver.ReasonOOM
		}
		if err := cg.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	res.Reason, res.Message = endMessage(cause, ws, killedAfterGrace, s.l.Spec)
	if err := writeJSON(s.path(fileResult), res); err != nil {
		fmt.Fprintf(os.Stderr, "record the end of the sandbox: %v\n", err)
		return 1
	}
	return 0
}

// endMessage returns the Reason and the message a sandbox ended with. A stop or timeout names
// SIGTERM once: "killed by SIGTERM", or "after SIGTERM, exited with code 0" for a process that
// handled it.
func endMessage(cause driver.Reason, ws unix.WaitStatus, afterGrace bool, spec driver.Spec) (driver.Reason, string) {
	how := howEnded(ws)
	termed := ws.Signaled() && ws.Signal() == unix.SIGTERM
	if afterGrace {
		how = fmt.Sprintf("killed by SIGKILL after ignoring SIGTERM for %s", spec.GraceOrDefault())
	} else if (cause == driver.ReasonTimeout || cause == driver.ReasonStopped) && !termed {
		how = "after SIGTERM, " + how
	}
	switch cause {
	case driver.ReasonOOM:
		return cause, fmt.Sprintf("oom: the sandbox went past its memory limit of %d MiB; the kernel's OOM killer ended a process of it, and the sandbox ended with it (its main process %s)", spec.MemoryMiB, how)
	case driver.ReasonTimeout:
		return cause, fmt.Sprintf("timeout after %s: %s", spec.Timeout, how)
	case driver.ReasonStopped:
		return cause, "stopped: " + how
	}
	return driver.ReasonExited, how
}

// reap collects every child of the supervisor (the sandbox's main process, and as the
// subreaper any orphan of its tree), adding up their CPU time and peak memory, and sends the
// main process's status on exited.
func (s *supervisor) reap(main int, exited chan<- unix.WaitStatus) {
	defer close(s.reapDone)
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, 0, &ru)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		s.mu.Lock()
		s.cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		s.maxRSS = max(s.maxRSS, ru.Maxrss*1024)
		s.mu.Unlock()
		if pid == main {
			exited <- ws
		}
	}
}

// kill sends SIGKILL to everything of the sandbox: its cgroup, its process group (unless its
// stage, which leads it, was collected: the group's id may be another's by now), and every
// process of its own user (or, without one, of its session).
func (s *supervisor) kill() {
	pid := s.st.pid
	deadline := time.Now().Add(2 * time.Second)
	if s.st.ended == nil {
		unix.Kill(-pid, unix.SIGKILL)
	}
	s.l.Cgroup.Kill(deadline)
	if s.l.UID >= 0 {
		killMembers(s.l.UID, -1, deadline)
	} else {
		killMembers(-1, pid, deadline)
	}
}

// capture copies a sandbox's output stream from r to the file w until r ends: the first limit
// bytes, then driver.TruncationMarker once, and the rest is read and discarded so the sandbox
// never blocks on a full pipe. It returns how many bytes the sandbox wrote.
func capture(r io.Reader, w io.Writer, limit int64) int64 {
	buf := make([]byte, 64<<10)
	var total, kept int64
	marked := false
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total += int64(n)
			if k := min(int64(n), limit-kept); k > 0 {
				w.Write(buf[:k])
				kept += k
			}
			if total > limit && !marked {
				io.WriteString(w, driver.TruncationMarker(limit))
				marked = true
			}
		}
		if err != nil {
			return total
		}
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}
