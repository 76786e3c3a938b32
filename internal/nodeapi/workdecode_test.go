package nodeapi_test

import (
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

func TestDecodeWorkRequest(t *testing.T) {
	req, err := nodeapi.DecodeWorkRequest([]byte(`{"running":["sbx_01A","sbx_01B"],"done":["asg_01C"],"wait_ms":25000,"draining":true,"future":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Running) != 2 || req.Done[0] != "asg_01C" || req.WaitMS != 25000 || !req.Draining {
		t.Fatalf("decoded %+v", req)
	}
	many := `{"running":[` + strings.Repeat(`"a",`, nodeapi.MaxWorkIDs) + `"a"]}`
	for body, path := range map[string]string{
		`{"wait_ms":-1}`:                               "wait_ms",
		`{"wait_ms":30001}`:                            "wait_ms",
		`{"running":["../etc"]}`:                       "running[0]",
		`{"running":["ok","a b"]}`:                     "running[1]",
		`{"done":["` + strings.Repeat("a", 65) + `"]}`: "done[0]",
		many:              "running",
		`{"running":"x"}`: "",
		`[]`:              "",
	} {
		_, err := nodeapi.DecodeWorkRequest([]byte(body))
		if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Errorf("%.60s: got %v, want INVALID_INPUT", body, err)
			continue
		}
		if got := err.(*cubefleet.Error).Details["path"]; got != path {
			t.Errorf("%.60s: path %v, want %q", body, got, path)
		}
	}
}

func TestDecodeSandboxEvent(t *testing.T) {
	ev, err := nodeapi.DecodeSandboxEvent([]byte(`{"state":"exited","at":"2026-05-04T10:00:00Z","reason":"exited","exit_code":2,"stdout":"aGk=","stdout_truncated":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.State != nodeapi.StateExited || *ev.ExitCode != 2 || string(ev.Stdout) != "hi" || !ev.StdoutTruncated {
		t.Fatalf("decoded %+v", ev)
	}
	for body, path := range map[string]string{
		`{"state":"pending"}`:                                           "state",
		`{"state":"exited","exit_code":256}`:                            "exit_code",
		`{"state":"killed","signal":"SIG\nKILL"}`:                       "signal",
		`{"state":"failed","message":"a\u001bb"}`:                       "message",
		`{"state":"failed","reason":"` + strings.Repeat("r", 65) + `"}`: "reason",
		`{"state":"exited","cpu_ms":-1}`:                                "cpu_ms",
		`{"state":"exited","peak_memory_bytes":-1}`:                     "peak_memory_bytes",
		`{"state":"exited","stdout":"not base64!"}`:                     "",
	} {
		_, err := nodeapi.DecodeSandboxEvent([]byte(body))
		if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Errorf("%.60s: got %v, want INVALID_INPUT", body, err)
			continue
		}
		if got := err.(*cubefleet.Error).Details["path"]; got != path {
			t.Errorf("%.60s: path %v, want %q", body, got, path)
		}
	}
}

func TestValidSandboxID(t *testing.T) {
	for id, want := range map[string]bool{
		"sbx_01JV3K8Q6W4Z0M5N7P9R2T4V6X": true, "a": true, "a.b-c_d": true, "": false, "_a": false, ".a": false,
		"a/b": false, "a b": false, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
	} {
		if got := nodeapi.ValidSandboxID(id); got != want {
			t.Errorf("ValidSandboxID(%q) = %v", id, got)
		}
	}
}

// FuzzDecodeWork: no work request or sandbox event body panics its decoder, and an accepted one
// keeps the rules: ids of the sandbox id shape, bounded lists and wait, a valid state, text
// without control characters.
func FuzzDecodeWork(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"running":[],"done":[],"wait_ms":0}`, `{"running":["sbx_1"],"wait_ms":30000,"draining":true}`,
		`{"RUNNING":["a"],"running":["b"]}`, `{"state":"running"}`, `{"state":"exited","exit_code":0,"stdout":"aGk="}`,
		`{"state":"killed","signal":"SIGKILL","reason":"timeout","message":"timeout after 30s"}`, `{"state":"lost","at":"2026-05-04T10:00:00Z"}`,
		`{"wait_ms":1e9}`, `{"exit_code":-1,"state":"exited"}`, "{\"message\":\"\xff\",\"state\":\"failed\"}",
		`{"stdout_offset":0,"stdout":"aGk=","stderr_offset":3}`, `{"stdout_offset":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := nodeapi.DecodeWorkRequest(body); err == nil {
			if req.WaitMS < 0 || req.WaitMS > nodeapi.MaxWaitMS || len(req.Running) > nodeapi.MaxWorkIDs || len(req.Done) > nodeapi.MaxWorkIDs {
				t.Fatalf("accepted a request out of bounds: %+v", req)
			}
			for _, id := range append(req.Running, req.Done...) {
				if !nodeapi.ValidSandboxID(id) {
					t.Fatalf("accepted id %q", id)
				}
			}
		}
		if ev, err := nodeapi.DecodeSandboxEvent(body); err == nil {
			if !ev.State.Valid() || ev.CPUMillis < 0 || ev.PeakMemoryBytes < 0 || ev.ExitCode != nil && (*ev.ExitCode < 0 || *ev.ExitCode > 255) {
				t.Fatalf("accepted an event out of bounds: %+v", ev)
			}
			noControl(t, "event text", ev.Reason, ev.Message, ev.Signal)
		}
		if out, err := nodeapi.DecodeSandboxOutput(body); err == nil {
			if out.StdoutOffset < 0 || out.StderrOffset < 0 || len(out.Stdout) > nodeapi.MaxOutputChunk || len(out.Stderr) > nodeapi.MaxOutputChunk {
				t.Fatalf("accepted an output chunk out of bounds: %+v", out)
			}
		}
	})
}

func TestTruncationMarker(t *testing.T) {
	if m := nodeapi.TruncationMarker(1000); m != "\n[cubefleet: output truncated after 1000 bytes]\n" {
		t.Errorf("TruncationMarker = %q", m)
	}
	if n := len(nodeapi.TruncationMarker(1<<63 - 1)); n != nodeapi.MaxTruncationMarkerLen {
		t.Errorf("the longest marker is %d bytes, MaxTruncationMarkerLen %d", n, nodeapi.MaxTruncationMarkerLen)
	}
}
