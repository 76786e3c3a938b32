package hostsetup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	// SandboxWait is how long the sandboxes get between SIGTERM and SIGKILL (at most their own
	// grace); 0 means 15 s.
	SandboxWait time.Duration
}

// Down is `cubefleet agent down`: it stops this node's agent (the control plane and the other
// nodes are not affected), then every sandbox it ran (with the process runtime and
// opt.Config), so that no process of the agent survives; it deletes no state. On the real
// system it runs `systemctl stop cubefleet-agent.service` when the unit is installed, else it
// signals the PID in /run/cubefleet-agent.pid; under Root it signals the PID in
// Root/run/cubefleet-agent.pid. The sandboxes are stopped through the process driver (its
// StopAll, with no spare supervisor): SIGTERM, then SIGKILL after their grace or
// opt.SandboxWait, whichever comes first; the next agent reports their ends to the control
// plane. An agent that is not running is not an error; a sandbox process that survives is.
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
	real := opt.Root == "" || opt.Root == "/"
	if real {
		if _, err := os.Stat(UnitPath); err == nil {
			if err := opt.Systemctl(ctx, "stop", UnitName); err != nil {
				return err
			}
			fmt.Fprintf(out, "Stopped %s (only this node's agent)\n", UnitName)
			return nil
		}
	}
	return stopPIDFile(ctx, rooted(opt.Root, PIDFilePath), opt.Wait, out)
}

// stopPIDFile sends SIGTERM to the agent whose PID is in path and waits for it to exit.
func stopPIDFile(ctx context.Context, path string, wait time.Duration, out io.Writer) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "The agent is not running (no %s)\n", path)
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("%s does not hold a process ID; remove it", path)
	}
	if !isAgentProcess(pid) {
		fmt.Fprintf(out, "The agent is not running (process %d from %s is gone or is not a cubefleet agent); removed the stale PID file\n", pid, path)
		os.Remove(path)
		return nil
	}
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
	os.Remove(path)
	fmt.Fprintf(out, "Stopped the agent (process %d; only this node's agent)\n", pid)
	return nil
}

// isAgentProcess reports whether pid is a live (not zombie) process whose command line runs
// `agent`.
func isAgentProcess(pid int) bool {
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

// downSandboxes stops every sandbox of the process runtime in opt.Config.SandboxDir (under
// opt.Root), once the agent no longer holds the directory.
func downSandboxes(ctx context.Context, opt DownOptions) error {
	cfg := opt.Config
	if cfg == nil || cfg.Runtime != agent.RuntimeProcess {
		return nil
	}
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	wait := opt.SandboxWait
	if wait <= 0 {
		wait = 15 * time.Second
	}
	c := *cfg
	c.SandboxDir = rooted(opt.Root, cfg.SandboxDir)
	if _, err := os.Stat(c.SandboxDir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "No sandboxes to stop (no %s)\n", c.SandboxDir)
		return nil
	}
	d, err := c.ProcessDriver(nil, 0)
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
	fmt.Fprintf(out, "Stopped %d %s in %s (the next agent reports their ends)\n", live, plural(live, "sandbox", "sandboxes"), c.SandboxDir)
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
