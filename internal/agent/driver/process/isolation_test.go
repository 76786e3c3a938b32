package process

import (
	"os"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/agent/cgroups"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
)

// requireController skips a test that needs cgroup controller c when this host has none for
// it, except under CI, whose machine has them (as cgroup v1 or v2 controllers).
func requireController(t *testing.T, iso Isolation, c string) {
	t.Helper()
	if iso.Cgroups.Has(c) {
		return
	}
	if isCI() {
		t.Fatalf("CI's machine has the %s controller; this host: %s", c, iso)
	}
	t.Skipf("no %s controller: %s", c, iso)
}

// Three processes of 800 MiB in a sandbox of 1 GiB: the sandbox as a whole goes past its
// memory, so it ends killed with reason oom and a peak of about its limit, while a sandbox
// beside it and this test (the host) live on.
func TestMemoryLimitIsTheWholeSandboxes(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	requireController(t, d.Isolation(), cgroups.Memory)
	argv, env := probe(t, "hold", "800")
	bystander := start(t, d, driver.Spec{ID: "bystander", Argv: []string{"sleep", "60"}})
	script := strings.Join([]string{argv[0], argv[0], argv[0]}, " 800 & ") + " 800 & wait"
	st, out := run(t, d, driver.Spec{ID: "hog", MemoryMiB: 1024, Env: env, Argv: sh(script)})
	if st.State != driver.StateKilled || st.Reason != driver.ReasonOOM {
		t.Fatalf("3 x 800 MiB in 1 GiB: %s/%s %q, want killed/oom\nstdout %q\nstderr %q", st.State, st.Reason, st.Message, out.Stdout, out.Stderr)
	}
	t.Logf("%s/%s: %s; peak %d MiB", st.State, st.Reason, st.Message, st.Stats.PeakMemoryBytes>>20)
	if p := st.Stats.PeakMemoryBytes; p < 800<<20 || p > 1100<<20 {
		t.Errorf("peak memory %d MiB, want the whole sandbox's, about its 1024 MiB", p>>20)
	}
	if !strings.Contains(st.Message, "1024 MiB") {
		t.Errorf("message %q does not name the limit", st.Message)
	}
	if got, _ := d.Status(testCtx(t), bystander.ID); got.State != driver.StateRunning {
		t.Errorf("the sandbox beside it: %+v, want it still running", got)
	}
}

// isCI reports whether the tests run in CI (as root, on a machine with the isolation the
// tests need: they fail there rather than skip).
func isCI() bool { return os.Getenv("CI") == "true" }
