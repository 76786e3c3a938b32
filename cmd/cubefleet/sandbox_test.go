package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
)

// The cubefleet binary is the process driver's supervisor and exec stage: main hands over to
// process.MaybeRunSupervisor first thing.
func TestBinaryRunsSandboxSupervisor(t *testing.T) {
	bin := binary(t)
	base := t.TempDir()
	for p := base; p != filepath.Clean(os.TempDir()) && p != "/"; p = filepath.Dir(p) {
		os.Chmod(p, 0o711) // a sandbox's user must reach its directory
	}
	d, err := process.New(process.Config{
		Dir: filepath.Join(base, "sandboxes"), UIDLeaseDir: process.DefaultUIDLeaseDir,
		CgroupParent: "cubefleet-test-" + filepath.Base(base), Executable: bin,
		AllowOwnUser: os.Geteuid() != 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		if err := d.StopAll(ctx); err != nil {
			t.Error(err)
		}
		d.Close()
		process.Detect().Cgroups.RemoveParent("cubefleet-test-" + filepath.Base(base))
	}()
	if _, err := d.Start(ctx, driver.Spec{ID: "parent", Argv: []string{"/bin/sh", "-c", `tr '\0' ' ' < /proc/$PPID/cmdline`}}); err != nil {
		t.Fatal(err)
	}
	st, err := d.Wait(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := d.Output(ctx, "parent")
	// The parent is the supervisor, or with namespaces the sandbox's init (started by it).
	if st.ExitCode != 0 || !strings.HasPrefix(string(out.Stdout), "cubefleet-sandbox-supervisor ") && !strings.HasPrefix(string(out.Stdout), "cubefleet-sandbox-exec init ") {
		t.Errorf("%+v: the sandbox's parent is %q, want the binary as cubefleet-sandbox-supervisor or, with namespaces, its init (%s)", st, out.Stdout, out.Stderr)
	}
}
