package testkit_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/testkit"
)

// recorder is a testing.TB that records a failure instead of failing the test; Fatalf ends
// the goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// run calls fn with a recorder in a goroutine of its own (Fatalf ends it) and returns the
// failures it recorded.
func run(t *testing.T, fn func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r.failed
}

// updating reports whether the run has -update: the comparison tests then skip, since Golden
// would rewrite their fixture.
func updating() bool { return flag.Lookup("update").Value.String() == "true" }

func TestGolden(t *testing.T) {
	if updating() {
		t.Skip("-update: Golden writes instead of comparing")
	}
	if f := run(t, func(tb testing.TB) { testkit.Golden(tb, "sample.golden", []byte("line one\nline two\n")) }); len(f) != 0 {
		t.Errorf("the same bytes failed: %v", f)
	}
	f := run(t, func(tb testing.TB) { testkit.Golden(tb, "sample.golden", []byte("line one\nline 2\n")) })
	if len(f) != 1 || !strings.Contains(f[0], "go test -update rewrites it") || !strings.Contains(f[0], "--- got\nline one\nline 2\n") ||
		!strings.Contains(f[0], "--- want\nline one\nline two\n") || !strings.Contains(f[0], filepath.Join("testdata", "sample.golden")) {
		t.Errorf("a difference: %q", f)
	}
	f = run(t, func(tb testing.TB) { testkit.Golden(tb, "missing.golden", []byte("x")) })
	if len(f) != 1 || !strings.Contains(f[0], "go test -update creates it") {
		t.Errorf("a missing golden file: %q", f)
	}

	// A changed working directory does not move testdata.
	t.Chdir(t.TempDir())
	if f := run(t, func(tb testing.TB) { testkit.Golden(tb, "sample.golden", []byte("line one\nline two\n")) }); len(f) != 0 {
		t.Errorf("after a chdir: %v", f)
	}
	if _, err := os.Stat(filepath.Join(testkit.PackageDir(), "testdata", "sample.golden")); err != nil {
		t.Errorf("PackageDir: %v", err)
	}
}

// TestGoldenUpdate: with -update, Golden writes the file (and its directories) instead of
// comparing.
func TestGoldenUpdate(t *testing.T) {
	was := flag.Lookup("update").Value.String()
	if err := flag.Set("update", "true"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("update", was)
	dir := filepath.Join(testkit.PackageDir(), "testdata", "written-by-update")
	t.Cleanup(func() { os.RemoveAll(dir) })
	if f := run(t, func(tb testing.TB) {
		testkit.GoldenJSON(tb, "written-by-update/v.json", map[string]int{"b": 2, "a": 1})
	}); len(f) != 0 {
		t.Fatalf("update: %v", f)
	}
	got, err := os.ReadFile(filepath.Join(dir, "v.json"))
	if err != nil || string(got) != "{\n  \"a\": 1,\n  \"b\": 2\n}\n" {
		t.Errorf("written: %q, %v", got, err)
	}
}

func TestWaitFor(t *testing.T) {
	calls := 0
	if f := run(t, func(tb testing.TB) {
		testkit.WaitFor(tb, 10*time.Second, "the third call", func() bool { calls++; return calls == 3 })
	}); len(f) != 0 || calls != 3 {
		t.Errorf("a condition true at the third call: %d calls, %v", calls, f)
	}
	start := time.Now()
	f := run(t, func(tb testing.TB) { testkit.WaitFor(tb, 50*time.Millisecond, "nothing", func() bool { return false }) })
	if len(f) != 1 || f[0] != "timed out after 50ms waiting for nothing" {
		t.Errorf("a condition never true: %q", f)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the 50ms", d)
	}
}

// TestSyncBuffer: writers on many goroutines and a reader at once (run with -race) lose nothing.
func TestSyncBuffer(t *testing.T) {
	var b testkit.SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "%d\n", i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 || b.Len() != 1600 {
		t.Errorf("%d lines, %d bytes; want 800 and 1600", n, b.Len())
	}
}
