// Package driver is the boundary between the agent and whatever runs a sandbox on its node: the
// Driver interface (start, wait, stop, stats, list for recovery), the Spec a sandbox is started
// from and the Status it is reported with. The process driver (package process, beside this
// one) runs each sandbox as a child process under its own user; a microVM driver can implement
// the same interface later (docs/sandbox-runtime.md, "The driver interface").
//
// A sandbox id starts at most once on a node: Start (and Warm) is idempotent by Spec.ID, across
// calls, goroutines and agent restarts, until Remove forgets the sandbox.
//
// A warm sandbox (Warm) is started ahead of need from its template's limits and runs nothing of
// a tenant's: its runtime is up, in its own directory, as its own user, waiting. Claim gives it
// its command and environment, so that a create from a warm pool costs only the exec (in a
// microVM driver: a booted guest waiting for its command).
package driver

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/cubefleet/cubefleet"
)

// Driver runs sandboxes on one node. Every method is safe for concurrent use. Methods that take
// an id return an error with code NOT_FOUND (cubefleet.CodeNotFound) for an id the driver does
// not hold.
type Driver interface {
	// Start starts the sandbox spec describes and returns once its process runs (State
	// running) or could not be started (State failed, with the reason; that is a result, not
	// an error). A spec that breaks a rule is refused with INVALID_INPUT naming the field and
	// nothing is created. Start is idempotent by spec.ID: when the id was started before (by
	// this driver or before an agent restart), it starts nothing and returns that sandbox's
	// current Status, whatever the new spec says.
	Start(ctx context.Context, spec Spec) (Status, error)
	// Warm starts a warm sandbox: everything of spec but its command and environment (Argv and
	// Env must be empty; the claim brings them), ready for Claim, and returns once it waits
	// (State warm) or could not be made ready (State failed). Its limits are spec's; its
	// Timeout, Grace and OutputLimitBytes are the claim's. Like Start, it is idempotent by
	// spec.ID and refuses a spec that breaks a rule (INVALID_INPUT) creating nothing.
	Warm(ctx context.Context, spec Spec) (Status, error)
	// Claim gives the warm sandbox spec.ID its command, environment, working directory,
	// timeout (counted from the claim), grace and output limit, and returns once the command
	// runs (State running) or could not be started (State failed). spec's CPU, memory and disk
	// limits are ignored: the warm sandbox's hold. A sandbox that was claimed before returns its
	// current Status unchanged (a claim is carried out at most once); one that is neither warm
	// nor claimed (it ended before a claim, or was started by Start) is CONFLICT; an unknown
	// id NOT_FOUND.
	Claim(ctx context.Context, spec Spec) (Status, error)
	// Wait blocks until the sandbox has ended and returns its final Status, or returns
	// ctx.Err() when ctx is done first.
	Wait(ctx context.Context, id string) (Status, error)
	// Stop ends a running (or warm) sandbox: SIGTERM (or the runtime's equivalent), then, after the
	// spec's Grace, SIGKILL; it returns the final Status (State killed, Reason stopped) once the
	// sandbox has ended, or ctx.Err() when ctx is done first (the stop goes on). Stopping an
	// ended sandbox returns its Status unchanged.
	Stop(ctx context.Context, id string) (Status, error)
	// Status returns the sandbox's current Status, with its Stats.
	Status(ctx context.Context, id string) (Status, error)
	// Stats returns the resources the sandbox has used so far (its final figures once ended).
	Stats(ctx context.Context, id string) (Stats, error)
	// Output returns the sandbox's captured stdout and stderr, as far as they go (a running
	// sandbox's output so far).
	Output(ctx context.Context, id string) (Output, error)
	// List returns the Status of every sandbox the driver holds on this node, running or
	// ended, sorted by id. After an agent restart it is how the agent finds its sandboxes
	// again: a sandbox whose runtime vanished while the agent was away is reported lost.
	List(ctx context.Context) ([]Status, error)
	// Remove stops the sandbox if it runs, and deletes everything the driver keeps of it
	// (working directory, captured output, records). Its id may then be started again.
	Remove(ctx context.Context, id string) error
	// StopAll stops every sandbox of the driver, as Stop does and in parallel, and when ctx is
	// done before they all ended, kills what remains at once. It returns once no process of
	// any sandbox is left, or an error naming what survived. `agent down` calls it: no sandbox
	// outlives the agent's shutdown.
	StopAll(ctx context.Context) error
	// Close releases the driver (its lock on its directory, any pre-started helpers). Running
	// sandboxes keep running: a new driver on the same directory finds them again.
	Close() error
}

