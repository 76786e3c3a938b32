package guest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// defaultPath is the command's search path when its environment has no PATH (as the process
// runtime's).
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// run starts req's command as the sandbox's user, streams its output to the result port within
// the output limit, ends it at its timeout or on a stop request, and sends its end.
func (s *initState) run(control *controlPort, req Request) {
	work := filepath.Join(SandboxDir, filepath.Clean("/"+req.WorkDir))
	if err := os.MkdirAll(work, 0o700); err == nil {
		os.Chown(work, SandboxUID, SandboxUID)
	}
	prog, err := lookPath(req.Argv[0], work, req.Env)
	var outR, outW, errR, errW *os.File
	if err == nil {
		outR, outW, err = os.Pipe()
	}
	if err == nil {
		errR, errW, err = os.Pipe()
	}
	var proc *os.Process
	if err == nil {
		null, _ := os.Open("/dev/null")
		proc, err = os.StartProcess(prog, req.Argv, &os.ProcAttr{
			Dir: work, Env: req.Env, Files: []*os.File{null, outW, errW},
			Sys: &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: SandboxUID, Gid: SandboxUID, Groups: []uint32{}}},
		})
		null.Close()
		outW.Close()
		errW.Close()
	}
	if err != nil {
		control.ack("")
		s.sendJSON(FrameStarted, Started{Error: err.Error()})
		s.sendJSON(FrameEnd, End{ExitCode: -1, Failed: err.Error()})
		return
	}
	oomBefore := oomKills()
	s.sendJSON(FrameStarted, Started{PID: proc.Pid})
	control.ack("")

	var end End
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); end.StdoutBytes = s.copyOut(FrameStdout, outR, req.OutputLimitBytes) }()
	go func() { defer wg.Done(); end.StderrBytes = s.copyOut(FrameStderr, errR, req.OutputLimitBytes) }()

	var mu sync.Mutex
	grace := time.Duration(req.GraceMs) * time.Millisecond
	exited := make(chan struct{})
	terminate := func(cause string) {
		mu.Lock()
		defer mu.Unlock()
		if end.Cause != "" {
			return
		}
		end.Cause = cause
		unix.Kill(-proc.Pid, unix.SIGTERM)
		go func() {
			select {
			case <-exited:
			case <-time.After(grace):
				mu.Lock()
				end.AfterGrace = true
				mu.Unlock()
				unix.Kill(-proc.Pid, unix.SIGKILL)
			}
		}()
	}
	if req.TimeoutMs > 0 {
		t := time.AfterFunc(time.Duration(req.TimeoutMs)*time.Millisecond, func() { terminate("timeout") })
		defer t.Stop()
	}
	go func() {
		for {
			r, err := control.read()
			if err != nil {
				return
			}
			if r.Op == "stop" {
				if r.GraceMs > 0 {
					mu.Lock()
					grace = time.Duration(r.GraceMs) * time.Millisecond
					mu.Unlock()
				}
				terminate("stopped")
			}
			control.ack("")
		}
	}()

	ws, cpu, rss := reap(proc.Pid)
	close(exited)
	// The rest of its tree dies with it: nothing of the sandbox outlives its main process.
	unix.Kill(-1, unix.SIGKILL)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	end.Ran = true
	end.ExitCode = -1
	switch {
	case ws.Exited():
		end.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		end.Signal = unix.SignalName(ws.Signal())
	}
	end.CPUNs, end.PeakMemoryBytes = cpu.Nanoseconds(), rss
	end.OOM = oomKills() > oomBefore
	s.sendJSON(FrameEnd, end)
}

// reap collects every child of the init (the command and, as PID 1, every orphan) until the
// main one ended, adding up their CPU time and largest resident set.
func reap(main int) (unix.WaitStatus, time.Duration, int64) {
	var cpu time.Duration
	var rss int64
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, 0, &ru)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ws, cpu, rss
		}
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		rss = max(rss, ru.Maxrss*1024)
		if pid == main {
			return ws, cpu, rss
		}
	}
}

// copyOut sends what r yields as frames of type t, the first limit bytes of it (limit <= 0:
// all), and returns how many bytes it yielded in all.
func (s *initState) copyOut(t FrameType, r io.ReadCloser, limit int64) int64 {
	defer r.Close()
	var total int64
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p := buf[:n]
			if limit > 0 {
				p = p[:max(0, min(int64(n), limit-total))]
			}
			if len(p) > 0 {
				s.send(t, p)
			}
			total += int64(n)
		}
		if err != nil {
			return total
		}
	}
}

// lookPath finds prog as execvp(3) does: a path with a '/' relative to dir, else in the PATH of
// env (defaultPath when it has none).
func lookPath(prog, dir string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(dir, prog)
		}
		if err := executable(prog); err != nil {
			return "", fmt.Errorf("exec: %s: %w", prog, err)
		}
		return prog, nil
	}
	path := defaultPath
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, prog)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", prog)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return errors.Unwrap(err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return os.ErrPermission
	}
	return nil
}
