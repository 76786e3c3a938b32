// Package microvmtest has what the tests that boot microVM guests share: the guest kernel they
// boot (or the skip when there is none) and a busybox root file system to build an image from.
package microvmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Kernel returns the guest kernel of the tests (CUBEFLEET_GUEST_KERNEL, which scripts/test.sh
// sets), after checking QEMU is installed. It skips a test that cannot boot guests (not root,
// no kernel), except under CI (CI=true), which must boot them and fails instead.
func Kernel(t testing.TB) string {
	t.Helper()
	k := os.Getenv("CUBEFLEET_GUEST_KERNEL")
	ci := os.Getenv("CI") == "true"
	switch {
	case os.Geteuid() != 0 && !ci:
		t.Skip("needs root: each VMM runs as a sandbox user of its own")
	case k == "" && ci:
		t.Fatal("CI boots guests: scripts/test.sh sets CUBEFLEET_GUEST_KERNEL")
	case k == "":
		t.Skip("no guest kernel: set CUBEFLEET_GUEST_KERNEL (scripts/test.sh fetches Debian's cloud kernel)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("qemu-system-x86_64 is not installed (scripts/test.sh installs qemu-system-x86)")
	}
	return k
}

// BusyboxTree writes a root file system under dir: the host's static busybox as /bin/busybox
// (busybox-static; scripts/test.sh installs it), a symlink to it for each applet, and the empty
// directories a guest mounts on.
func BusyboxTree(t testing.TB, dir string, applets ...string) {
	t.Helper()
	data, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal("busybox-static is not installed (scripts/test.sh installs it): ", err)
	}
	for _, d := range []string{"bin", "etc", "proc", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
}
