// Package privatefile reads and writes private operator files: tokens, keys, journals. A file
// it reads must be a regular file (not a symlink) owned by the calling user with mode 0600; a
// file it writes is created with mode 0600 and never overwritten in place (docs/server.md,
// "Secrets and private files"; docs/ionos.md, "Private files").
package privatefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe is wrapped by Check's and Read's errors for a file that is not private.
var ErrUnsafe = errors.New("not a private file")

// Check returns nil when path is a regular file, not a symlink, owned by the calling user, with
// mode 0600; otherwise an error wrapping ErrUnsafe (or the os error) that names the problem and
// the fix. It never reads the file's contents.
func Check(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink; point to the file itself: %w", path, ErrUnsafe)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file: %w", path, ErrUnsafe)
	case fi.Mode().Perm() != 0o600:
		return fmt.Errorf("%s has mode %04o; run chmod 600 %s: %w", path, fi.Mode().Perm(), path, ErrUnsafe)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by you (uid %d): %w", path, st.Uid, os.Geteuid(), ErrUnsafe)
	}
	return nil
}

// Read returns the contents of path after Check accepts it.
func Read(path string) ([]byte, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// Write creates path with mode 0600 (its directory with 0700 when missing) and writes data. It
// refuses to replace an existing file.
func Write(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
