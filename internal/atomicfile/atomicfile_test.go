package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// MkdirAll gives every directory it creates exactly the mode asked for, under umask 077 (the
// test runs itself again in a child process under that umask: a umask is the whole process's).
func TestMkdirAllUnderUmask077(t *testing.T) {
	if os.Getenv("CUBEFLEET_TEST_UMASK077") == "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", `umask 077 && exec "$0" "$@"`, self, "-test.run=^TestMkdirAllUnderUmask077$", "-test.v")
		cmd.Env = append(os.Environ(), "CUBEFLEET_TEST_UMASK077=1")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: TestMkdirAllUnderUmask077") {
			t.Fatalf("under umask 077: %v\n%s", err, out)
		}
		return
	}
	parent := t.TempDir()
	path := filepath.Join(parent, "a", "b")
	if err := MkdirAll(path, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(parent, "a"), path} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v, %v; want mode 0711", p, fi.Mode(), err)
		}
	}
	// An existing directory is left as it is; a file in the way is an error.
	if err := MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(parent); fi.Mode().Perm() != 0o700 {
		t.Errorf("existing %s changed to %04o", parent, fi.Mode().Perm())
	}
	file := filepath.Join(parent, "f")
	os.WriteFile(file, nil, 0o600)
	if err := MkdirAll(filepath.Join(file, "x"), 0o700); err == nil {
		t.Error("MkdirAll under a file succeeded")
	}
}