// Spec is what a sandbox runs, as the control plane sends it. The zero value of each limit
// means "not limited" (or, for Grace and OutputLimitBytes, the default).
type Spec struct {
	// ID is the sandbox id (sandboxes API, e.g. sbx_01J...): 1 to 128 ASCII letters, digits,
	// '_', '-' and '.', starting with a letter or digit. It names the sandbox's directory.
	ID string
	// Argv is the command: Argv[0] is the program, found like execvp(3) does: a path with a
	// '/' is used as it is (relative to WorkDir), else it is searched for in the PATH of Env,
	// or /usr/local/bin:/usr/bin:/bin when Env has none. Required.
	Argv []string
	// Env is the sandbox's whole environment, "NAME=value" entries: nothing else is added
	// (no variable of the agent is inherited). Values may be secrets: a driver never logs,
	// stores or reports them, only the names.
	Env []string
	// WorkDir is the working directory, relative to the sandbox's own directory the driver
	// gives it ("" for that directory itself); created when missing. It must not be absolute
	// or climb out with "..".
	WorkDir string
	// Image is the template's image id (fleet document: sandboxTemplates[].imageId), "" when
	// the control plane sent none. The process driver ignores it (a sandbox runs on the host's
	// file system); the microvm driver boots it as the guest's root file system.
	Image string
	// CPUMillicores is the CPU the sandbox may use, in millicores (1000 = one core), 0 for no
	// limit. A driver that cannot enforce it says so in its isolation description.
	CPUMillicores int64
	// MemoryMiB is the memory the sandbox may use, in MiB, 0 for no limit.
	MemoryMiB int64
	// DiskMiB is the disk the sandbox may use, in MiB, 0 for no limit. The process driver
	// gives the work directory a file system of this size where the host lets it (a write
	// past it fails with ENOSPC); a microVM driver sizes the guest's disk with it.
	DiskMiB int64
	// Timeout ends the sandbox this long after it started, as Stop does (Reason timeout); 0
	// for none. Whole seconds on the wire; any duration here.
	Timeout time.Duration
	// Grace is how long a sandbox has between SIGTERM and SIGKILL when it is stopped or times
	// out; 0 means DefaultGrace.
	Grace time.Duration
	// OutputLimitBytes caps each of stdout and stderr, in bytes: the first OutputLimitBytes
	// are kept, then TruncationMarker, and the rest is discarded. 0 means
	// DefaultOutputLimitBytes.
	OutputLimitBytes int64
	// Network is the sandbox template's network: NetworkPrivate ("" too) or NetworkPublic.
	// For a warm sandbox, Warm's holds (a claim's is ignored).
	Network Network
	// EgressAllow are the private prefixes a public sandbox may reach besides the internet
	// (its template's egressAllow); only with NetworkPublic. For a warm sandbox, Warm's holds.
	EgressAllow []netip.Prefix
	// EgressDeny are addresses a public sandbox never reaches even inside EgressAllow: the
	// control plane's (the node's own addresses are unreachable anyway).
	EgressDeny []netip.Addr
}

// Network is a sandbox's network, as its template says.
type Network string

// The networks.
const (
	// NetworkPrivate: a network of its own with loopback only; nothing outside is reachable.
	NetworkPrivate Network = "private"
	// NetworkPublic: egress to the internet only (through NAT), never to the host, other
	// sandboxes, link-local, metadata or private addresses; nothing reaches it from outside.
	NetworkPublic Network = "public"
)

// DefaultGrace is the time between SIGTERM and SIGKILL when Spec.Grace is 0 (10 s, as
// `docker stop`).
const DefaultGrace = 10 * time.Second

// DefaultOutputLimitBytes is the cap of each output stream when Spec.OutputLimitBytes is 0:
// 1 MiB.
const DefaultOutputLimitBytes = 1 << 20

// MaxOutputLimitBytes is the largest Spec.OutputLimitBytes accepted: 64 MiB per stream.
const MaxOutputLimitBytes = 64 << 20

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidID reports whether id has the shape Spec.ID requires.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Validate checks spec, for Start or Claim, against the rules of its fields and returns an
// INVALID_INPUT *cubefleet.Error listing every broken rule (paths "id", "argv", "env[3]", ...),
// or nil. Messages name env entries by index and name, never by value.
func (s Spec) Validate() error { return s.validate(false) }

// ValidateWarm checks spec for Warm: as Validate, except that Argv and Env must be empty (the
// claim brings them).
func (s Spec) ValidateWarm() error { return s.validate(true) }

