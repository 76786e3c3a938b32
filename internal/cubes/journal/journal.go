// Package journal keeps the journals of the fleet-scaling workflows (`roundtrip up|down`,
// `scale apply`): one JSON file per run that records, before and after every side effect, what
// a resume needs (the Cube's name, server id, request id, WireGuard peer key, target lists),
// so a run killed at any moment is resumed by the next one and never creates a second Cube or
// deletes what it did not create. A journal is private (mode 0600, checked on every read) and
// written atomically: a new file beside it, fsync, rename over it, fsync of the directory. Two
// runs at once are refused by a lock (an flock on a file beside the journal, which names the
// holder's pid and host; the kernel releases it when the holder dies, even by kill -9).
package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/atomicfile"
	"github.com/cubefleet/cubefleet/internal/privatefile"
)

// Schema names the journal format.
const Schema = "cubefleet.fleet-journal/v1"

// Where the workflows keep their journals, below the operator's private directory.
const (
	// RoundtripPath is the roundtrip journal (one at a time).
	RoundtripPath = "fleet-roundtrip/journal.json"
	// ScaleDir holds one journal per scale run (<run>.json).
	ScaleDir = "fleet-scale"
)

// States of a journal.
const (
	StateOpen      = "open"      // a run is under way or was interrupted: the next run resumes it
	StateDone      = "done"      // the run finished
	StateAbandoned = "abandoned" // a person cleaned up and closed it (--abandon)
)

// Journal is one run's record. Times are Unix ms. Steps lists every step in order with its
// state; the typed fields are what a resume needs.
type Journal struct {
	Schema    string `json:"schema"`
	Workflow  string `json:"workflow"` // "roundtrip up", "roundtrip down", "scale apply"
	Run       string `json:"run"`      // the run id, part of every Cube name the run creates
	State     string `json:"state"`
	StartedAt int64  `json:"startedAt"`
	UpdatedAt int64  `json:"updatedAt"`
	Steps     []Step `json:"steps"`
	Cubes     []Cube `json:"cubes,omitempty"`
	// TargetLists are the load balancer's target groups as they were before the run (group id
	// -> "ip:port" targets), to restore.
	TargetLists map[string][]string `json:"targetLists,omitempty"`
	Note        string              `json:"note,omitempty"` // why it was abandoned
}

