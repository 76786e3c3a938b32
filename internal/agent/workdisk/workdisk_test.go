package workdisk

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A disk of 8 MiB on a directory: the directory holds at most that (ENOSPC past it), its
// image takes on the host about what was written, and unmounting leaves the directory empty.
func TestMountHoldsItsSize(t *testing.T) {
	if why := Available(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI's machine has loop devices and mkfs.ext4 (scripts/test.sh installs e2fsprogs): %s", why)
		}
		t.Skip(why)
	}
	dir := t.TempDir()
	imgs := Images{Dir: filepath.Join(dir, "images")}
	target := filepath.Join(dir, "work")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(dir, "disk.img")
	if err := imgs.Mount(image, target, 8, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	defer Unmount(target)
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != 4242 {
		t.Errorf("the disk's root: %v, %v; want 0700, uid 4242", fi.Mode(), err)
	}
	if fi, _ := os.Stat(image); fi.Sys().(*syscall.Stat_t).Blocks*512 > 2<<20 {
		t.Errorf("a new 8 MiB image takes %d bytes on the host, want its metadata only", fi.Sys().(*syscall.Stat_t).Blocks*512)
	}
	f, err := os.Create(filepath.Join(target, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var n int
	for ; n < 16; n++ {
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) || n > 8 {
		t.Errorf("16 MiB into 8 MiB: wrote %d MiB, %v; want ENOSPC within 8", n, err)
	}
	// A second disk of the same size is copied from the same empty file system.
	other := filepath.Join(dir, "work2")
	os.Mkdir(other, 0o755)
	if err := imgs.Mount(filepath.Join(dir, "disk2.img"), other, 8, 0, 0); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(other); len(ents) != 0 {
		t.Errorf("a new disk holds %v", ents)
	}
	for _, d := range []string{target, other} {
		if err := Unmount(d); err != nil {
			t.Error(err)
		}
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s after the unmount holds %v", d, ents)
		}
	}
	if err := Unmount(target); err != nil {
		t.Errorf("unmount of nothing: %v", err)
	}
}
