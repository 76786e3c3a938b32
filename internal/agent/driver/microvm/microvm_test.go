package microvm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/guest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/microvm/microvmtest"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
)

var (
	initOnce sync.Once
	initBin  string
	initErr  error
)

// testInit builds the guest init alone (testdata/guestinit), statically, once per test binary.
func testInit(t testing.TB) string {
	t.Helper()
	initOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cubefleet-guestinit-")
		if err != nil {
			initErr = err
			return
		}
		initBin = filepath.Join(dir, "init")
		cmd := exec.Command("go", "build", "-o", initBin, "./testdata/guestinit")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			initErr = fmt.Errorf("go build the guest init: %v: %s", err, out)
		}
	})
	if initErr != nil {
		t.Fatal(initErr)
	}
	return initBin
}

// testImage imports a busybox image ("busybox": /bin/busybox and its applets) into dir.
func testImage(t testing.TB, dir string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	microvmtest.BusyboxTree(t, root, "sh", "uname", "echo", "cat", "sleep", "head", "tail", "grep", "id", "nc", "wc", "ls", "true")
	if err := CheckStatic(filepath.Join(root, "bin/busybox")); err != nil {
		t.Fatalf("busybox must be static (busybox-static): %v", err)
	}
	if _, err := ImportImage(context.Background(), dir, "busybox", root); err != nil {
		t.Fatal(err)
	}
}

// testDir returns a directory of the test's own that every user can reach (each VMM runs as a
// sandbox user).
func testDir(t testing.TB) string { return filepath.Dir(agenttest.SandboxDir(t)) }

// newTestDriver returns a driver under TCG on a directory of the test's own ("": a new one
// with the busybox image), its sandboxes stopped and the driver closed at the end of the test
// (unless the test closed it).
func newTestDriver(t testing.TB, dir string) *Driver {
	t.Helper()
	kernel := microvmtest.Kernel(t)
	if dir == "" {
		dir = testDir(t)
		testImage(t, filepath.Join(dir, "images"))
	}
	d, err := New(context.Background(), Config{
		Dir: filepath.Join(dir, "sandboxes"), Kernel: kernel, Init: testInit(t), ImageDir: filepath.Join(dir, "images"),
		Accel: AccelTCG, BootTimeout: 4 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.StopAll(ctx); err != nil && err != errClosed {
			t.Error(err)
		}
		d.Close()
	})
	return d
}

func waitEnd(t testing.TB, d *Driver, id string, within time.Duration) driver.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	st, err := d.Wait(ctx, id)
	if err != nil {
		t.Fatalf("sandbox %s did not end within %s: %v", id, within, err)
	}
	return st
}

