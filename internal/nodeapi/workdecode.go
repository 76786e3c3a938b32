package nodeapi

import (
	"fmt"
	"unicode/utf8"
)

// The rules of the work API's bodies (work.go): what the control plane accepts from an agent.
// Both are decoded by the node-agent decoding rules (unknown members ignored, names matched
// case-insensitively), and every refusal is INVALID_INPUT (400) naming the field.

// Limits of the work API's bodies.
const (
	// MaxWorkIDs bounds how many ids a WorkRequest lists in Running, Done and InProgress (10,000 each:
	// more than any node runs; upstream's per-node cap is 3,000 microVMs).
	MaxWorkIDs = 10000
	// MaxSandboxIDLen bounds a sandbox id (128 bytes, the driver's rule).
	MaxSandboxIDLen = 128
	// MaxAssignmentIDLen bounds an assignment id in WorkRequest.Done (64 bytes; ours are
	// asg_ and 26 characters).
	MaxAssignmentIDLen = 64
	// MaxEventReasonLen bounds SandboxEvent.Reason (64 characters without control
	// characters: exited, failed, timeout, stopped, lost).
	MaxEventReasonLen = 64
	// MaxEventMessageRunes bounds SandboxEvent.Message (1,024 characters, no control
	// characters).
	MaxEventMessageRunes = 1024
	// MaxSignalLen bounds SandboxEvent.Signal (32 characters without control characters:
	// "SIGKILL").
	MaxSignalLen = 32
)

// ValidSandboxID reports whether id has a sandbox id's shape: 1 to MaxSandboxIDLen ASCII
// letters, digits, '_', '-' and '.', starting with a letter or digit (the driver's rule: the id
// names a directory on the node).
func ValidSandboxID(id string) bool {
	if len(id) == 0 || len(id) > MaxSandboxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		letterOrDigit := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !letterOrDigit && (i == 0 || c != '_' && c != '-' && c != '.') {
			return false
		}
	}
	return true
}

// DecodeWorkRequest decodes and checks the body of POST RouteWork (Decoder.Work).
func DecodeWorkRequest(body []byte) (*WorkRequest, error) {
	var d Decoder
	d.buf.Write(body)
	req := new(WorkRequest)
	if err := d.Work(req); err != nil {
		return nil, err
	}
	return req, nil
}

// Work decodes the WorkRequest in d into req (which must be zero) and checks it: wait_ms 0 to
// MaxWaitMS; at most MaxWorkIDs ids in running and in done; every running id a sandbox id
// (ValidSandboxID) and every done id 1 to MaxAssignmentIDLen of the same characters. Errors are
// INVALID_INPUT naming the field.
func (d *Decoder) Work(req *WorkRequest) error {
	if err := d.decode(req); err != nil {
		return err
	}
	if req.WaitMS < 0 || req.WaitMS > MaxWaitMS {
		return invalidField("wait_ms", "wait_ms must be 0 to %d milliseconds (got %d)", MaxWaitMS, req.WaitMS)
	}
	if err := checkIDs("running", req.Running, MaxSandboxIDLen); err != nil {
		return err
	}
	if err := checkIDs("in_progress", req.InProgress, MaxAssignmentIDLen); err != nil {
		return err
	}
	return checkIDs("done", req.Done, MaxAssignmentIDLen)
}

// checkIDs checks a list of ids at path: at most MaxWorkIDs, each of the sandbox id shape and at
// most limit bytes.
func checkIDs(path string, ids []string, limit int) error {
	if len(ids) > MaxWorkIDs {
		return invalidField(path, "%s lists %d ids; at most %d", path, len(ids), MaxWorkIDs)
	}
	for i, id := range ids {
		if len(id) > limit || !ValidSandboxID(id) {
			p := fmt.Sprintf("%s[%d]", path, i)
			return invalidField(p, "%s must be 1 to %d ASCII letters, digits, '_', '-' and '.', starting with a letter or digit", p, limit)
		}
	}
	return nil
}

// DecodeSandboxEvent decodes and checks the body of POST RouteSandboxEvent
// (Decoder.SandboxEvent).
func DecodeSandboxEvent(body []byte) (*SandboxEvent, error) {
	var d Decoder
	d.buf.Write(body)
	ev := new(SandboxEvent)
	if err := d.SandboxEvent(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// SandboxEvent decodes the SandboxEvent in d into ev (which must be zero) and checks it: state
// one of the node's states (SandboxState.Valid); reason, message and signal at most
// MaxEventReasonLen, MaxEventMessageRunes and MaxSignalLen characters without control
// characters; exit_code 0 to 255; cpu_ms and peak_memory_bytes at least 0. The output's size is
// bounded by the route's body limit; the control plane keeps output only from a final state.
// Errors are INVALID_INPUT naming the field.
func (d *Decoder) SandboxEvent(ev *SandboxEvent) error {
	if err := d.decode(ev); err != nil {
		return err
	}
	if !ev.State.Valid() {
		return invalidField("state", "state must be running, exited, failed, killed or lost (got %q)", ev.State)
	}
	for _, f := range []struct {
		path, v string
		max     int
	}{{"reason", ev.Reason, MaxEventReasonLen}, {"message", ev.Message, MaxEventMessageRunes}, {"signal", ev.Signal, MaxSignalLen}} {
		if utf8.RuneCountInString(f.v) > f.max {
			return invalidField(f.path, "%s is longer than %d characters", f.path, f.max)
		}
		if err := CheckText(f.path, f.v); err != nil {
			return err
		}
	}
	if ev.ExitCode != nil && (*ev.ExitCode < 0 || *ev.ExitCode > 255) {
		return invalidField("exit_code", "exit_code must be 0 to 255 (got %d)", *ev.ExitCode)
	}
	if err := nonNegative("cpu_ms", ev.CPUMillis); err != nil {
		return err
	}
	if err := nonNegative("peak_memory_bytes", ev.PeakMemoryBytes); err != nil {
		return err
	}
	return nil
}

// SandboxOutput decodes the SandboxOutput in d into out (which must be zero) and checks it:
// offsets at least 0, each chunk at most MaxOutputChunk bytes. Errors are INVALID_INPUT naming
// the field.
func (d *Decoder) SandboxOutput(out *SandboxOutput) error {
	if err := d.decode(out); err != nil {
		return err
	}
	if err := nonNegative("stdout_offset", out.StdoutOffset); err != nil {
		return err
	}
	if err := nonNegative("stderr_offset", out.StderrOffset); err != nil {
		return err
	}
	if len(out.Stdout) > MaxOutputChunk {
		return invalidField("stdout", "stdout is longer than %d bytes: send the rest in another chunk", MaxOutputChunk)
	}
	if len(out.Stderr) > MaxOutputChunk {
		return invalidField("stderr", "stderr is longer than %d bytes: send the rest in another chunk", MaxOutputChunk)
	}
	return nil
}

// DecodeSandboxOutput decodes and checks the body of POST RouteSandboxOutput
// (Decoder.SandboxOutput).
func DecodeSandboxOutput(body []byte) (*SandboxOutput, error) {
	var d Decoder
	d.buf.Write(body)
	out := new(SandboxOutput)
	if err := d.SandboxOutput(out); err != nil {
		return nil, err
	}
	return out, nil
}
