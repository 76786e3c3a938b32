//go:build !unix

package ionos

import (
	"errors"
	"io/fs"
	"os"
)

// openNoFollow refuses: file ownership cannot be checked on this platform.
func openNoFollow(string) (*os.File, error) {
	return nil, &fs.PathError{Op: "open", Err: errors.New("token files are supported on Unix only")}
}

// ownedByCaller cannot tell on this platform.
func ownedByCaller(fs.FileInfo) (int, bool) { return -1, false }
