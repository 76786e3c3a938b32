// Package guest is the inside of a microVM sandbox: the guest init (the cubefleet binary as
// the guest's PID 1, MaybeRun) and the wire between it and the microvm driver on the host.
//
// # The channel
//
// Two virtio-serial ports join the guest to the host (docs/sandbox-runtime.md):
//
//   - PortControl ("cubefleet.control"), a unix socket on the host: the driver writes Requests,
//     one JSON object a line (the run with its command and environment, or a stop); the guest
//     answers each with one Ack line. The environment's values (secrets) only ever travel
//     through this socket, in memory.
//   - PortResult ("cubefleet.result"), a file on the host that QEMU appends to: the guest writes
//     Frames (ready, started, stdout and stderr chunks, the end). The file outlives the agent,
//     so a restarted driver reads how far the sandbox got, its output and its end from it.
//
// The guest's output is tenant data and the frames are parsed as hostile input (ReadFrames).
package guest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The names of the virtio-serial ports (QEMU's virtserialport name=).
const (
	PortControl = "cubefleet.control"
	PortResult  = "cubefleet.result"
)

// Request is one line the host writes on the control port.
type Request struct {
	// Op is "run" (start Argv) or "stop" (end what runs, or the idle guest).
	Op string `json:"op"`
	// Argv, Env and WorkDir are the command, its whole environment ("NAME=value") and its
	// working directory relative to the sandbox's directory in the guest (/sandbox).
	Argv    []string `json:"argv,omitempty"`
	Env     []string `json:"env,omitempty"`
	WorkDir string   `json:"workDir,omitempty"`
	// TimeoutMs ends the command this long after it started (0: none); GraceMs is the time
	// between SIGTERM and SIGKILL (for run and stop).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	GraceMs   int64 `json:"graceMs,omitempty"`
	// OutputLimitBytes caps what the guest sends of each stream; the rest is only counted.
	OutputLimitBytes int64 `json:"outputLimitBytes,omitempty"`
}

// Ack is the guest's answer to a Request: Error is "" when it was carried out.
type Ack struct {
	Error string `json:"error,omitempty"`
}

// FrameType is the first byte of a Frame.
type FrameType byte

// The frames the guest writes on the result port.
const (
	FrameReady   FrameType = 'R' // the guest booted, mounted its disks and waits for a run: Ready
	FrameStarted FrameType = 'S' // the command runs: Started
	FrameStdout  FrameType = 'O' // a chunk of stdout (within the output limit)
	FrameStderr  FrameType = 'E' // a chunk of stderr (within the output limit)
	FrameEnd     FrameType = 'X' // the sandbox ended: End; the guest powers off after it
)

// MaxFrameBytes bounds a frame's payload: a longer one is refused as corrupt.
const MaxFrameBytes = 1 << 20

// frameHeader is the type byte and the payload's length (4 bytes, big endian).
const frameHeader = 5

// Ready is FrameReady's payload.
type Ready struct {
	// Kernel is the guest kernel's release (uname -r).
	Kernel string `json:"kernel"`
	// UptimeMs is the guest's uptime when it became ready, in milliseconds.
	UptimeMs int64 `json:"uptimeMs"`
}

// Started is FrameStarted's payload: the command's process in the guest, or why it could not
// start (then an End follows).
type Started struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// End is FrameEnd's payload: the facts of the end, from which the host words the message.
type End struct {
	// Cause is "" (the command ended by itself), "timeout" or "stopped".
	Cause string `json:"cause,omitempty"`
	// Failed is why the command never ran ("" when it did).
	Failed string `json:"failed,omitempty"`
	// Ran reports whether a command ran (false: a warm guest stopped before its claim).
	Ran bool `json:"ran"`
	// ExitCode is the exit status, -1 when a signal ended it; Signal the signal's name.
	ExitCode int    `json:"exitCode"`
	Signal   string `json:"signal,omitempty"`
	// AfterGrace reports that it ignored SIGTERM and was killed after the grace.
	AfterGrace bool `json:"afterGrace,omitempty"`
	// OOM reports that the guest kernel's OOM killer ended a process while it ran.
	OOM bool `json:"oom,omitempty"`
	// CPUNs and PeakMemoryBytes are the resources its processes used (rusage).
	CPUNs           int64 `json:"cpuNs"`
	PeakMemoryBytes int64 `json:"peakMemoryBytes"`
	// StdoutBytes and StderrBytes are how many bytes it wrote to each stream, cut or not.
	StdoutBytes int64 `json:"stdoutBytes"`
	StderrBytes int64 `json:"stderrBytes"`
}

// Frame is one record of the result port.
type Frame struct {
	Type    FrameType
	Payload []byte
}

// AppendFrame appends the encoding of a frame of type t with payload p to dst.
func AppendFrame(dst []byte, t FrameType, p []byte) []byte {
	dst = append(dst, byte(t))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
	return append(dst, p...)
}

// ErrCorrupt is returned by ReadFrames for a stream that is not a sequence of frames.
var ErrCorrupt = errors.New("the result channel is corrupt")

// Result is what the result port's frames say so far.
type Result struct {
	Ready   *Ready
	Started *Started
	End     *End
	// Stdout and Stderr are the output the guest sent (at most its output limit each).
	Stdout, Stderr []byte
}

// ReadFrames parses the result port's content data: the complete frames, in order (a frame cut
// off at the end is left out: the guest is still writing it). An unknown frame type, a payload
// over MaxFrameBytes or an undecodable ready, started or end payload is ErrCorrupt (wrapped,
// with the offset); the frames before it are returned. Output beyond limit bytes per stream is
// dropped (limit <= 0: none).
func ReadFrames(data []byte, limit int64) (Result, error) {
	var r Result
	for off := 0; len(data)-off >= frameHeader; {
		t := FrameType(data[off])
		n := binary.BigEndian.Uint32(data[off+1 : off+frameHeader])
		if n > MaxFrameBytes {
			return r, fmt.Errorf("%w: a frame of %d bytes at offset %d", ErrCorrupt, n, off)
		}
		if uint64(len(data)-off-frameHeader) < uint64(n) {
			break
		}
		p := data[off+frameHeader : off+frameHeader+int(n)]
		var err error
		switch t {
		case FrameReady:
			r.Ready = new(Ready)
			err = json.Unmarshal(p, r.Ready)
		case FrameStarted:
			r.Started = new(Started)
			err = json.Unmarshal(p, r.Started)
		case FrameEnd:
			r.End = new(End)
			err = json.Unmarshal(p, r.End)
		case FrameStdout:
			r.Stdout = appendLimited(r.Stdout, p, limit)
		case FrameStderr:
			r.Stderr = appendLimited(r.Stderr, p, limit)
		default:
			err = errors.New("unknown frame type")
		}
		if err != nil {
			return r, fmt.Errorf("%w: frame %q at offset %d: %v", ErrCorrupt, byte(t), off, err)
		}
		off += frameHeader + int(n)
	}
	return r, nil
}

func appendLimited(dst, p []byte, limit int64) []byte {
	if limit > 0 {
		room := limit - int64(len(dst))
		if room <= 0 {
			return dst
		}
		if int64(len(p)) > room {
			p = p[:room]
		}
	}
	return append(dst, p...)
}

// ReadLine reads one newline-terminated line of at most max bytes from r, a byte at a time (so
// that nothing after the line is consumed), without the newline. A longer line is an error.
func ReadLine(r io.Reader, max int) ([]byte, error) {
	var line bytes.Buffer
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return line.Bytes(), nil
			}
			if line.Len() >= max {
				return nil, fmt.Errorf("a line of more than %d bytes", max)
			}
			line.WriteByte(b[0])
			continue
		}
		if err != nil {
			return nil, err
		}
	}
}
