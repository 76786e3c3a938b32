// Package testkit is the test support every package's tests share: a buffer safe for
// concurrent use, a wait with a deadline, and golden files rewritten by one -update flag.
// Only _test.go files import it.
package testkit

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// update is the one -update flag: `go test ./internal/cli -update` rewrites the package's golden
// files with the output of the run instead of comparing against them.
var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

// pkgDir is the directory go test starts the test binary in: the package's own. Golden files
// are found from it even after a test changes its working directory.
var pkgDir = func() string {
	d, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return d
}()

// PackageDir returns the directory of the package under test (where go test starts the test
// binary), for reading the package's files after a test changed its working directory.
func PackageDir() string { return pkgDir }

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads: give it to a logger, a
// child process's stdout, or a command's output while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len returns the number of bytes written so far.
func (b *SyncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// WaitFor polls cond every 5 ms until it is true, and fails the test naming what it waited
// for when within passes first. It is for waiting on another goroutine or process; time is not
// what the test asserts.
func WaitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Golden compares got with the file testdata/name of the test's package; with -update it
// writes got there instead (creating directories as needed). A difference fails the test with
// both texts.
func Golden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join(pkgDir, "testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// GoldenJSON is Golden for v written as indented JSON with a final newline.
func GoldenJSON(tb testing.TB, name string, v any) {
	tb.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	Golden(tb, name, append(got, '\n'))
}
