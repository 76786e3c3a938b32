package process

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Spare supervisors: started ahead of need, each with its exec stage, so that Start only hands
// over the spec.

// supervisorProc is a started supervisor, child of this driver's process, waiting for its
// launch.
type supervisorProc struct {
	ident      Ident
	cgroup     string // the cgroup its exec stage runs in, "" for none
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
	var cgroup string
	if d.iso.Cgroup != "" {
		var b [8]byte
		rand.Read(b[:])
		cgroup = filepath.Join(d.iso.Cgroup, d.cfg.CgroupParent, "sandbox-"+hex.EncodeToString(b[:]))
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: d.cfg.Executable, Args: []string{supervisorArg0, cgroup}, Env: []string{}, Dir: "/",
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

// supervisor returns a spare supervisor that is still alive, or starts one.
func (d *Driver) supervisor() (*supervisorProc, error) {
	for {
		select {
		case s := <-d.spares:
			select {
			case d.refill <- struct{}{}:
			default:
			}
			select {
			case <-s.done:
				continue
			default:
				return s, nil
			}
		default:
			return d.startSupervisor()
		}
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
			s, err := d.startSupervisor()
			if err == nil {
				s.reportFile.SetReadDeadline(time.Now().Add(30 * time.Second))
				if err = s.ready(); err != nil {
					s.discard()
				}
				s.reportFile.SetReadDeadline(time.Time{})
			}
			if err != nil {
				d.log.Warn("cannot start a spare sandbox supervisor", "error", err)
				break
			}
			select {
			case d.spares <- s:
			default:
				s.discard()
			}
		}
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