func (s Spec) validate(warm bool) error {
	var errs []cubefleet.FieldError
	bad := func(path, format string, args ...any) {
		errs = append(errs, cubefleet.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if !ValidID(s.ID) {
		bad("id", "must be 1 to 128 letters, digits, '_', '-' or '.', starting with a letter or digit")
	}
	switch {
	case warm && len(s.Argv) > 0:
		bad("argv", "must be empty for a warm sandbox: the claim brings the command")
	case warm && len(s.Env) > 0:
		bad("env", "must be empty for a warm sandbox: the claim brings the environment")
	case !warm && (len(s.Argv) == 0 || s.Argv[0] == ""):
		bad("argv", "must name the program to run (argv[0])")
	}
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			bad(fmt.Sprintf("argv[%d]", i), "contains a NUL byte")
		}
	}
	for i, e := range s.Env {
		name, _, ok := strings.Cut(e, "=")
		switch {
		case !ok:
			bad(fmt.Sprintf("env[%d]", i), "must be NAME=value")
		case !validEnvName(name):
			bad(fmt.Sprintf("env[%d]", i), "the name must be letters, digits and '_', not starting with a digit")
		case strings.IndexByte(e, 0) >= 0:
			bad(fmt.Sprintf("env[%d]", i), "the value of %s contains a NUL byte", name)
		}
	}
	if s.WorkDir != "" {
		if strings.HasPrefix(s.WorkDir, "/") {
			bad("workDir", "must be relative to the sandbox's directory, not absolute")
		}
		for _, part := range strings.Split(s.WorkDir, "/") {
			if part == ".." {
				bad("workDir", "must stay inside the sandbox's directory (no \"..\")")
				break
			}
		}
		if strings.IndexByte(s.WorkDir, 0) >= 0 {
			bad("workDir", "contains a NUL byte")
		}
	}
	if s.CPUMillicores < 0 {
		bad("cpuMillicores", "must be 0 (no limit) or more")
	}
	if s.MemoryMiB < 0 {
		bad("memoryMiB", "must be 0 (no limit) or more")
	}
	if s.DiskMiB < 0 {
		bad("diskMiB", "must be 0 (no limit) or more")
	}
	if s.Timeout < 0 {
		bad("timeout", "must be 0 (none) or more")
	}
	if s.Network != "" && s.Network != NetworkPrivate && s.Network != NetworkPublic {
		bad("network", "%q is no network: private or public", s.Network)
	}
	if len(s.EgressAllow) > 0 && s.Network != NetworkPublic {
		bad("egressAllow", "is for a public sandbox only (network %q)", s.Network)
	}
	if s.Grace < 0 {
		bad("grace", "must be 0 (the default, %s) or more", DefaultGrace)
	}
	if s.OutputLimitBytes < 0 || s.OutputLimitBytes > MaxOutputLimitBytes {
		bad("outputLimitBytes", "must be from 0 (the default, %d) to %d bytes", DefaultOutputLimitBytes, MaxOutputLimitBytes)
	}
	if len(errs) > 0 {
		return cubefleet.InvalidAll(errs)
	}
	return nil
}

func validEnvName(n string) bool {
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// EnvNames returns the names of env's entries, in order: what may be logged of an environment.
func EnvNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		names = append(names, name)
	}
	return names
}

// GraceOrDefault returns s.Grace, or DefaultGrace when it is 0.
func (s Spec) GraceOrDefault() time.Duration {
	if s.Grace == 0 {
		return DefaultGrace
	}
	return s.Grace
}

// OutputLimitOrDefault returns s.OutputLimitBytes, or DefaultOutputLimitBytes when it is 0.
func (s Spec) OutputLimitOrDefault() int64 {
	if s.OutputLimitBytes == 0 {
		return DefaultOutputLimitBytes
	}
	return s.OutputLimitBytes
}

// TruncationMarker returns the line written after the first limit bytes of an output stream
// that was cut: "\n[cubefleet: output truncated after <limit> bytes]\n".
func TruncationMarker(limit int64) string {
	return fmt.Sprintf("\n[cubefleet: output truncated after %d bytes]\n", limit)
}

// State is where a sandbox is in its life, in the sandboxes API's words (issue "Sandboxes").
type State string

