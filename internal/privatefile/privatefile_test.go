package privatefile_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/privatefile"
)

// TestWriteThenRead: Write creates the file with mode 0600 (and its missing directories with
// 0700), Read returns what was written, and Write never replaces an existing file.
func TestWriteThenRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "token")
	if err := privatefile.Write(path, []byte("cfk_secret\n")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{path: 0o600, dir: 0o700, filepath.Dir(dir): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %04o", p, fi.Mode().Perm(), err, want)
		}
	}
	got, err := privatefile.Read(path)
	if err != nil || string(got) != "cfk_secret\n" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	if err := privatefile.Write(path, []byte("other")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Write over an existing file: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "cfk_secret\n" {
		t.Errorf("the existing file became %q", got)
	}
}

// TestCheckRefusals: every file that is not a regular file of the caller's with mode 0600 is
// refused with ErrUnsafe and a message that names the file and the fix, and never its contents.
func TestCheckRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode fs.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("s3cret-contents"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // the umask may have taken bits away
			t.Fatal(err)
		}
		return p
	}
	private := write("private", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want string
	}{
		{"group and world readable", write("0644", 0o644), "has mode 0644; run chmod 600 "},
		{"owner read-only", write("0400", 0o400), "has mode 0400; run chmod 600 "},
		{"group readable", write("0640", 0o640), "has mode 0640; run chmod 600 "},
		{"executable", write("0700", 0o700), "has mode 0700; run chmod 600 "},
		{"a symlink to a private file", link, "is a symlink; point to the file itself"},
		{"a directory", sub, "is not a regular file"},
	}
	if os.Geteuid() == 0 {
		foreign := write("foreign", 0o600)
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, path, want string }{"owned by another user", foreign, "is owned by uid 65534, not by you (uid 0)"})
	} else {
		t.Log("not root: the other-owner refusal is not tried")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for fn, err := range map[string]error{"Check": privatefile.Check(c.path), "Read": readErr(c.path)} {
				if !errors.Is(err, privatefile.ErrUnsafe) {
					t.Fatalf("%s: %v, want ErrUnsafe", fn, err)
				}
				if msg := err.Error(); !strings.HasPrefix(msg, c.path+" ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "s3cret") {
					t.Errorf("%s: %q, want the path and %q (and never the contents)", fn, msg, c.want)
				}
			}
		})
	}
	if err := privatefile.Check(private); err != nil {
		t.Errorf("a private file: %v", err)
	}
	if err := privatefile.Check(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, privatefile.ErrUnsafe) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist (not ErrUnsafe)", err)
	}
}

// readErr returns Read's error; contents returned with it are a failure of their own.
func readErr(path string) error {
	b, err := privatefile.Read(path)
	if b != nil {
		return fmt.Errorf("Read returned %d bytes with %v", len(b), err)
	}
	return err
}
