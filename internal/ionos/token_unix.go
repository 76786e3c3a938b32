//go:build unix

package ionos

import (
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens path for reading without following a final symbolic link and without
// blocking on a FIFO swapped in after the caller's Lstat.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// ownedByCaller returns the file's owner and whether it is the calling user.
func ownedByCaller(st fs.FileInfo) (int, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(sys.Uid), int(sys.Uid) == os.Getuid()
}
