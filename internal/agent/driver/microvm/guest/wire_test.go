package guest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func frames(t testing.TB, fs ...Frame) []byte {
	t.Helper()
	var b []byte
	for _, f := range fs {
		b = AppendFrame(b, f.Type, f.Payload)
	}
	return b
}

func js(v any) []byte { p, _ := json.Marshal(v); return p }

// The result port reads as the guest wrote it: a frame cut off at the end is left for later,
// output past the limit is dropped, and garbage is ErrCorrupt keeping what came before it.
func TestReadFrames(t *testing.T) {
	full := frames(t, Frame{FrameReady, js(Ready{Kernel: "6.1.0"})}, Frame{FrameStarted, js(Started{PID: 7})},
		Frame{FrameStdout, []byte("hello ")}, Frame{FrameStderr, []byte("err")}, Frame{FrameStdout, []byte("world")},
		Frame{FrameEnd, js(End{Ran: true, ExitCode: 3, StdoutBytes: 11})})
	r, err := ReadFrames(full, 0)
	if err != nil || r.Ready.Kernel != "6.1.0" || r.Started.PID != 7 || string(r.Stdout) != "hello world" || string(r.Stderr) != "err" || r.End.ExitCode != 3 {
		t.Fatalf("%+v, %v", r, err)
	}
	if r, _ := ReadFrames(full, 8); string(r.Stdout) != "hello wo" {
		t.Errorf("limited stdout %q", r.Stdout)
	}
	if r, err := ReadFrames(full[:len(full)-3], 0); err != nil || r.End != nil || string(r.Stdout) != "hello world" {
		t.Errorf("cut: %+v, %v", r, err)
	}
	for name, bad := range map[string][]byte{
		"unknown type": append(frames(t, Frame{FrameStdout, []byte("a")}), 'Z', 0, 0, 0, 0),
		"huge frame":   append(frames(t, Frame{FrameStdout, []byte("a")}), 'O', 0xff, 0xff, 0xff, 0xff),
		"bad end":      frames(t, Frame{FrameStdout, []byte("a")}, Frame{FrameEnd, []byte("{")}),
	} {
		r, err := ReadFrames(bad, 0)
		if !errors.Is(err, ErrCorrupt) || string(r.Stdout) != "a" {
			t.Errorf("%s: %+v, %v", name, r, err)
		}
	}
}

func TestReadLine(t *testing.T) {
	r := strings.NewReader("{\"op\":\"run\"}\nnext")
	if l, err := ReadLine(r, 100); err != nil || string(l) != `{"op":"run"}` {
		t.Fatalf("%q, %v", l, err)
	}
	if _, err := ReadLine(strings.NewReader(strings.Repeat("x", 20)+"\n"), 10); err == nil {
		t.Error("a line over the limit was read")
	}
}

// FuzzReadFrames: whatever the result port holds (tenant output, or a guest gone wrong), the
// parser neither panics nor keeps more than the limit of a stream.
func FuzzReadFrames(f *testing.F) {
	f.Add(frames(f, Frame{FrameReady, js(Ready{})}, Frame{FrameStdout, []byte("abc")}, Frame{FrameEnd, js(End{})}), int64(2))
	f.Add([]byte("X\x00\x00\x00\x02{}"), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		r, _ := ReadFrames(data, limit)
		if limit > 0 && (int64(len(r.Stdout)) > limit || int64(len(r.Stderr)) > limit) {
			t.Fatalf("kept %d/%d bytes over the limit %d", len(r.Stdout), len(r.Stderr), limit)
		}
		_ = bytes.Clone(r.Stdout)
	})
}
