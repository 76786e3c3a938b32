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

// TestRoundtripStatus prints the journals for people and scripts, and --abandon closes an
// open roundtrip journal (golden file).
func TestRoundtripStatus(t *testing.T) {
	dir := t.TempDir()
	b := &transcript{t: t}
	record := b.run
	record("roundtrip", "status", "--private-dir", dir)

	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	s, err := journal.Open(filepath.Join(dir, journal.RoundtripPath), clock)
	if err != nil {
		t.Fatal(err)
	}
	run := journal.NewRun(at)
	j := &journal.Journal{Workflow: "roundtrip up", Run: run, State: journal.StateOpen, StartedAt: at.UnixMilli(),
		Cubes:       []journal.Cube{{Name: "cube-" + run + "-2", Slot: 2, PrivateIP: "10.7.0.13", ServerID: "5a000000-0000-4000-8000-000000000009", RequestID: "req-1"}},
		TargetLists: map[string][]string{"tg-1": {"10.7.0.11:8080", "10.7.0.12:8080"}}}
	for _, step := range []string{"create server", "attach security group"} {
		if err := s.Begin(j, step, j.Cubes[0].Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(j, "create server", "request req-1 DONE"); err != nil {
		t.Fatal(err)
	}
	record("roundtrip", "status", "--private-dir", dir)
	record("roundtrip", "status", "--private-dir", dir, "--abandon") // the run still holds the lock
	s.Close()
	var out statusOut
	if err := json.Unmarshal([]byte(record("roundtrip", "status", "--private-dir", dir, "-o", "json")), &out); err != nil ||
		out.Roundtrip == nil || out.Roundtrip.Cubes[0].ServerID != j.Cubes[0].ServerID || len(out.Roundtrip.Unfinished()) != 1 {
		t.Errorf("status -o json: %+v %v", out, err)
	}
	record("roundtrip", "status", "--private-dir", dir, "--note", "deleted by hand")
	record("roundtrip", "status", "--private-dir", dir, "--abandon", "--note", "deleted the server by hand")
	record("roundtrip", "status", "--private-dir", dir, "--abandon")
	host, _ := os.Hostname()
	got := strings.ReplaceAll(b.String(), dir, "$TMP")
	if host != "" {
		got = strings.ReplaceAll(got, "on host "+host, "on host $HOST")
	}
	got = pidPattern.ReplaceAllLiteralString(got, "pid $PID")
	got = sincePattern.ReplaceAllLiteralString(got, "since $TIME")
	testkit.Golden(t, "roundtrip_status.golden", []byte(got))
}

var (
	pidPattern   = regexp.MustCompile(`pid \d+`)
	sincePattern = regexp.MustCompile(`since \d{4}-\d\d-\d\dT[0-9:]+Z`)
)