// Step is one side effect: Started is set (Unix ms) before it is attempted, Done after it
// succeeded; a step with Started and no Done had an unknown outcome and is checked on resume.
type Step struct {
	Name    string `json:"name"`
	Cube    string `json:"cube,omitempty"`
	Started int64  `json:"started"`
	Done    int64  `json:"done,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// Cube is a Cube the run creates or removes: its unique name (run id and slot), slot and
// private IP, the server id and the id of its create request once known, its WireGuard
// peer's public key, and the canary sandbox that ran on it (its id and tenant), whose result
// must still resolve after the Cube is gone.
type Cube struct {
	Name         string `json:"name"`
	Slot         int    `json:"slot"`
	PrivateIP    string `json:"privateIp,omitempty"`
	ServerID     string `json:"serverId,omitempty"`
	RequestID    string `json:"requestId,omitempty"`
	PeerKey      string `json:"peerKey,omitempty"`
	Canary       string `json:"canary,omitempty"`
	CanaryTenant string `json:"canaryTenant,omitempty"`
}

// Done reports whether the last step of j named step (for cube; "" for any) finished: a step
// begun again after it finished (a create rolled back by IONOS) is not done.
func (j *Journal) Done(step, cube string) bool {
	for i := len(j.Steps) - 1; i >= 0; i-- {
		if st := j.Steps[i]; st.Name == step && (cube == "" || st.Cube == cube) {
			return st.Done != 0
		}
	}
	return false
}

// Begun returns the last step of j named step (for cube; "" for any) when it started and did
// not finish (its outcome is unknown), else nil.
func (j *Journal) Begun(step, cube string) *Step {
	for i := len(j.Steps) - 1; i >= 0; i-- {
		if st := &j.Steps[i]; st.Name == step && (cube == "" || st.Cube == cube) {
			if st.Done != 0 {
				return nil
			}
			return st
		}
	}
	return nil
}

// Store is one journal file held by this process: Open takes its lock, Close gives it back.
type Store struct {
	path string
	lock *os.File
	now  func() time.Time
}

// LockError is the refusal of a second run: the journal's lock is held by the process Holder
// names ("pid 4242 on host ops-1 since 2026-12-02T01:02:03Z").
type LockError struct {
	Path   string
	Holder string
}

func (e *LockError) Error() string {
	return fmt.Sprintf("another run holds %s (%s): wait for it to end; two runs at once are refused", e.Path, e.Holder)
}

// Open takes the lock of the journal at path (the lock file is path+".lock", mode 0600; its
// directory is created with mode 0700) and writes this process's pid and host into it. now
// is the clock (nil: time.Now). Errors: a *LockError while another process holds it; the os
// error otherwise.
func Open(path string, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	if err := atomicfile.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path + ".lock")
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h := strings.TrimSpace(string(holder))
			if h == "" {
				h = "a process that has not written its name yet"
			}
			return nil, &LockError{Path: path, Holder: h}
		}
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	fmt.Fprintf(f, "pid %d on host %s since %s\n", os.Getpid(), host, now().UTC().Format(time.RFC3339))
	f.Sync()
	return &Store{path: path, lock: f, now: now}, nil
}

// Close gives the lock back.
func (s *Store) Close() error {
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close()
	s.lock = nil
	return err
}

// Path is the journal's path.
func (s *Store) Path() string { return s.path }

// Load returns the journal, nil when there is none. Errors: the file is not private
// (privatefile.Check: a regular file owned by the caller, mode 0600) or not a journal.
func (s *Store) Load() (*Journal, error) { return Read(s.path) }

// Read reads the journal at path without taking its lock (for status): nil when there is none.
func Read(path string) (*Journal, error) {
	data, err := privatefile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j Journal
	if err := json.Unmarshal(data, &j); err != nil || j.Schema != Schema {
		return nil, cubefleet.Invalid("journal", "%s is not a fleet journal (%s): move it away if it is not yours", path, Schema)
	}
	return &j, nil
}

// Save writes j atomically with mode 0600, its UpdatedAt set to now: the workflows call it
// before and after every side effect.
func (s *Store) Save(j *Journal) error {
	if s.lock == nil {
		return errors.New("journal: Save after Close")
	}
	j.Schema, j.UpdatedAt = Schema, s.now().UnixMilli()
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encode journal: %w", err)
	}
	if err := atomicfile.WriteFile(s.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write journal %s: %w", s.path, err)
	}
	return nil
}

// Begin records that step is about to be attempted (for cube, "" for none) and saves j.
func (s *Store) Begin(j *Journal, step, cube string) error {
	j.Steps = append(j.Steps, Step{Name: step, Cube: cube, Started: s.now().UnixMilli()})
	return s.Save(j)
}

// Finish records that the last step named step succeeded, with detail, and saves j.
func (s *Store) Finish(j *Journal, step, detail string) error {
	for i := len(j.Steps) - 1; i >= 0; i-- {
		if j.Steps[i].Name == step && j.Steps[i].Done == 0 {
			j.Steps[i].Done, j.Steps[i].Detail = s.now().UnixMilli(), detail
			return s.Save(j)
		}
	}
	return fmt.Errorf("journal: no open step %q to finish", step)
}

// Abandon closes an open journal after a person cleaned up what the run left (note says
// what), so the next run starts afresh. Errors: INVALID_INPUT when there is no open journal.
func (s *Store) Abandon(note string) (*Journal, error) {
	j, err := s.Load()
	if err != nil {
		return nil, err
	}
	if j == nil || j.State != StateOpen {
		return nil, cubefleet.Invalid("--abandon", "%s holds no open journal: nothing to abandon", s.path)
	}
	j.State, j.Note = StateAbandoned, note
	return j, s.Save(j)
}

// Unfinished returns the steps of j that started and never finished (outcome unknown).
func (j *Journal) Unfinished() []Step {
	var out []Step
	for _, st := range j.Steps {
		if st.Done == 0 {
			out = append(out, st)
		}
	}
	return out
}

// NewRun returns a run id from t: "r" and the UTC time to the second in base 36, short enough
// to be part of a Cube's name and unique per second.
func NewRun(t time.Time) string { return "r" + strconv.FormatInt(t.Unix(), 36) }

// CubeName is the unique name a run gives the Cube it creates for slot (a 0-based index):
// prefix (the profile's cube_name_prefix), the run id (NewRun), "-" and the slot's index,
// such as "cube-rtpe840-2".
func CubeName(prefix, run string, slot int) string {
	return prefix + run + "-" + strconv.Itoa(slot)
}

// IsCubeName reports whether name is CubeName(prefix, run, slot) for some run id of NewRun's
// form ("r" and base-36 digits).
func IsCubeName(name, prefix string, slot int) bool {
	run, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	run, ok = strings.CutSuffix(run, "-"+strconv.Itoa(slot))
	return ok && IsRun(run)
}

// IsRun reports whether run has NewRun's form: "r" and base-36 digits (lower case).
func IsRun(run string) bool {
	return len(run) >= 2 && run[0] == 'r' && strings.Trim(run[1:], "0123456789abcdefghijklmnopqrstuvwxyz") == ""
}
