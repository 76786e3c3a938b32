package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes/journal"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestScaleStatus prints the scale journals for people and scripts, one run with --run, and
// --abandon closes the open one: refused while scale apply holds its lock, refused for an
// unknown or malformed run, and then the next apply would plan afresh (golden file).
func TestScaleStatus(t *testing.T) {
	dir := t.TempDir()
	b := &transcript{t: t}
	record := b.run
	record("scale", "status", "--private-dir", dir)

	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	scaleDir := filepath.Join(dir, journal.ScaleDir)
	write := func(run, state string) {
		t.Helper()
		s, err := journal.Open(filepath.Join(scaleDir, run+".json"), clock)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		j := &journal.Journal{Workflow: "scale apply", Run: run, State: state, StartedAt: at.UnixMilli(),
			Cubes:       []journal.Cube{{Name: "cube-003", Slot: 3, PrivateIP: "10.7.0.14", ServerID: "5a000000-0000-4000-8000-000000000003", PeerKey: "KEY3="}},
			TargetLists: map[string][]string{"tg-1": {"10.7.0.11:8080", "10.7.0.14:8080"}}}
		if err := s.Begin(j, "cordon", "cube-003"); err != nil {
			t.Fatal(err)
		}
		if state == journal.StateDone {
			if err := s.Finish(j, "cordon", "node 10.7.0.14 cordoned"); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("rtpe000", journal.StateDone)
	write("rtpe840", journal.StateOpen)
	record("scale", "status", "--private-dir", dir)
	record("scale", "status", "--private-dir", dir, "--run", "rtpe840")
	record("scale", "status", "--private-dir", dir, "--run", "rnone")
	record("scale", "status", "--private-dir", dir, "--run", "../x")
	record("scale", "status", "--private-dir", dir, "--note", "deleted by hand")

	held, err := journal.Open(filepath.Join(scaleDir, scaleLockName), nil)
	if err != nil {
		t.Fatal(err)
	}
	record("scale", "status", "--private-dir", dir, "--abandon") // a scale apply holds the lock
	held.Close()
	record("scale", "status", "--private-dir", dir, "--abandon", "--run", "rtpe000")
	record("scale", "status", "--private-dir", dir, "--abandon", "--note", "deleted cube-003's server by hand")
	record("scale", "status", "--private-dir", dir, "--abandon")
	var out []journal.Journal
	if err := json.Unmarshal([]byte(record("scale", "status", "--private-dir", dir, "--run", "rtpe840", "-o", "json")), &out); err != nil ||
		len(out) != 1 || out[0].State != journal.StateAbandoned || out[0].Note != "deleted cube-003's server by hand" {
		t.Errorf("status -o json after --abandon: %+v %v", out, err)
	}
	if open, err := openScaleJournal(scaleDir); open != nil || err != nil {
		t.Errorf("an open scale journal after --abandon: %+v %v", open, err)
	}
	host, _ := os.Hostname()
	got := strings.ReplaceAll(b.String(), dir, "$TMP")
	if host != "" {
		got = strings.ReplaceAll(got, "on host "+host, "on host $HOST")
	}
	got = pidPattern.ReplaceAllLiteralString(got, "pid $PID")
	got = sincePattern.ReplaceAllLiteralString(got, "since $TIME")
	got = regexp.MustCompile(`"updatedAt": \d+`).ReplaceAllLiteralString(got, `"updatedAt": $NOW`) // the abandon's, by the real clock
	testkit.Golden(t, "scale_status.golden", []byte(got))
}

// TestNewScaleRun: a run id already journaled in the directory is never given to a new run
// (its Cubes' names would be another run's).
func TestNewScaleRun(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	if got := newScaleRun(dir, at); got != journal.NewRun(at) {
		t.Errorf("in an empty directory: %s, want %s", got, journal.NewRun(at))
	}
	for _, d := range []time.Duration{0, time.Second} {
		if err := os.WriteFile(filepath.Join(dir, journal.NewRun(at.Add(d))+".json"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := newScaleRun(dir, at), journal.NewRun(at.Add(2*time.Second)); got != want {
		t.Errorf("with the runs of this second and the next journaled: %s, want %s", got, want)
	}
}
