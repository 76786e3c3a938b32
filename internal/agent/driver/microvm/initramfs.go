package microvm

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cavaliergopher/cpio"

	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
)

// GuestModules are the kernel modules the guest init loads (with what they depend on) when the
// kernel has them as modules: the virtio transports, the disks, the channel's virtio-serial
// ports, a public guest's NIC, and overlayfs for the writable layer. A module the kernel has built in is not needed.
var GuestModules = []string{"virtio_pci", "virtio_mmio", "virtio_blk", "virtio_console", "virtio_net", "overlay"}

// Kernel is a guest kernel: its image (bzImage) and its module tree.
type Kernel struct {
	// Path is the kernel image, e.g. /boot/vmlinuz-6.1.0-57-cloud-amd64.
	Path string
	// Release is its release (uname -r), read from the image's header.
	Release string
	// Modules is its module tree, /lib/modules/<Release> beside the image's boot directory
	// (…/boot/vmlinuz-X: …/lib/modules/X) or the host's.
	Modules string
}

// OpenKernel reads the release of the kernel image at path (its bzImage header) and finds its
// module tree. Errors name the file and what is wrong with it.
func OpenKernel(path string) (Kernel, error) {
	if path == "" {
		return Kernel{}, errors.New("no guest kernel: set CUBEFLEET_GUEST_KERNEL to a kernel image (docs/sandbox-runtime.md says how to get Debian's cloud kernel)")
	}
	rel, err := kernelRelease(path)
	if err != nil {
		return Kernel{}, fmt.Errorf("guest kernel %s: %w", path, err)
	}
	k := Kernel{Path: path, Release: rel}
	for _, d := range []string{filepath.Join(filepath.Dir(filepath.Dir(path)), "lib/modules", rel), filepath.Join("/lib/modules", rel)} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			k.Modules = d
			break
		}
	}
	return k, nil
}

// kernelRelease reads the version string of a bzImage (boot protocol 2.00+: the offset at 0x20E
// points, past 0x200, to "release (builder) #...").
func kernelRelease(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	hdr := make([]byte, 0x210)
	if _, err := io.ReadFull(f, hdr); err != nil || string(hdr[0x202:0x206]) != "HdrS" {
		return "", errors.New("not a bzImage kernel (no HdrS boot header)")
	}
	off := int64(binary.LittleEndian.Uint16(hdr[0x20E:])) + 0x200
	buf := make([]byte, 256)
	n, _ := f.ReadAt(buf, off)
	rel, _, _ := strings.Cut(string(buf[:n]), " ")
	if rel == "" || strings.ContainsAny(rel, "/\x00") {
		return "", errors.New("the boot header names no kernel release")
	}
	return rel, nil
}

// CheckStatic returns an error unless the file at path is a statically linked ELF executable
// (no interpreter): the guest has no dynamic loader.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("guest init %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("guest init %s is dynamically linked: build cubefleet with CGO_ENABLED=0 (or set CUBEFLEET_GUEST_INIT to such a build)", path)
		}
	}
	return nil
}

// Initramfs returns the path of the initramfs of kernel k with the guest init initBin, building
// it into cacheDir (<cacheDir>/<hash>.cpio, an uncompressed newc archive: the guest unpacks it
// faster than a compressed one under TCG) when it is not there yet. The hash covers the init
// binary, the kernel's release and the modules it carries, so a new binary or kernel gets its
// own.
func Initramfs(k Kernel, initBin, cacheDir string) (string, error) {
	if err := CheckStatic(initBin); err != nil {
		return "", err
	}
	mods, err := moduleClosure(k.Modules, GuestModules)
	if err != nil {
		return "", fmt.Errorf("guest kernel %s modules (%s): %w", k.Release, k.Modules, err)
	}
	h := sha256.New()
	bin, err := os.Open(initBin)
	if err != nil {
		return "", fmt.Errorf("guest init: %w", err)
	}
	_, err = io.Copy(h, bin)
	bin.Close()
	if err != nil {
		return "", fmt.Errorf("guest init: %w", err)
	}
	fmt.Fprintf(h, "\x00%s\x00%q", k.Release, mods)
	path := filepath.Join(cacheDir, hex.EncodeToString(h.Sum(nil))[:24]+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("initramfs cache: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, ".build-*")
	if err != nil {
		return "", fmt.Errorf("initramfs cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := writeInitramfs(tmp, initBin, mods); err != nil {
		tmp.Close()
		return "", fmt.Errorf("build the initramfs: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

func writeInitramfs(w io.Writer, initBin string, mods []string) error {
	cw := cpio.NewWriter(w)
	dir := func(name string) error {
		return cw.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeDir | 0o755})
	}
	file := func(name string, mode cpio.FileMode, src string, data []byte) error {
		if src != "" {
			var err error
			if data, err = os.ReadFile(src); err != nil {
				return err
			}
		}
		if err := cw.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeReg | mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := cw.Write(data)
		return err
	}
	for _, d := range []string{"dev", "proc", "sys", "mnt", "lib", strings.TrimPrefix(guest.ModuleDir, "/")} {
		if err := dir(d); err != nil {
			return err
		}
	}
	if err := file(strings.TrimPrefix(guest.Arg0, "/"), 0o755, initBin, nil); err != nil {
		return err
	}
	var order []string
	for _, m := range mods {
		name := filepath.Base(m)
		order = append(order, name)
		if err := file(strings.TrimPrefix(guest.ModuleDir, "/")+"/"+name, 0o644, m, nil); err != nil {
			return err
		}
	}
	if err := file(strings.TrimPrefix(guest.ModuleList, "/"), 0o644, "", []byte(strings.Join(order, "\n")+"\n")); err != nil {
		return err
	}
	return cw.Close()
}

// moduleClosure returns the module files of tree that want needs, dependencies first: each
// wanted module the tree has (a missing one is taken as built in), and every module its
// .modinfo "depends=" names, recursively. A dependency the tree lacks is an error.
func moduleClosure(tree string, want []string) ([]string, error) {
	if tree == "" {
		return nil, nil
	}
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(tree, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			files[strings.ReplaceAll(strings.TrimSuffix(d.Name(), ".ko"), "-", "_")] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	var visit func(name string, required bool) error
	visit = func(name string, required bool) error {
		if seen[name] {
			return nil
		}
		seen[name] = true
		p, ok := files[name]
		if !ok {
			if required {
				return fmt.Errorf("module %s is needed but not in the tree", name)
			}
			return nil
		}
		deps, err := moduleDepends(p)
		if err != nil {
			return fmt.Errorf("module %s: %w", p, err)
		}
		for _, d := range deps {
			if err := visit(d, true); err != nil {
				return err
			}
		}
		out = append(out, p)
		return nil
	}
	for _, w := range want {
		if err := visit(w, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// moduleDepends reads the "depends=" entry of a module's .modinfo section.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, errors.New("no .modinfo section")
	}
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, strings.ReplaceAll(d, "-", "_"))
				}
			}
			return slices.Clip(deps), nil
		}
	}
	return nil, nil
}
