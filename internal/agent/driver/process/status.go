package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"golang.org/x/sys/unix"
)

// The Status of a sandbox, assembled from its records on disk.

// records reads a sandbox's records: ok is false when its directory does not exist.
type records struct {
	rec        sandboxRecord
	hasRec     bool
	sup        Ident
	hasSup     bool
	state      stateRecord
	hasState   bool
	result     resultRecord
	hasResult  bool
	warm       warmRecord
	hasWarm    bool
	dir        string
	dirMode    fs.FileMode // permission bits of dir
	dirMissing bool
}

func (d *Driver) read(id string) (records, error) {
	r := records{dir: d.dir(id)}
	fi, err := os.Lstat(r.dir)
	if errors.Is(err, fs.ErrNotExist) {
		r.dirMissing = true
		return r, nil
	}
	if err == nil {
		r.dirMode = fi.Mode().Perm()
	}
	var errs [5]error
	r.hasRec, errs[0] = readJSON(filepath.Join(r.dir, fileSandbox), &r.rec)
	r.hasSup, errs[1] = readJSON(filepath.Join(r.dir, fileSupervisor), &r.sup)
	r.hasState, errs[2] = readJSON(filepath.Join(r.dir, fileState), &r.state)
	r.hasResult, errs[3] = readJSON(filepath.Join(r.dir, fileResult), &r.result)
	if r.rec.Warm {
		r.hasWarm, errs[4] = readJSON(filepath.Join(r.dir, fileWarm), &r.warm)
	}
	return r, errors.Join(errs[:]...)
}

// status returns a sandbox's Status. A sandbox that is not running any more but has no
// recorded end is given one here (lost, or failed when it never started) and what is left of
// its processes is killed. locked is true when the caller holds the id's lock.
func (d *Driver) status(id string, locked bool) (driver.Status, error) {
	if !driver.ValidID(id) {
		return driver.Status{}, notFound(id)
	}
	for range 500 { // a start in progress in another process settles within milliseconds
		r, err := d.read(id)
		if err != nil {
			return driver.Status{}, err
		}
		if r.dirMissing {
			return driver.Status{}, notFound(id)
		}
		switch {
		case r.hasResult:
			return d.ended(r), nil
		case (r.hasState || r.hasWarm) && r.hasSup && r.sup.alive():
			return d.assemble(r), nil
		case !r.hasState && r.hasSup && r.sup.alive():
			time.Sleep(10 * time.Millisecond)
			continue
		}
		// Not running, and no end recorded: decide under the id's lock, on fresh records.
		if !locked {
			unlock := d.lockID(id)
			st, err := d.status(id, true)
			unlock()
			return st, err
		}
		// A supervisor records the end, then exits: it may have done both since the records
		// above were read (Start holds the lock and asks at once).
		if fresh, err := d.read(id); err == nil && fresh.hasResult {
			return d.ended(fresh), nil
		}
		res := resultRecord{EndedAt: time.Now().UTC(), ExitCode: -1}
		switch {
		case !r.hasSup:
			res.Reason, res.Message = driver.ReasonFailed, "never started: the agent stopped while starting it"
		case !r.hasState && r.hasWarm:
			res.Reason, res.Message = driver.ReasonLost, fmt.Sprintf("its supervisor (pid %d) ended while the sandbox was warm", r.sup.PID)
		case !r.hasState:
			res.Reason, res.Message = driver.ReasonLost, fmt.Sprintf("its supervisor (pid %d) ended before the sandbox started", r.sup.PID)
		default:
			res.Reason, res.Message = driver.ReasonLost, fmt.Sprintf("its supervisor (pid %d) ended without recording the sandbox's end", r.sup.PID)
		}
		if r.hasState || r.hasWarm {
			d.killRest(r, time.Now().Add(2*time.Second))
		}
		r.rec.Cgroup.Remove()
		if err := writeJSON(filepath.Join(r.dir, fileResult), res); err != nil {
			return driver.Status{}, fmt.Errorf("record sandbox %s as %s: %w", id, res.Reason, err)
		}
		d.log.Warn("sandbox "+string(res.Reason), "sandbox", id, "reason", res.Message)
		r.result, r.hasResult = res, true
		return d.ended(r), nil
	}
	r, _ := d.read(id)
	return d.assemble(r), nil
}