// The states a driver reports. A sandbox is running from a successful Start (or Claim) until it
// ends, warm from a successful Warm until its Claim; the other states are final.
const (
	StateWarm    State = "warm"    // ready for a claim: its runtime is up, running nothing of a tenant's
	StateRunning State = "running" // its process runs
	StateExited  State = "exited"  // it ended on its own: see ExitCode and Signal
	StateFailed  State = "failed"  // it could not be started: see Message
	StateKilled  State = "killed"  // the driver or the kernel ended it: Reason timeout, stopped or oom
	StateLost    State = "lost"    // its runtime vanished (killed, host rebooted): its end is unknown
)

// Reason is why a sandbox ended, machine-readable; "" while it runs. Each Reason has exactly one
// State (Reason.State).
type Reason string

// The reasons a sandbox ends.
const (
	ReasonExited  Reason = "exited"  // StateExited
	ReasonFailed  Reason = "failed"  // StateFailed
	ReasonTimeout Reason = "timeout" // StateKilled: its Spec.Timeout passed
	ReasonStopped Reason = "stopped" // StateKilled: Stop, Remove or StopAll ended it
	// ReasonOOM is StateKilled: the sandbox as a whole went past its MemoryMiB and the kernel's
	// OOM killer ended a process of it (the sandbox then ends with it).
	ReasonOOM  Reason = "oom"
	ReasonLost Reason = "lost" // StateLost
)

// State returns the State a sandbox that ended for r is in: StateRunning for "".
func (r Reason) State() State {
	switch r {
	case "":
		return StateRunning
	case ReasonExited:
		return StateExited
	case ReasonFailed:
		return StateFailed
	case ReasonTimeout, ReasonStopped, ReasonOOM:
		return StateKilled
	default:
		return StateLost
	}
}

// Status is what a driver reports of one sandbox.
type Status struct {
	// ID is the sandbox id (Spec.ID).
	ID string `json:"id"`
	// State is StateWarm, StateRunning, or the final state (Reason.State()).
	State State `json:"state"`
	// Reason is why it ended; "" while it is warm or runs.
	Reason Reason `json:"reason,omitempty"`
	// Message says the same for people: "exited with code 2", "killed by SIGKILL after
	// ignoring SIGTERM for 10s (timeout 1m0s)", "exec: ...: no such file or directory", ...
	Message string `json:"message,omitempty"`
	// PID is the sandbox's main process on the host (the process driver), 0 when there is
	// none (never started, or a microVM driver).
	PID int `json:"pid,omitempty"`
	// Handle identifies the sandbox's runtime to people: "pid 1234, uid 1000017" for the
	// process driver, the VM's name for a microVM driver.
	Handle string `json:"handle,omitempty"`
	// StartedAt is when its process started running; zero if it never did.
	StartedAt time.Time `json:"startedAt,omitzero"`
	// EndedAt is when it ended (or was found lost); zero while it runs.
	EndedAt time.Time `json:"endedAt,omitzero"`
	// ExitCode is the exit status of a sandbox that exited; -1 while it runs, when a signal
	// ended it, or when it never ran.
	ExitCode int `json:"exitCode"`
	// Signal is the signal that ended its main process ("SIGKILL"), "" when none did.
	Signal string `json:"signal,omitempty"`
	// Stats are the resources it used (so far, while it runs).
	Stats Stats `json:"stats"`
	// StdoutBytes and StderrBytes are how many bytes it wrote to each stream, cut or not
	// (known once it ended; 0 while it runs).
	StdoutBytes int64 `json:"stdoutBytes"`
	StderrBytes int64 `json:"stderrBytes"`
}

// Ended reports whether the sandbox is in a final state (neither warm nor running).
func (s Status) Ended() bool { return s.State.Final() }

// Final reports whether s is a final state: every state but warm and running.
func (s State) Final() bool { return s != StateRunning && s != StateWarm }

// Stats are the resources a sandbox used.
type Stats struct {
	// CPU is the CPU time (user and system) its processes consumed.
	CPU time.Duration `json:"cpu"`
	// MemoryBytes is its resident memory now, in bytes (0 once it ended).
	MemoryBytes int64 `json:"memoryBytes"`
	// PeakMemoryBytes is the most resident memory it held, in bytes, as far as the runtime
	// knows: the process driver reports the cgroup's memory.peak when it has one, else the
	// largest resident set of any one of its processes, known once it ended.
	PeakMemoryBytes int64 `json:"peakMemoryBytes"`
}

// Output is a sandbox's captured output: each stream's first Spec.OutputLimitBytes bytes,
// followed by TruncationMarker when it was cut.
type Output struct {
	Stdout []byte
	Stderr []byte
	// StdoutTruncated and StderrTruncated report whether the stream was cut.
	StdoutTruncated bool
	StderrTruncated bool
}
