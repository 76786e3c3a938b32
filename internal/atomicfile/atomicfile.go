// Package atomicfile replaces files so that a reader sees either the old contents or the new,
// never a part: the node agent's state file and PID file, and the env file and systemd unit
// that `agent install` writes.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to a new file beside path with mode perm, syncs it and renames it over
// path, then syncs the directory; the directory is created with mode 0700 when missing. On an
// error path is left as it was and the new file is removed. It returns the os error of the step
// that failed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
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
