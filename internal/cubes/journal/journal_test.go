package journal_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/cubes/journal"
)

// TestMain lets the test binary hold a journal's lock in a child process (JOURNAL_HOLD).
func TestMain(m *testing.M) {
	if path := os.Getenv("JOURNAL_HOLD"); path != "" {
		s, err := journal.Open(path, nil)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		defer s.Close()
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".private", journal.RoundtripPath)
	clock := time.UnixMilli(1_790_000_000_000)
	s, err := journal.Open(path, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if j, err := s.Load(); j != nil || err != nil {
		t.Fatalf("a fresh store: %+v %v, want no journal", j, err)
	}
	j := &journal.Journal{Workflow: "roundtrip up", Run: journal.NewRun(clock), State: journal.StateOpen, StartedAt: clock.UnixMilli(),
		Cubes: []journal.Cube{{Name: "cube-" + journal.NewRun(clock) + "-2", Slot: 2, PrivateIP: "10.7.0.13"}}}
	if err := s.Begin(j, "create server", j.Cubes[0].Name); err != nil {
		t.Fatal(err)
	}
	if got := j.Unfinished(); len(got) != 1 || got[0].Name != "create server" {
		t.Errorf("unfinished %+v", got)
	}
	clock = clock.Add(time.Second)
	j.Cubes[0].ServerID, j.Cubes[0].RequestID = "5a000000-0000-4000-8000-000000000009", "req-1"
	if err := s.Finish(j, "create server", "request req-1"); err != nil {
		t.Fatal(err)
	}
	got, err := journal.Read(path)
	if err != nil || got == nil || got.Cubes[0].ServerID != j.Cubes[0].ServerID || len(got.Unfinished()) != 0 ||
		got.Steps[0].Done != clock.UnixMilli() || got.UpdatedAt != clock.UnixMilli() || got.Schema != journal.Schema {
		t.Errorf("read back %+v %v", got, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v %v, want 0600", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("journal directory mode %v, want 0700", di.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if e.Name() != "journal.json" && e.Name() != "journal.json.lock" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if err := s.Finish(j, "no such step", ""); err == nil {
		t.Error("finishing a step that never began")
	}

	// Abandon closes it once.
	if a, err := s.Abandon("server deleted by hand"); err != nil || a.State != journal.StateAbandoned || a.Note != "server deleted by hand" {
		t.Errorf("abandon: %+v %v", a, err)
	}
	if _, err := s.Abandon("again"); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
		t.Errorf("abandon of a closed journal: %v, want INVALID_INPUT", err)
	}

	// A journal that is not private, or not a journal, is refused.
	os.Chmod(path, 0o644)
	if _, err := journal.Read(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a 0644 journal: %v, want a refusal saying chmod 600", err)
	}
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"schema":"something else"}`), 0o600)
	if _, err := journal.Read(other); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
		t.Errorf("not a journal: %v", err)
	}
}

// TestLock: a second run is refused while the first holds the journal, naming its pid and
// host; when the holder is killed (-9), the next run takes the journal over.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), journal.RoundtripPath)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JOURNAL_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "held\n" {
		t.Fatalf("holder: %q", line)
	}
	_, err = journal.Open(path, nil)
	var le *journal.LockError
	host, _ := os.Hostname()
	if !errors.As(err, &le) || !strings.Contains(le.Holder, fmt.Sprintf("pid %d on host %s", cmd.Process.Pid, host)) {
		t.Fatalf("second run: %v, want a lock error naming pid %d on %s", err, cmd.Process.Pid, host)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s, err := journal.Open(path, nil)
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	defer s.Close()
	// In one process too: a second Open is refused until Close.
	if _, err := journal.Open(path, nil); !errors.As(err, &le) || !strings.Contains(le.Holder, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("a second Open in the same process: %v", err)
	}
	s.Close()
	s2, err := journal.Open(path, nil)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	s2.Close()
}

// TestDoneBegun: a step is done when its last entry finished; one begun again after it
// finished (a create rolled back) is open, and Begun returns it.
func TestDoneBegun(t *testing.T) {
	s, err := journal.Open(filepath.Join(t.TempDir(), "j.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := &journal.Journal{Workflow: "roundtrip up", Run: "r1", State: journal.StateOpen}
	if j.Done("create-server", "") || j.Begun("create-server", "") != nil {
		t.Fatal("a step never begun is done or begun")
	}
	s.Begin(j, "create-server", "cube-r1-2")
	if j.Done("create-server", "cube-r1-2") || j.Begun("create-server", "cube-r1-2") == nil || j.Begun("create-server", "cube-r1-3") != nil {
		t.Errorf("begun: %+v", j.Steps)
	}
	s.Finish(j, "create-server", "request 1")
	if !j.Done("create-server", "") || j.Begun("create-server", "") != nil {
		t.Errorf("finished: %+v", j.Steps)
	}
	s.Begin(j, "create-server", "cube-r1-2")
	if j.Done("create-server", "cube-r1-2") || j.Begun("create-server", "cube-r1-2") == nil {
		t.Errorf("begun again: %+v", j.Steps)
	}
}
