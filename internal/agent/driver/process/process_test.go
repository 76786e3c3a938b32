package process

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
)

func TestMain(m *testing.M) {
	MaybeRunSupervisor()
	os.Exit(m.Run())
}

// requireRoot skips a test that needs root (to run sandboxes as users of their own) when the
// tests do not run as root, except under CI, which runs as root and must not skip it.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI runs the tests as root; this one needs it")
	}
	t.Skip("needs root: sandboxes run as users of their own")
}

// testConfig returns a Config for a driver of its own: a sandbox directory every user can reach
// (t.TempDir is 0700), a lease directory and a cgroup parent of the test's own, all removed at
// the end.
func testConfig(t testing.TB) Config {
	t.Helper()
	base := t.TempDir()
	for p := base; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	parent := "cubefleet-test-" + filepath.Base(filepath.Dir(base)) + "-" + filepath.Base(base)
	cfg := Config{
		Dir:          filepath.Join(base, "sandboxes"),
		UIDLeaseDir:  filepath.Join(base, "uids"),
		CgroupParent: parent,
		AllowOwnUser: os.Geteuid() != 0,
	}
	t.Cleanup(func() {
		if iso := Detect(); iso.Cgroup != "" {
			os.Remove(filepath.Join(iso.Cgroup, parent))
		}
	})
	return cfg
}

// newDriver returns a driver on cfg, stopped (every sandbox) and closed at the end of the test.
func newDriver(t testing.TB, cfg Config) *Driver {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.StopAll(ctx); err != nil {
			t.Error(err)
		}
		d.Close()
	})
	return d
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRunEcho(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := ctxT(t)
	st, err := d.Start(ctx, driver.Spec{ID: "echo", Argv: []string{"sh", "-c", "echo out; echo err >&2; id -u; exit 3"}, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start: %+v", st)
	st, err = d.Wait(ctx, "echo")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("end: %+v", st)
	if st.State != driver.StateExited || st.ExitCode != 3 {
		t.Errorf("state %s exit %d, want exited 3", st.State, st.ExitCode)
	}
	out, err := d.Output(ctx, "echo")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stdout %q stderr %q", out.Stdout, out.Stderr)
	if !strings.HasPrefix(string(out.Stdout), "out\n") || string(out.Stderr) != "err\n" {
		t.Errorf("output %q %q", out.Stdout, out.Stderr)
	}
	t.Log(d.Isolation())
}
