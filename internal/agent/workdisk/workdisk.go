// Package workdisk gives a sandbox's work directory a file system of its own, of the sandbox's
// disk size: an ext4 image file (sparse: it takes on the host only what the sandbox wrote),
// attached to a loop device and mounted on the directory. A write past the size fails with
// ENOSPC inside the sandbox, and nothing else of the host fills up. Each size's empty file
// system is made once (mkfs.ext4, from e2fsprogs: no Go library makes ext4) and copied for each
// sandbox with its holes, so that a mount costs a copy of its metadata, a loop device and a
// mount: milliseconds.
package workdisk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Available reports why this host cannot give work directories a file system of their own
// ("" when it can): it needs root, /dev/loop-control and mkfs.ext4.
func Available() string {
	if os.Geteuid() != 0 {
		return "a work directory file system of its own needs root"
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "no loop devices (/dev/loop-control)"
	}
	if mkfs() == "" {
		return "no mkfs.ext4 (install e2fsprogs)"
	}
	return ""
}

// mkfs returns the path of mkfs.ext4: in the PATH, else /usr/sbin or /sbin (a process with an
// empty environment, a sandbox's init, has no PATH); "" when there is none.
func mkfs() string {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if unix.Access(p, unix.X_OK) == nil {
			return p
		}
	}
	return ""
}

// Images makes and keeps the empty file systems sandboxes' disks are copied from, one file per
// size in Dir (created 0700 when missing): ext4-<MiB>.img.
type Images struct {
	Dir string
}

// Mount makes the file system of sizeMiB MiB in the file image (Attach) and mounts it on target
// (MountDevice).
func (c Images) Mount(image, target string, sizeMiB int64, uid, gid int) error {
	disk, err := c.Attach(image, sizeMiB)
	if err != nil {
		return err
	}
	defer disk.Release()
	return MountDevice(disk.Device, target, uid, gid)
}

// Disk is a sandbox's file system attached to a loop device, ready to be mounted (in another
// mount namespace, too: the process that mounts it need not open the image, whose open file
// would hold its mount writable).
type Disk struct {
	Device string // e.g. /dev/loop3
	loop   *os.File
}

// Release lets the loop device go with its last mount (call it once the device is mounted, or
// will not be): it clears itself then.
func (d *Disk) Release() {
	if d.loop != nil {
		d.loop.Close()
		d.loop = nil
	}
}

// Attach makes the file system of sizeMiB MiB in the file image (created 0600; it must not
// exist), copied from the empty one of that size, and attaches it to a free loop device.
func (c Images) Attach(image string, sizeMiB int64) (*Disk, error) {
	if sizeMiB <= 0 {
		return nil, fmt.Errorf("disk size %d MiB: must be at least 1", sizeMiB)
	}
	pristine, err := c.pristine(sizeMiB)
	if err != nil {
		return nil, err
	}
	if err := copySparse(pristine, image); err != nil {
		os.Remove(image)
		return nil, fmt.Errorf("copy the empty file system %s to %s: %w", pristine, image, err)
	}
	dev, loop, err := attach(image)
	if err != nil {
		os.Remove(image)
		return nil, err
	}
	return &Disk{Device: dev, loop: loop}, nil
}

// MountDevice mounts the attached disk dev on target (an existing empty directory): nosuid,
// nodev, its root directory owned by uid:gid with mode 0700.
func MountDevice(dev, target string, uid, gid int) error {
	if err := unix.Mount(dev, target, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", dev, target, err)
	}
	os.Remove(filepath.Join(target, "lost+found"))
	if err := errors.Join(os.Chown(target, uid, gid), os.Chmod(target, 0o700)); err != nil {
		Unmount(target)
		return err
	}
	return nil
}

// Unmount unmounts the file system on target (lazily: a sandbox's mount namespace that still
// holds it keeps it until it ends); a target with nothing mounted is no error.
func Unmount(target string) error {
	err := unix.Unmount(target, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount the work directory %s: %w", target, err)
}

// pristine returns the empty file system of sizeMiB, made once under a lock of Dir.
func (c Images) pristine(sizeMiB int64) (string, error) {
	p := filepath.Join(c.Dir, "ext4-"+strconv.FormatInt(sizeMiB, 10)+".img")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(c.Dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err == nil { // made meanwhile
		return p, nil
	}
	tmp := p + ".new"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = errors.Join(f.Truncate(sizeMiB<<20), f.Close())
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	// No journal (a scratch disk that lives as long as its sandbox), nothing reserved for root.
	prog := mkfs()
	if prog == "" {
		os.Remove(tmp)
		return "", errors.New("no mkfs.ext4 (install e2fsprogs)")
	}
	out, err := exec.Command(prog, "-q", "-F", "-O", "^has_journal", "-m", "0", "-E", "lazy_itable_init=1,nodiscard", tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mkfs.ext4 %s: %v: %s", tmp, err, out)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", err
	}
	return p, nil
}

// copySparse copies the file from to the new file to, data extents only (SEEK_DATA and
// SEEK_HOLE): the holes stay holes.
func copySparse(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	size := fi.Size()
	err = dst.Truncate(size)
	for off := int64(0); err == nil && off < size; {
		start, serr := unix.Seek(int(src.Fd()), off, unix.SEEK_DATA)
		if errors.Is(serr, unix.ENXIO) { // only holes are left
			break
		}
		if serr != nil {
			err = serr
			break
		}
		end, serr := unix.Seek(int(src.Fd()), start, unix.SEEK_HOLE)
		if serr != nil {
			err = serr
			break
		}
		_, err = io.Copy(io.NewOffsetWriter(dst, start), io.NewSectionReader(src, start, end-start))
		off = end
	}
	return errors.Join(err, dst.Close())
}

// attach attaches image to a free loop device that clears itself with its last reference
// (LOOP_CONFIGURE, Linux 5.8+), and returns the device's path and the open device, which the
// caller closes once it mounted it.
func attach(image string) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, err
	}
	defer ctl.Close()
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	var last error
	for range 20 { // another attach may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			last = err
			time.Sleep(time.Millisecond)
			continue
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if err == nil {
			return dev, lf, nil
		}
		lf.Close()
		last = err
		if !errors.Is(err, unix.EBUSY) {
			break
		}
	}
	return "", nil, fmt.Errorf("attach %s to a loop device: %w", image, last)
}
