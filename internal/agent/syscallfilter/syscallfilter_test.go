package syscallfilter

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary re-executed with applyEnv applies the profile and reports what each call got.
const applyEnv = "CUBEFLEET_TEST_SECCOMP"

func TestMain(m *testing.M) {
	if os.Getenv(applyEnv) == "1" {
		runtime.LockOSThread()
		if err := Apply(); err != nil {
			fmt.Println("apply:", err)
			os.Exit(2)
		}
		report := func(name string, err error) {
			var e unix.Errno
			if errors.As(err, &e) {
				fmt.Printf("%s: %s\n", name, unix.ErrnoName(e))
			} else {
				fmt.Printf("%s: %v\n", name, err)
			}
		}
		report("unshare", unix.Unshare(unix.CLONE_NEWUSER))
		_, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0)
		report("keyctl", err)
		_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
		report("clone3", e)
		report("getpid", nil)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The profile assembles on this architecture with every refused call it has.
func TestPolicyAssembles(t *testing.T) {
	p, err := Policy()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Syscalls) != 3 || len(p.Syscalls[0].Names) < len(Refused)*3/4 {
		t.Errorf("policy %+v: want most of %d refused calls", p.Syscalls, len(Refused))
	}
}

// A process under the profile gets EPERM for a refused call and ENOSYS for clone3; the rest
// works.
func TestApplyRefusesWithEPERM(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{applyEnv + "=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"unshare: EPERM\n", "keyctl: EPERM\n", "clone3: ENOSYS\n", "getpid: <nil>\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}