// A cold start boots the guest kernel (not the host's), runs the command as an unprivileged
// user without a network device, and brings back both streams and the exit code.
func TestColdStartRunsInTheGuest(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, "")
	st, err := d.Start(context.Background(), driver.Spec{
		ID: "cold", Image: "busybox", MemoryMiB: 384,
		Argv: []string{"sh", "-c", "uname -r; id -u; cat /proc/net/dev | grep -c :; echo oops >&2; exit 3"},
		Env:  []string{"PATH=/bin", "SECRET=s3cr3t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != driver.StateRunning {
		t.Fatalf("state %s (%s), want running", st.State, st.Message)
	}
	st = waitEnd(t, d, "cold", 2*time.Minute)
	out, _ := d.Output(context.Background(), "cold")
	if st.State != driver.StateExited || st.ExitCode != 3 || st.Message != "exited with code 3" {
		t.Fatalf("ended %+v, want exited with code 3; stdout %q", st, out.Stdout)
	}
	lines := strings.Split(strings.TrimSpace(string(out.Stdout)), "\n")
	if len(lines) != 3 || lines[0] != d.Kernel().Release || lines[1] != fmt.Sprint(guest.SandboxUID) || lines[2] != "1" {
		t.Errorf("stdout %q: want the guest's release %s, uid %d and one network device (lo)", out.Stdout, d.Kernel().Release, guest.SandboxUID)
	}
	if string(out.Stderr) != "oops\n" || st.StdoutBytes != int64(len(out.Stdout)) {
		t.Errorf("stderr %q, status %+v", out.Stderr, st)
	}
	for _, f := range []string{fileVM, fileClaim, process.FileResult} {
		data, _ := os.ReadFile(filepath.Join(d.cfg.Dir, "cold", f))
		if strings.Contains(string(data), "s3cr3t") {
			t.Errorf("%s holds the environment's secret", f)
		}
	}
}

// A warm guest is claimed in milliseconds, by a driver that found it again after a restart; a
// command past its timeout ends killed (timeout) after the grace.
func TestWarmClaimAfterRestartAndTimeout(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	testImage(t, filepath.Join(dir, "images"))
	d := newTestDriver(t, dir)
	st, err := d.Warm(context.Background(), driver.Spec{ID: "warm", Image: "busybox", MemoryMiB: 256})
	if err != nil || st.State != driver.StateWarm {
		t.Fatalf("warm: %+v, %v", st, err)
	}
	cg := checkVMMCgroup(t, d, "warm")
	d.Close()
	d2 := newTestDriver(t, dir)
	if st, _ := d2.Status(context.Background(), "warm"); st.State != driver.StateWarm {
		t.Fatalf("after a restart: %+v, want warm", st)
	}
	if v, _ := d2.get("warm"); !v.rec.Cgroup.Equal(cg) {
		t.Errorf("after a restart the VMM's cgroup is %v, want %v", v.rec.Cgroup, cg)
	}
	start := time.Now()
	st, err = d2.Claim(context.Background(), driver.Spec{ID: "warm", Argv: []string{"/bin/sh", "-c", "trap '' TERM; echo up; sleep 60"}, Timeout: 2 * time.Second, Grace: time.Second})
	if err != nil || st.State != driver.StateRunning {
		t.Fatalf("claim: %+v, %v", st, err)
	}
	t.Logf("warm claim under TCG: %s", time.Since(start))
	st = waitEnd(t, d2, "warm", time.Minute)
	if st.State != driver.StateKilled || st.Reason != driver.ReasonTimeout || !strings.Contains(st.Message, "after ignoring SIGTERM") {
		t.Fatalf("ended %+v, want killed (timeout) after the grace", st)
	}
	if out, _ := d2.Output(context.Background(), "warm"); string(out.Stdout) != "up\n" {
		t.Errorf("stdout %q", out.Stdout)
	}
	for _, dir := range cg.Dirs() {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the ended VMM's cgroup %s is still there: %v", dir, err)
		}
	}
	if _, err := d2.Claim(context.Background(), driver.Spec{ID: "warm", Argv: []string{"true"}}); err != nil {
		t.Errorf("a second claim of a claimed sandbox: %v, want its status", err)
	}
}

// A memory hog in the guest meets the guest's own OOM killer (its memory is the flavor's), not
// the host's (the VMM's cgroup allows the guest's memory and the VMM's own); the host is
// untouched, and the output is cut at its limit with the marker.
func TestGuestOOMAndOutputLimit(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, "")
	st, err := d.Start(context.Background(), driver.Spec{
		ID: "hog", Image: "busybox", MemoryMiB: 256, OutputLimitBytes: 10,
		Argv: []string{"sh", "-c", "echo 0123456789abcdef; a=0123456789; while :; do a=$a$a; done"},
	})
	if err != nil || st.State != driver.StateRunning {
		t.Fatalf("start: %+v, %v", st, err)
	}
	st = waitEnd(t, d, "hog", 3*time.Minute)
	if st.State != driver.StateKilled || st.Reason != driver.ReasonOOM || !strings.Contains(st.Message, "OOM killer") {
		t.Fatalf("ended %+v, want killed (oom), the guest's OOM killer named", st)
	}
	out, _ := d.Output(context.Background(), "hog")
	if want := "0123456789" + driver.TruncationMarker(10); string(out.Stdout) != want || !out.StdoutTruncated || st.StdoutBytes != 17 {
		t.Errorf("stdout %q (%d bytes), want %q", out.Stdout, st.StdoutBytes, want)
	}
}

// A sandbox whose image is not on the node is refused, naming the file; nothing is created.
func TestMissingImageIsRefused(t *testing.T) {
	d := newTestDriver(t, "")
	_, err := d.Start(context.Background(), driver.Spec{ID: "noimg", Image: "python-3.12", Argv: []string{"true"}})
	if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), filepath.Join(d.cfg.ImageDir, "python-3.12.ext4")) {
		t.Fatalf("err %v, want INVALID_INPUT naming the image's file", err)
	}
	if _, err := os.Stat(filepath.Join(d.cfg.Dir, "noimg")); !os.IsNotExist(err) {
		t.Errorf("a refused sandbox left its directory: %v", err)
	}
	if err := d.HasImage("busybox"); err != nil {
		t.Error(err)
	}
}
