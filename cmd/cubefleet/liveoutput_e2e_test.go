package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
)

// liveLogs is the answer of sandboxes.logs with its resume offsets (text encoding).
type liveLogs struct {
	sandboxLogs
	NextStdoutOffset int64 `json:"nextStdoutOffset"`
	NextStderrOffset int64 `json:"nextStderrOffset"`
}

// follow calls sandboxes.logs with follow from the offsets, waiting at most 10 s.
func (f *sandboxFleet) follow(id string, stdoutOffset, stderrOffset int64) liveLogs {
	f.t.Helper()
	var l liveLogs
	in := map[string]any{"tenantId": "root", "id": id, "follow": true, "stdoutOffset": stdoutOffset, "stderrOffset": stderrOffset, "timeoutSeconds": 10}
	if err := f.api.Call(context.Background(), "sandboxes.logs", in, &l); err != nil {
		f.t.Fatalf("sandboxes.logs %s with follow: %v", id, err)
	}
	return l
}

// waitFor waits until s() holds want, at most within.
func waitFor(t *testing.T, what string, s func() string, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(s(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q has not arrived within %s: %q", what, want, within, s())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLiveOutput runs long sandboxes on a real agent and follows their output while they run:
// `sandboxes logs --follow` and `sandboxes create --wait` print a line before the sandbox ends,
// sandboxes.logs with follow resumes from the offsets it answered, and output past
// --result-max-bytes is cut with the marker while the sandbox runs as in its stored result.
func TestLiveOutput(t *testing.T) {
	f := newSandboxFleet(t, "", 1)

	// logs --follow prints the first line while the sandbox sleeps, and the rest at its end.
	s := f.create("sh", nil, "/bin/sh", "-c", "echo started; echo oops >&2; sleep 3; echo done")
	logs := f.c.start("sandboxes", "logs", s.ID, "--tenant", "root", "--follow")
	waitFor(t, "logs --follow", logs.stdout.String, "started\n", 2500*time.Millisecond)
	waitFor(t, "logs --follow (stderr)", logs.stderr.String, "oops\n", time.Second)
	if st := f.get(s.ID).State; st != sandboxes.StateRunning {
		t.Fatalf("the sandbox is %s once its first line arrived; the test needs it running", st)
	}
	if code, out, errOut := logs.wait(t, 10*time.Second); code != 0 || out != "started\ndone\n" || errOut != "oops\n" {
		t.Errorf("logs --follow: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Resume: from the offsets of the first answer, the next holds only what came after.
	s = f.create("sh", nil, "/bin/sh", "-c", "echo one; sleep 1; echo two; sleep 30")
	first := f.follow(s.ID, 0, 0)
	for first.Stdout == "" && !first.Final {
		first = f.follow(s.ID, first.NextStdoutOffset, first.NextStderrOffset)
	}
	if first.Stdout != "one\n" || first.Final || first.NextStdoutOffset != 4 {
		t.Fatalf("first answer: %+v", first)
	}
	second := f.follow(s.ID, first.NextStdoutOffset, first.NextStderrOffset)
	if second.Stdout != "two\n" || second.Final || second.NextStdoutOffset != 8 {
		t.Errorf("the answer resumed from offset 4: %+v", second)
	}
	if again := f.follow(s.ID, 4, 0); again.Stdout != "two\n" {
		t.Errorf("the answer from offset 4 again: %+v", again)
	}
	f.api.Call(context.Background(), "sandboxes.delete", map[string]any{"tenantId": "root", "id": s.ID}, nil)

	// Bounded: output past --result-max-bytes is cut with the marker while the sandbox runs.
	s = f.create("sh", nil, "/bin/sh", "-c", "head -c 20000 /dev/zero | tr '\\0' x; sleep 30")
	marker := nodeapi.TruncationMarker(e2eResultMax)
	var live liveLogs
	for deadline := time.Now().Add(5 * time.Second); !strings.HasSuffix(live.Stdout, marker); {
		if time.Now().After(deadline) {
			t.Fatalf("the cut output has not arrived: %d bytes, %q at its end", len(live.Stdout), live.Stdout[max(0, len(live.Stdout)-60):])
		}
		next := f.follow(s.ID, live.NextStdoutOffset, live.NextStderrOffset)
		next.Stdout = live.Stdout + next.Stdout
		live = next
	}
	if live.Final || len(live.Stdout) != e2eResultMax+len(marker) || strings.Trim(live.Stdout[:e2eResultMax], "x") != "" {
		t.Errorf("the live output past the limit: final %v, %d bytes", live.Final, len(live.Stdout))
	}
	f.api.Call(context.Background(), "sandboxes.delete", map[string]any{"tenantId": "root", "id": s.ID}, nil)

	// create --wait prints the first line while the sandbox runs.
	create := f.c.start("sandboxes", "create", "--tenant", "root", "--template", "sh", "--wait", "--", "/bin/sh", "-c", "echo started; sleep 3; exit 3")
	waitFor(t, "create --wait", create.stdout.String, "started\n", 5*time.Second)
	if code, out, _ := create.wait(t, 10*time.Second); code != 3 || out != "started\n" {
		t.Errorf("create --wait: exit %d, stdout %q", code, out)
	}
}

// BenchmarkLiveOutputLatency measures how long a line printed in a sandbox takes to reach
// `cubefleet sandboxes logs --follow` (a real server and agent on loopback, the process
// runtime): the sandbox prints its clock (date +%s%N) every 50 ms, b.N lines, and the follower
// takes each line's age when it reads it; p50 and p99.
func BenchmarkLiveOutputLatency(b *testing.B) {
	f := newSandboxFleet(b, "", 1)
	n := max(b.N, 20)
	s := f.create("sh", nil, "/bin/sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do date +%%s%%N; sleep 0.05; i=$((i+1)); done", n))
	cmd := exec.Command(f.c.bin, "--url", f.c.url, "--token-file", filepath.Join(f.c.dataDir, "admin.token"), "sandboxes", "logs", s.ID, "--tenant", "root", "--follow")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	lat := make([]time.Duration, 0, n)
	b.ResetTimer()
	for sc := bufio.NewScanner(out); sc.Scan(); {
		ns, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
		if err != nil {
			b.Fatalf("a line of the sandbox: %q", sc.Text())
		}
		lat = append(lat, time.Since(time.Unix(0, ns)))
	}
	b.StopTimer()
	if len(lat) != n {
		b.Fatalf("%d lines reached the follower, want %d", len(lat), n)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