// ended returns the Status of an ended sandbox (r has its result), retiring it first.
func (d *Driver) ended(r records) driver.Status {
	d.retire(r)
	return d.assemble(r)
}

// retire ends the uid lease of an ended sandbox of its own user, once: its directory is closed
// to other users (0700), then its uid is free for the next sandbox, which cannot reach what this
// one left in its work directory. A directory that is 0700 already was retired (or, in a crash
// between the two steps, its lease is stale and taken over by the next acquire).
func (d *Driver) retire(r records) {
	if !r.hasResult || r.rec.UID < 0 || r.dirMode == 0o700 || r.dirMode == 0 {
		return
	}
	if err := closeDir(r.dir); err != nil {
		d.log.Warn("sandbox ended: its directory could not be closed; its user id stays leased", "sandbox", r.rec.ID, "uid", r.rec.UID, "error", err)
		return
	}
	d.leases.release(r.rec.UID, r.dir)
}

// assemble makes the Status of a sandbox from its records, with live stats while it runs.
func (d *Driver) assemble(r records) driver.Status {
	st := driver.Status{ID: r.rec.ID, State: driver.StateRunning, ExitCode: -1}
	if st.ID == "" {
		st.ID = filepath.Base(r.dir)
	}
	switch {
	case !r.hasState && r.hasWarm && !r.hasResult:
		st.State, st.PID = driver.StateWarm, r.warm.Process.PID
		if r.rec.UID >= 0 {
			st.Handle = fmt.Sprintf("warm, uid %d", r.rec.UID)
		} else {
			st.Handle = "warm, the agent's user"
		}
	case r.hasState:
		st.PID = r.state.Process.PID
		st.StartedAt = r.state.StartedAt
		if r.rec.UID >= 0 {
			st.Handle = fmt.Sprintf("pid %d, uid %d", st.PID, r.rec.UID)
		} else {
			st.Handle = fmt.Sprintf("pid %d, the agent's user", st.PID)
		}
	}
	if r.hasResult {
		res := r.result
		st.State, st.Reason, st.Message = res.Reason.State(), res.Reason, res.Message
		st.EndedAt, st.ExitCode, st.Signal = res.EndedAt, res.ExitCode, res.Signal
		st.Stats, st.StdoutBytes, st.StderrBytes = res.Stats, res.StdoutBytes, res.StderrBytes
		return st
	}
	st.Stats = liveStats(r)
	return st
}

// liveStats reads a running sandbox's resource use: from its cgroup when it has one (all its
// processes together), else from /proc for the processes of its user or session.
func liveStats(r records) driver.Stats {
	var s driver.Stats
	var procs []int
	if cg := r.rec.Cgroup; !cg.IsZero() {
		procs = cg.Procs()
		cs := cg.Stats()
		s.CPU = max(cs.CPU, 0)
		s.MemoryBytes = max(cs.MemoryBytes, 0)
		s.PeakMemoryBytes = max(cs.PeakMemoryBytes, 0)
	} else if r.rec.UID >= 0 {
		procs = members(r.rec.UID, -1)
	} else {
		procs = members(-1, r.state.Process.PID)
	}
	cpu, rss := usage(procs)
	if s.CPU == 0 {
		s.CPU = ticks(cpu)
	}
	if s.MemoryBytes == 0 {
		s.MemoryBytes = rss
	}
	return s
}

// killRest kills what is left of a sandbox whose supervisor is gone: its cgroup, its process
// group, the processes of its user (or session). It returns the processes still there at the
// deadline.
//
// Once the sandbox's end is recorded, only its cgroup is: whoever recorded the end killed every
// process of its user first, and its uid may since have been lent to another sandbox, whose
// processes a kill by uid would end.
func (d *Driver) killRest(r records, deadline time.Time) []int {
	var left []int
	left = append(left, r.rec.Cgroup.Kill(deadline)...)
	if r.hasResult {
		return left
	}
	if r.hasState && r.state.Process.alive() {
		unix.Kill(-r.state.Process.PID, unix.SIGKILL)
	}
	if r.rec.UID >= 0 {
		left = append(left, killMembers(r.rec.UID, -1, deadline)...)
	} else if r.hasState {
		left = append(left, killMembers(-1, r.state.Process.PID, deadline)...)
	} else if r.hasWarm { // the stage leads the sandbox's session
		left = append(left, killMembers(-1, r.warm.Process.PID, deadline)...)
	}
	return left
}
