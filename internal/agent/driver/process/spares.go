package process

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
)

// Spare supervisors: started ahead of need, each with its exec stage, so that Start only hands
// over the spec.

// supervisorProc is a started supervisor, child of this driver's process, waiting for its
// launch.
type supervisorProc struct {
	ident      Ident
	cgroup     cgroups.Group // the cgroup its exec stage runs in, zero for none
	stdin      io.WriteCloser
	reportFile *os.File
	report     *bufio.Reader // of reportFile
	isReady    bool          // its readyLine was read
	done       chan struct{} // closed once collected
}

// ready waits for the supervisor's readyLine (once): it and its exec stage wait for a launch.
// A supervisor that ends first fails with io.ErrUnexpectedEOF.
func (s *supervisorProc) ready() error {
	if s.isReady {
		return nil
	}
	line, err := s.report.ReadString('\n')
	if line == readyLine {
		s.isReady = true
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// discard ends a supervisor that will not get a launch (it exits on the end of its input).
func (s *supervisorProc) discard() {
	s.stdin.Close()
	s.reportFile.Close()
}

// startSupervisor starts a supervisor in a session of its own (so the agent's terminal and
// process group signals do not reach it), with an empty environment and, when the driver uses
// cgroups, a new cgroup for the sandbox it will get: <parent>/sandbox-<16 hex digits>.
func (d *Driver) startSupervisor() (*supervisorProc, error) {
	var cgroup cgroups.Group
	var cgroupArg, nsArg, userArg string
	if len(d.iso.Namespaces) > 0 {
		nsArg = namespacesArg
	}
	if d.iso.UserNamespace() {
		userArg = userNamespaceArg
	}
	if d.iso.Cgroups.Tracks() {
		var b [8]byte
		rand.Read(b[:])
		cgroup = d.iso.Cgroups.Group(d.cfg.CgroupParent, sandboxCgroupPrefix+hex.EncodeToString(b[:]))
		arg, err := json.Marshal(cgroup)
		if err != nil {
			return nil, err
		}
		cgroupArg = string(arg)
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: d.cfg.Executable, Args: []string{supervisorArg0, cgroupArg, nsArg, userArg}, Env: []string{}, Dir: "/",
		ExtraFiles:  []*os.File{reportW},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	reportW.Close()
	if err != nil {
		reportR.Close()
		return nil, fmt.Errorf("start a sandbox supervisor (%s): %w", d.cfg.Executable, err)
	}
	s := &supervisorProc{cgroup: cgroup, stdin: stdin, reportFile: reportR, report: bufio.NewReader(reportR), done: make(chan struct{})}
	s.ident, err = identOf(cmd.Process.Pid)
	if err != nil {
		s.ident = Ident{PID: cmd.Process.Pid, BootID: bootID()}
	}
	go func() { cmd.Wait(); close(s.done) }()
	return s, nil
}

// supervisor returns a spare supervisor that is still alive (and has a new one started in
// its place), or starts one. When none is ready but keepSpares is starting one, the first
// caller to find it so waits for that one rather than starting another beside it: it started
// earlier, so it is ready sooner, and two starts at once would share the CPU.
func (d *Driver) supervisor() (*supervisorProc, error) {
	for {
		s, ok := d.spare()
		if !ok {
			return d.startSupervisor()
		}
		d.refillSpares()
		select {
		case <-s.done:
			continue
		default:
			return s, nil
		}
	}
}

// maxSpareWait bounds how long a start waits for the spare being started before it starts a
// supervisor of its own: far longer than a spare takes, on a host that is not stuck.
const maxSpareWait = time.Second

// spare takes a ready spare, or waits for the one keepSpares is starting (one caller at a
// time); ok is false when there is none.
func (d *Driver) spare() (s *supervisorProc, ok bool) {
	select {
	case s := <-d.spares:
		return s, true
	default:
	}
	if !d.refilling.Load() || !d.awaiting.CompareAndSwap(false, true) {
		return nil, false
	}
	defer d.awaiting.Store(false)
	giveUp := time.NewTimer(maxSpareWait)
	defer giveUp.Stop()
	for d.refilling.Load() {
		select {
		case s := <-d.spares:
			return s, true
		case <-d.refillEnded: // it failed, or another caller took it: look again
		case <-giveUp.C:
			return nil, false
		case <-d.quit:
			return nil, false
		}
	}
	select {
	case s := <-d.spares:
		return s, true
	default:
		return nil, false
	}
}

// refillSpares has keepSpares start the supervisors that are missing.
func (d *Driver) refillSpares() {
	select {
	case d.refill <- struct{}{}:
	default:
	}
}

// keepSpares starts supervisors until Config.Spares wait, each time a spare is taken.
func (d *Driver) keepSpares() {
	defer d.wg.Done()
	for {
		select {
		case <-d.quit:
			return
		case <-d.refill:
		}
		for len(d.spares) < cap(d.spares) {
			d.refilling.Store(true)
			s, err := d.startSupervisor()
			if err == nil {
				s.reportFile.SetReadDeadline(time.Now().Add(30 * time.Second))
				if err = s.ready(); err != nil {
					s.discard()
				}
				s.reportFile.SetReadDeadline(time.Time{})
			}
			if err != nil {
				d.refillEnd()
				d.log.Warn("cannot start a spare sandbox supervisor", "error", err)
				break
			}
			select {
			case d.spares <- s:
			default:
				s.discard()
			}
			d.refillEnd()
		}
	}
}

// refillEnd records that keepSpares no longer starts a spare, and wakes a caller waiting for
// it (spare).
func (d *Driver) refillEnd() {
	d.refilling.Store(false)
	select {
	case d.refillEnded <- struct{}{}:
	default:
	}
}

// dropSpares ends the spare supervisors (and stops making new ones until Close).
func (d *Driver) dropSpares() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.quit)
	}
	d.mu.Unlock()
	d.wg.Wait()
	for {
		select {
		case s := <-d.spares:
			s.discard()
			<-s.done
		default:
			return
		}
	}
}
