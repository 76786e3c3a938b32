package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "a", "b", "node.json")
	// A missing directory is created 0700; the file gets perm whatever the umask.
	if err := WriteFile(path, []byte("one\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{filepath.Join(parent, "a"): 0o700, filepath.Dir(path): 0o700, path: 0o640} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %04o", p, fi.Mode(), err, mode)
		}
	}
	// A second write replaces the file and its mode, and leaves no temporary file behind.
	if err := WriteFile(path, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "two\n" {
		t.Errorf("contents %q, %v; want %q", data, err, "two\n")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o after the rewrite, want 0600", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only the file: %v", len(entries), entries)
	}
	// A path whose directory cannot be made: an error, and nothing is written.
	blocker := filepath.Join(parent, "file")
	os.WriteFile(blocker, nil, 0o600)
	if err := WriteFile(filepath.Join(blocker, "x"), []byte("x"), 0o600); err == nil {
		t.Error("WriteFile under a regular file succeeded")
	}
	// A directory in the way of the rename: an error, and the temporary file is removed.
	dir := filepath.Join(parent, "dir")
	os.MkdirAll(filepath.Join(dir, "taken", "child"), 0o700)
	if err := WriteFile(filepath.Join(dir, "taken"), []byte("x"), 0o600); err == nil {
		t.Error("WriteFile over a non-empty directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries after a failed write, want the directory only: %v", dir, len(entries), entries)
	}
}
