package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
)

// Warm sandboxes: a supervisor and its exec stage started for a sandbox ahead of its command.
// The stage has taken the sandbox's user, in the sandbox's cgroup (with its limits) and session,
// and waits; the supervisor listens on the sandbox's claim socket (<dir>/<id>/claim.sock, mode
// 0600, the agent's user; it also checks the caller's uid), where a claim hands it the command,
// environment, working directory, timeout, grace and output limit. Everything after the claim
// is a started sandbox's life. The socket, unlike the pipe a spare gets its launch on, outlives
// the agent: a warm sandbox made before an agent restart is claimed by the next one.

// claimMsg is what Claim sends a warm sandbox's supervisor. It holds the environment's values,
// which may be secrets: it only ever travels through the claim socket.
type claimMsg struct {
	Work    string      `json:"work"` // the working directory (the work directory, or Spec.WorkDir under it)
	Spec    driver.Spec `json:"spec"` // the claim's Argv, Env, Timeout, Grace and OutputLimitBytes, the warm sandbox's limits
	Rlimits []rlimit    `json:"rlimits,omitempty"`
}

// claimTimeout bounds how long a supervisor waits for a claim's message once the driver
// connected, and how long Claim waits for a claim another driver handed over to settle.
const claimTimeout = 10 * time.Second

// Warm implements driver.Driver.
func (d *Driver) Warm(ctx context.Context, spec driver.Spec) (driver.Status, error) {
	if err := spec.ValidateWarm(); err != nil {
		return driver.Status{}, err
	}
	return d.create(ctx, spec, true)
}

// Claim implements driver.Driver.
func (d *Driver) Claim(ctx context.Context, spec driver.Spec) (driver.Status, error) {
	if err := spec.Validate(); err != nil {
		return driver.Status{}, err
	}
	unlock := d.lockID(spec.ID)
	defer unlock()
	st, err := d.status(spec.ID, true)
	if err != nil {
		return st, err
	}
	r, err := d.read(spec.ID)
	if err != nil {
		return st, err
	}
	switch {
	case st.State == driver.StateWarm:
		// Waiting for its claim (also when one was handed over before an agent restart and
		// never arrived: a supervisor that took one no longer listens).
	case r.rec.Warm && !r.rec.ClaimedAt.IsZero():
		return st, nil // claimed before: running, or ended since
	case !r.rec.Warm:
		return st, cubefleet.Errorf(cubefleet.CodeConflict, "sandbox %s is not a warm sandbox: it was started with its own command", spec.ID)
	default:
		return st, cubefleet.Errorf(cubefleet.CodeConflict, "sandbox %s is not warm any more: it is %s (%s)", spec.ID, st.State, st.Message)
	}
	// The warm sandbox's limits hold; the rest is the claim's.
	spec.CPUMillicores, spec.MemoryMiB, spec.DiskMiB = r.rec.CPUMillicores, r.rec.MemoryMiB, r.rec.DiskMiB
	rec := r.rec
	rec.Argv, rec.EnvNames, rec.WorkDir = spec.Argv, driver.EnvNames(spec.Env), spec.WorkDir
	rec.Timeout, rec.Grace, rec.OutputLimitBytes = spec.Timeout, spec.GraceOrDefault(), spec.OutputLimitOrDefault()
	rec.ClaimedAt = time.Now().UTC()
	if err := writeJSON(filepath.Join(r.dir, fileSandbox), rec); err != nil {
		return st, fmt.Errorf("claim sandbox %s: %w", spec.ID, err)
	}
	msg := claimMsg{Work: filepath.Join(r.dir, dirWork, spec.WorkDir), Spec: spec, Rlimits: d.rlimits(spec)}
	if err := sendClaim(ctx, r.dir, msg); err != nil {
		// The supervisor may have taken it before the error: its records say.
		d.log.Warn("claim of a warm sandbox failed", "sandbox", spec.ID, "error", err)
		st, serr := d.settleClaim(ctx, spec.ID)
		if serr == nil && st.State == driver.StateWarm { // it never got the claim
			return st, fmt.Errorf("claim sandbox %s: %w", spec.ID, err)
		}
		return st, serr
	}
	st, err = d.status(spec.ID, true)
	if err == nil {
		d.log.Info("sandbox claimed", "sandbox", spec.ID, "state", st.State, "pid", st.PID, "uid", rec.UID,
			"program", spec.Argv[0], "env", driver.EnvNames(spec.Env))
	}
	return st, err
}

