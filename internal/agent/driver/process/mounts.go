package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cubefleet/cubefleet/internal/agent/workdisk"
)

// The sandbox's file system, set up by its init in its own mount namespace (nothing of it is
// seen outside: the namespace's mounts are private):
//
//   - the host's file system, read-only (every mount, recursively);
//   - its work directory (<Dir>/<id>/work, at that path), read-write, nosuid, nodev: the one
//     place of the host it may write to; with a disk limit, a file system of its own of that
//     size (workdisk), mounted there in this namespace only (gone with it);
//   - its own /proc (of its PID namespace: its processes only) and /sys (of its network
//     namespace: its interfaces only; no cgroup file systems), both read-only;
//   - a minimal /dev: a tmpfs with null, zero, full, random, urandom and tty, /dev/fd and the
//     std links, and /dev/shm;
//   - /tmp and /dev/shm of its own, tmpfs of sandboxSetup.TmpBytes each (their pages count as
//     its memory);
//   - an empty /run (and /var/run, where it is a directory of its own), root's: the host's
//     services listen there on unix sockets (the system bus, the journal, databases), and a
//     read-only mount does not stop a connect.

// devices are the character devices of a sandbox's /dev: name, major, minor.
var devices = []struct {
	name         string
	major, minor uint32
}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}}

// setupMounts makes the mounts above, in the calling process's (new) mount namespace. The
// work directory is cloned as a detached mount first and attached again last, at its own path
// (made in the new /tmp when it is under /tmp), so that a sandbox directory anywhere, /tmp
// included, stays reachable at the path the driver knows it by.
func setupMounts(s sandboxSetup) error {
	if !filepath.IsAbs(s.Root) || filepath.Clean(s.Root) != s.Root {
		return fmt.Errorf("the work directory %q is not a clean absolute path", s.Root)
	}
	unix.Umask(0o022) // the paths made here are passed through by the sandbox's user
	var work int = -1
	defer func() {
		if work >= 0 {
			unix.Close(work)
		}
	}()
	steps := []struct {
		what string
		do   func() error
	}{
		{"make the mounts private", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"mount the work directory's disk", func() error {
			if s.DiskDevice == "" {
				return nil
			}
			return workdisk.MountDevice(s.DiskDevice, s.Root, s.UID, s.GID)
		}},
		{"clone the work directory", func() (err error) {
			work, err = unix.OpenTree(unix.AT_FDCWD, s.Root, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
			if err != nil {
				return err
			}
			return unix.MountSetattr(work, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{
				Attr_clr: unix.MOUNT_ATTR_RDONLY, Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
			})
		}},
		{"make the host's file system read-only", func() error {
			return unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		}},
		{"mount /proc", func() error {
			return unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"mount /sys", func() error {
			return unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"mount /tmp", func() error { return mountTmpfs("/tmp", s.TmpBytes, "1777") }},
		{"hide the host's /run", hideRun},
		{"make /dev", func() error { return makeDev(s.TmpBytes) }},
		{"attach the work directory", func() error {
			if _, err := os.Stat(s.Root); err != nil {
				// Under the new /tmp: its path is made there (root's, 0755: passed through).
				if err := os.MkdirAll(s.Root, 0o755); err != nil {
					return err
				}
			}
			return unix.MoveMount(work, "", unix.AT_FDCWD, s.Root, unix.MOVE_MOUNT_F_EMPTY_PATH)
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}

// hideRun mounts an empty tmpfs, root's, 0755, on /run and on /var/run where it is a directory
// (not the usual link to /run); a host without them has nothing to hide.
func hideRun() error {
	for _, dir := range []string{"/run", "/var/run"} {
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m,mode=755"); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// mountTmpfs mounts a tmpfs of size bytes (at least 1 MiB) with mode at dir: nosuid, nodev.
func mountTmpfs(dir string, size int64, mode string) error {
	size = max(size, 1<<20)
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode="+mode)
}

// makeDev mounts a tmpfs on /dev with the sandbox's devices and links, and its /dev/shm, then
// makes /dev itself read-only.
func makeDev(shmBytes int64) error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=1m,mode=755"); err != nil {
		return err
	}
	for _, d := range devices {
		p := "/dev/" + d.name
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		if err := os.Chmod(p, 0o666); err != nil { // whatever the umask
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, "/dev/"+name); err != nil {
			return err
		}
	}
	if err := os.Mkdir("/dev/shm", 0o1777); err != nil {
		return err
	}
	if err := mountTmpfs("/dev/shm", shmBytes, "1777"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return unix.MountSetattr(-1, "/dev", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}
