package microvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
)

// endGrace is how long a VM may take to power off after its guest sent its end, and the margin
// past a command's timeout and grace before the driver kills a guest that did not end it.
const endGrace = 15 * time.Second

// channel parses v's result port so far, keeping limit bytes of each stream (0: all).
func (v *vm) channel(limit int64) (guest.Result, error) {
	data, err := os.ReadFile(filepath.Join(v.vmDir(), fileChannel))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return guest.Result{}, err
	}
	return guest.ReadFrames(data, limit)
}

// watch ends v when its VMM ends (or must be killed: a guest that outlives its end or its
// timeout), records its end and closes v.done.
func (d *Driver) watch(v *vm) {
	d.wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		var endSeen time.Time
		var seenSize int64 = -1
		var r guest.Result
		for {
			select {
			case <-v.exited:
				d.finish(v)
				return
			case <-d.closed:
				return
			case <-tick.C:
			}
			// The channel is parsed again only when it grew (a command's output may be large).
			if fi, err := os.Stat(filepath.Join(v.vmDir(), fileChannel)); err == nil && fi.Size() != seenSize {
				seenSize = fi.Size()
				r, _ = v.channel(1)
			}
			if r.End != nil && endSeen.IsZero() {
				endSeen = time.Now()
			}
			v.mu.Lock()
			c := v.claim
			v.mu.Unlock()
			switch {
			case !endSeen.IsZero() && time.Since(endSeen) > endGrace:
				v.kill("")
			case c != nil && c.Spec.Timeout > 0 && r.End == nil && time.Since(c.ClaimedAt) > c.Spec.Timeout+c.Spec.GraceOrDefault()+endGrace:
				d.log.Warn("microvm did not end at its timeout: killing its VMM", "sandbox", v.id)
				v.kill(driver.ReasonTimeout)
			}
		}
	})
}

// exitedOf returns a channel closed when the process id (not a child of this one) ends.
func exitedOf(id process.Ident) chan struct{} {
	ch := make(chan struct{})
	go func() {
		for !id.WaitGone(time.Now().Add(time.Hour)) {
		}
		close(ch)
	}()
	return ch
}

// finish records the end of v, whose VMM ended: from the guest's end frame, or why there is
// none; gives its uid back and deletes its writable layer.
func (d *Driver) finish(v *vm) {
	st := v.endStatus()
	v.removeCgroup()
	if v.rec.Link != nil {
		v.rec.Link.Teardown()
	}
	if err := process.WriteRecord(filepath.Join(v.dir, process.FileResult), st); err != nil {
		d.log.Error("cannot record the end of a microvm", "sandbox", v.id, "error", err.Error())
	}
	v.closeControl()
	os.Remove(filepath.Join(v.vmDir(), fileScratch))
	removeSockets(v.vmDir())
	d.leases.Release(v.rec.UID, v.dir)
	v.mu.Lock()
	v.final = &st
	v.mu.Unlock()
	close(v.done)
	d.log.Info("microvm ended", "sandbox", v.id, "state", st.State, "reason", st.Reason, "message", st.Message)
}

// endStatus words v's end from its result port and what the driver did.
func (v *vm) endStatus() driver.Status {
	st := v.status()
	st.EndedAt = time.Now().UTC()
	st.ExitCode = -1
	st.Stats = driver.Stats{}
	r, err := v.channel(1)
	v.mu.Lock()
	cause, claim := v.cause, v.claim
	v.mu.Unlock()
	spec := v.rec.Spec
	if claim != nil {
		spec = claim.Spec
	}
	vmmStats, cg, counted := v.cgroupStats()
	if counted { // the guest's figures replace these when it reports them
		st.Stats = driver.Stats{CPU: vmmStats.CPU, PeakMemoryBytes: vmmStats.PeakMemoryBytes}
	}
	set := func(reason driver.Reason, msg string) { st.Reason, st.State, st.Message = reason, reason.State(), msg }
	switch e := r.End; {
	case err != nil && e == nil:
		set(driver.ReasonLost, "its VM ended and its result channel cannot be read: "+err.Error())
	case e != nil && e.Failed != "":
		set(driver.ReasonFailed, e.Failed)
	case e != nil && e.Ran:
		ws := unix.WaitStatus(e.ExitCode << 8)
		if e.Signal != "" {
			ws = unix.WaitStatus(unix.SignalNum(e.Signal))
		}
		cause := driver.Reason(e.Cause)
		if e.OOM {
			cause = driver.ReasonOOM
		}
		reason, msg := process.EndMessage(cause, ws, e.AfterGrace, spec)
		set(reason, msg)
		st.ExitCode, st.Signal = e.ExitCode, e.Signal
		st.Stats = driver.Stats{CPU: time.Duration(e.CPUNs), PeakMemoryBytes: e.PeakMemoryBytes}
		st.StdoutBytes, st.StderrBytes = e.StdoutBytes, e.StderrBytes
	case e != nil:
		set(driver.ReasonStopped, "stopped: its guest was shut down before a command ran")
	case oomKilled(cg):
		set(driver.ReasonOOM, fmt.Sprintf("killed: its VMM reached its cgroup's memory limit of %d MiB (the guest's %d MiB and the VMM's own) and the host's OOM killer ended it", MemoryLimitMiB(v.rec.Machine), v.rec.Machine.MemoryMiB))
	case cause == driver.ReasonFailed && r.Ready == nil:
		set(driver.ReasonFailed, "the guest did not boot: "+v.consoleTail())
	case cause == driver.ReasonFailed:
		set(driver.ReasonFailed, "the guest did not take its command; its VM was killed")
	case cause == driver.ReasonTimeout:
		set(cause, fmt.Sprintf("timeout after %s: the guest did not end its command; its VM was killed", spec.Timeout))
	case cause == driver.ReasonStopped:
		set(cause, "stopped: the guest did not stop; its VM was killed")
	default:
		set(driver.ReasonLost, "its VM ended without a result: "+v.consoleTail())
	}
	return st
}

