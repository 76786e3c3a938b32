// Package atomicfile replaces files so that a reader sees either the old contents or the new,
// never a part: the node agent's state file and PID file, and the env file and systemd unit
// that `agent install` writes. Files and the directories it creates get exactly the mode asked
// for, whatever the process's umask.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to a new file beside path with mode perm, syncs it and renames it over
// path, then syncs the directory; the directory is created with mode 0700 when missing (see
// MkdirAll). On an
// error path is left as it was and the new file is removed. It returns the os error of the step
// that failed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// MkdirAll creates the directory path and any missing parent, each with exactly mode perm
// (permission bits; changed after the creation, so the umask does not take any away: under
// umask 077 a 0711 directory is 0711, not 0700). Directories that exist already are left as
// they are. It returns the os error of the step that failed.
func MkdirAll(path string, perm fs.FileMode) error {
	fi, err := os.Stat(path)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: path, Err: errors.New("not a directory")}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(path); parent != path {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(path, perm); err != nil {
		if errors.Is(err, fs.ErrExist) { // made meanwhile by someone else: theirs
			return nil
		}
		return err
	}
	return os.Chmod(path, perm)
}
