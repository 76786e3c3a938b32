package journal_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/cubes/journal"
)

// TestCubeName: a run's Cube name is recognised for its slot only, with NewRun's run ids.
func TestCubeName(t *testing.T) {
	run := journal.NewRun(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC))
	name := journal.CubeName("cube-", run, 2)
	if name != "cube-"+run+"-2" || !journal.IsRun(run) {
		t.Fatalf("CubeName: %q, IsRun(%q) %v", name, run, journal.IsRun(run))
	}
	for _, tc := range []struct {
		name, prefix string
		slot         int
		want         bool
	}{
		{name, "cube-", 2, true},
		{name, "cube-", 12, false},
		{name, "", 2, false}, // "cube-r..." is not a run id
		{"cube-" + run + "-2", "cub", 2, false},
		{"cube-R1-2", "cube-", 2, false},
		{"cube-r-2", "cube-", 2, false},
		{"cube-r1-2-2", "cube-", 2, false},
		{"cube-r1-12", "cube-", 2, false},
		{"cube-r1-12", "cube-", 12, true},
	} {
		if got := journal.IsCubeName(tc.name, tc.prefix, tc.slot); got != tc.want {
			t.Errorf("IsCubeName(%q, %q, %d) = %v, want %v", tc.name, tc.prefix, tc.slot, got, tc.want)
		}
	}
}

// FuzzIsCubeName: any server name (the cloud's, which anyone with API access sets) is judged
// without a panic, and a name accepted for a slot is that slot's CubeName of a valid run id.
func FuzzIsCubeName(f *testing.F) {
	f.Add("cube-rtpe840-2", "cube-", 2)
	f.Add("cube--2", "cube-", -2)
	f.Add("", "", 0)
	f.Fuzz(func(t *testing.T, name, prefix string, slot int) {
		if !journal.IsCubeName(name, prefix, slot) {
			return
		}
		suffix := "-" + strconv.Itoa(slot)
		run := name[len(prefix) : len(name)-len(suffix)]
		if !journal.IsRun(run) || journal.CubeName(prefix, run, slot) != name {
			t.Errorf("IsCubeName(%q, %q, %d) accepted run %q", name, prefix, slot, run)
		}
	})
}
