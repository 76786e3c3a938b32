package microvm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ImportImage makes src the image name of imageDir (<imageDir>/<name>.ext4): a directory is
// built into an ext4 file system (mkfs.ext4 -d, sized to its content plus room), a file must be
// a raw ext4 image and is copied. The image is written beside its final name and renamed, so a
// failed import leaves no half-written image. Errors name the file and the fix.
func ImportImage(ctx context.Context, imageDir, name, src string) (string, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, " ,\t\n") {
		return "", fmt.Errorf("image name %q: must be a plain file name (the template's imageId) without spaces or commas", name)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("image source: %w", err)
	}
	if err := os.MkdirAll(imageDir, 0o755); err != nil {
		return "", fmt.Errorf("image directory: %w", err)
	}
	dst := filepath.Join(imageDir, name+ImageExt)
	tmp := filepath.Join(imageDir, "."+name+".import")
	os.Remove(tmp)
	defer os.Remove(tmp)
	if fi.IsDir() {
		err = buildExt4(ctx, src, tmp)
	} else {
		err = copyExt4(src, tmp)
	}
	if err != nil {
		return "", err
	}
	// The VMM reads images as the sandbox's user: readable by all, written by none of them.
	if err := os.Chmod(tmp, 0o644); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}

// buildExt4 makes an ext4 image of the directory src at dst, of its content's size plus half
// again and 64 MiB.
func buildExt4(ctx context.Context, src, dst string) error {
	var size int64
	err := filepath.WalkDir(src, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil {
			size += info.Size() + 4096
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("image source %s: %w", src, err)
	}
	mib := size*3/2>>20 + 64
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "root_owner=0:0", "-d", src, dst, fmt.Sprintf("%dM", mib)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 -d %s (e2fsprogs 1.43 or later): %v: %s", src, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// copyExt4 copies the ext4 image src to dst, after checking its superblock's magic.
func copyExt4(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("image source: %w", err)
	}
	defer in.Close()
	magic := make([]byte, 2)
	if _, err := in.ReadAt(magic, 1024+0x38); err != nil || binary.LittleEndian.Uint16(magic) != 0xEF53 {
		return fmt.Errorf("image source %s is not a raw ext4 image (no ext4 superblock): give a directory to build one from, or an image made with mkfs.ext4", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