// consoleTail returns the last lines of the guest's console, for a message.
func (v *vm) consoleTail() string {
	data, _ := os.ReadFile(filepath.Join(v.vmDir(), fileConsole))
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(string(data), "?")), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	s := strings.Join(lines, " | ")
	if s == "" {
		return "the guest printed nothing on its console"
	}
	return "console: " + s
}

// status returns v's Status now.
func (v *vm) status() driver.Status {
	v.mu.Lock()
	final, claim := v.final, v.claim
	v.mu.Unlock()
	if final != nil {
		return *final
	}
	st := driver.Status{ID: v.id, State: driver.StateWarm, ExitCode: -1, Handle: fmt.Sprintf("VM cubefleet-%s, VMM pid %d, uid %d", v.id, v.rec.VMM.PID, v.rec.UID)}
	if claim != nil {
		st.State, st.StartedAt = driver.StateRunning, claim.ClaimedAt
	}
	if s, _, ok := v.cgroupStats(); ok {
		st.Stats = s
	} else {
		st.Stats = process.ProcessStats(v.rec.VMM.PID)
	}
	return st
}

// oomKilled reports whether the host's OOM killer ended a process of a VMM's cgroup (s its
// figures): the VMM outgrew its memory limit.
func oomKilled(s cgroups.Stats) bool { return s.OOMKills > 0 }

// output returns the command's captured streams, each followed by the truncation marker when
// the guest counted more than the limit.
func (v *vm) output() driver.Output {
	v.mu.Lock()
	claim, final := v.claim, v.final
	v.mu.Unlock()
	limit := v.rec.Spec.OutputLimitOrDefault()
	if claim != nil {
		limit = claim.Spec.OutputLimitOrDefault()
	}
	r, _ := v.channel(limit)
	out := driver.Output{Stdout: r.Stdout, Stderr: r.Stderr}
	if final != nil {
		out.StdoutTruncated, out.StderrTruncated = final.StdoutBytes > limit, final.StderrBytes > limit
	}
	if out.StdoutTruncated {
		out.Stdout = append(out.Stdout, driver.TruncationMarker(limit)...)
	}
	if out.StderrTruncated {
		out.Stderr = append(out.Stderr, driver.TruncationMarker(limit)...)
	}
	return out
}

// recover finds the VMs of an earlier driver on Dir: an ended one by its result.json, a running
// one by its VMM's identity (its control socket is connected again), and one whose VMM vanished
// without an end is recorded from its result port, or lost.
func (d *Driver) recover() {
	entries, _ := os.ReadDir(d.cfg.Dir)
	for _, e := range entries {
		if !e.IsDir() || !driver.ValidID(e.Name()) {
			continue
		}
		v := &vm{id: e.Name(), dir: filepath.Join(d.cfg.Dir, e.Name()), done: make(chan struct{}), vmm: d.vmm}
		if ok, err := process.ReadRecord(filepath.Join(v.dir, fileVM), &v.rec); !ok || err != nil {
			continue
		}
		var c claimRecord
		if ok, _ := process.ReadRecord(filepath.Join(v.dir, fileClaim), &c); ok {
			v.claim = &c
		}
		var final driver.Status
		if ok, _ := process.ReadRecord(filepath.Join(v.dir, process.FileResult), &final); ok {
			v.final = &final
			close(v.done)
			d.vms[v.id] = v
			continue
		}
		d.vms[v.id] = v
		if !v.rec.VMM.Alive() {
			v.exited = make(chan struct{})
			close(v.exited)
			d.finish(v)
			continue
		}
		if err := d.leases.Claim(v.rec.UID, v.dir); err != nil {
			d.log.Warn("a microvm's uid lease cannot be taken again", "sandbox", v.id, "error", err.Error())
		}
		v.exited = exitedOf(v.rec.VMM)
		d.watch(v)
		d.log.Info("microvm found again", "sandbox", v.id, "pid", v.rec.VMM.PID)
	}
}