// settleClaim returns the status of a sandbox whose claim was handed over, once it is no longer
// warm (its supervisor took the claim), or as it is after claimTimeout.
func (d *Driver) settleClaim(ctx context.Context, id string) (driver.Status, error) {
	deadline := time.Now().Add(claimTimeout)
	for {
		st, err := d.status(id, true)
		if err != nil || st.State != driver.StateWarm || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// claimPath returns a path of the claim socket in dir that fits a socket address (108 bytes,
// which <dir>/<id> may exceed): through /proc/self/fd and an O_PATH descriptor of dir, which the
// caller closes.
func claimPath(dir string) (string, func(), error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + fileClaim, func() { unix.Close(fd) }, nil
}

// sendClaim hands msg to the supervisor of the warm sandbox in dir and waits for its report:
// the command runs, or could not be started (recorded as its result either way).
func sendClaim(ctx context.Context, dir string, msg claimMsg) error {
	path, closeDir, err := claimPath(dir)
	if err != nil {
		return err
	}
	defer closeDir()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("connect to the warm sandbox's supervisor: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if err := json.NewEncoder(conn).Encode(msg); err != nil {
		return fmt.Errorf("hand the claim to the supervisor: %w", err)
	}
	var r report
	if err := json.NewDecoder(io.LimitReader(conn, 1<<20)).Decode(&r); err != nil {
		return fmt.Errorf("wait for the supervisor's report: %w", err)
	}
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}

// warm carries out a launch of Warm: the stage takes the sandbox's user and waits; the
// supervisor records the sandbox warm, answers the driver, and waits for a claim on the claim
// socket or a stop. A claim makes it a started sandbox (watch); a stop ends it as killed.
func (s *supervisor) warm(reportFile io.WriteCloser, stop chan os.Signal) int {
	if err := s.begin(); err != nil {
		return s.fail(reportFile, err)
	}
	if err := s.become(); err != nil {
		return s.fail(reportFile, err)
	}
	ln, err := s.listenClaim()
	if err != nil {
		return s.fail(reportFile, fmt.Errorf("claim socket: %w", err))
	}
	proc, err := identOf(s.st.pid)
	if err != nil {
		proc = Ident{PID: s.st.pid, BootID: bootID()}
	}
	if err := writeJSON(s.path(fileWarm), warmRecord{Process: proc, Since: time.Now().UTC()}); err != nil {
		ln.Close()
		return s.fail(reportFile, fmt.Errorf("record the warm sandbox: %w", err))
	}
	writeReport(reportFile, nil)

	claims := make(chan claimConn)
	go s.acceptClaim(ln, claims)
	select {
	case <-s.stageEnds():
		// Killed from outside while it waited (its user's or its cgroup's processes killed by
		// mistake, the OOM killer): the sandbox ends now, so that it is reported and no claim
		// is handed to a stage that is gone.
		ln.Close()
		os.Remove(s.path(fileClaim))
		ws, _ := s.st.collect(true)
		s.st.abort()
		s.kill()
		s.l.Cgroup.Remove()
		res := resultRecord{Reason: driver.ReasonLost, EndedAt: time.Now().UTC(), ExitCode: -1,
			Message: fmt.Sprintf("its exec stage (pid %d) ended while the sandbox was warm, before a claim: %s", s.st.pid, howEnded(ws))}
		if ws.Signaled() {
			res.Signal = unix.SignalName(ws.Signal())
		}
		fmt.Fprintln(os.Stderr, res.Message)
		if err := writeJSON(s.path(fileResult), res); err != nil {
			fmt.Fprintf(os.Stderr, "record the end of the sandbox: %v\n", err)
			return 1
		}
		return 0
	case <-stop:
		ln.Close()
		os.Remove(s.path(fileClaim))
		s.st.abort()
		s.kill()
		s.l.Cgroup.Remove()
		res := resultRecord{Reason: driver.ReasonStopped, Message: "stopped while warm, before a claim", EndedAt: time.Now().UTC(), ExitCode: -1}
		if err := writeJSON(s.path(fileResult), res); err != nil {
			fmt.Fprintf(os.Stderr, "record the end of the sandbox: %v\n", err)
			return 1
		}
		return 0
	case c := <-claims:
		ln.Close()
		os.Remove(s.path(fileClaim))
		defer c.conn.Close()
		s.l.Spec, s.l.Work, s.l.Rlimits = c.msg.Spec, c.msg.Work, c.msg.Rlimits
		startedAt, err := s.execute()
		if err != nil {
			return s.fail(c.conn, err)
		}
		writeReport(c.conn, nil)
		return s.watch(startedAt, stop)
	}
}

// stageEnds returns a channel closed when the stage ends (it is not collected), nil when it
// cannot be watched. The goroutine
// that watches it (through a pidfd) lasts as long as the stage, also once it runs a claim's
// command.
func (s *supervisor) stageEnds() <-chan struct{} {
	fd, err := unix.PidfdOpen(s.st.pid, 0)
	if err != nil { // not watched: a claim then finds out (execute)
		fmt.Fprintf(os.Stderr, "watch the exec stage: pidfd_open %d: %v\n", s.st.pid, err)
		return nil
	}
	ends := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		for {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil && n > 0 {
				close(ends)
			}
			return
		}
	}()
	return ends
}

// become tells the stage to take the sandbox's user and waits until it did.
func (s *supervisor) become() error {
	err := json.NewEncoder(s.st.instr).Encode(stageInstr{Supervisor: os.Getpid(), UID: s.l.UID, GID: s.l.GID, Become: true, Sandbox: s.setup()})
	if err != nil {
		return fmt.Errorf("hand the user to the exec stage: %w", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(s.st.status, b[:]); err != nil {
		return fmt.Errorf("the exec stage ended before it took the sandbox's user (%v)", err)
	}
	s.releaseDisk() // the init's setup is over
	if b[0] != stageBecame {
		rest, _ := io.ReadAll(s.st.status)
		return errors.New(string(append(b[:], rest...)))
	}
	return nil
}

// listenClaim listens on the sandbox's claim socket, which only the agent's user may use.
func (s *supervisor) listenClaim() (net.Listener, error) {
	path, closeDir, err := claimPath(s.l.Dir)
	if err != nil {
		return nil, err
	}
	defer closeDir()
	os.Remove(s.path(fileClaim)) // a leftover of a supervisor that died
	// Created private (the supervisor's umask is 077), then given its mode explicitly.
	ln, err := net.Listen("unix", path)
	if err == nil {
		if err = os.Chmod(path, 0o600); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}

// claimConn is a claim read from a connection on the claim socket, whose report goes back on it.
type claimConn struct {
	conn net.Conn
	msg  claimMsg
}

// acceptClaim accepts connections on ln until one from the agent's user brings a claim, which it
// sends on claims; others are answered with why they were refused. It returns when ln is closed.
func (s *supervisor) acceptClaim(ln net.Listener, claims chan<- claimConn) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		uc := conn.(*net.UnixConn)
		if err := peerIsAgent(uc); err != nil {
			writeReport(conn, err)
			continue
		}
		conn.SetReadDeadline(time.Now().Add(claimTimeout))
		var msg claimMsg
		if err := json.NewDecoder(io.LimitReader(conn, maxLaunchBytes)).Decode(&msg); err != nil || len(msg.Spec.Argv) == 0 {
			writeReport(conn, fmt.Errorf("read the claim: %v", err))
			continue
		}
		conn.SetReadDeadline(time.Time{})
		claims <- claimConn{conn: conn, msg: msg}
		return
	}
}

// peerIsAgent checks that the process at the other end of conn runs as this supervisor's user
// (the agent's), the only one that may claim a warm sandbox.
func peerIsAgent(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("uid %d may not claim this sandbox", cred.Uid)
	}
	return nil
}
