package agent

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/agenttest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestStateDirMode: the state directory holds the node credential: it is created 0700, an
// existing one that others may access is made 0700 (and the log says so), and one owned by
// another user is refused.
func TestStateDirMode(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1", "cfj_join2")
	parent := t.TempDir()
	dir := filepath.Join(parent, "open")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // whatever the umask
	r := startAgent(t, testConfig(dir, "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "reporting", func() bool { return r.a.Health().LastReportAt != "" })
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if want := `"msg":"the state directory holds the node credential and others could access it: its mode was changed to 0700","state_dir":"` + dir + `","old_mode":"0755"`; !strings.Contains(r.logs.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, r.logs.String())
	}
	r.stop()

	// Created 0700, its missing parents 0755: a sandbox directory beside it (the default
	// /var/lib/cubefleet/sandboxes beside /var/lib/cubefleet/agent) stays reachable by the
	// sandboxes' users.
	nested := filepath.Join(parent, "a", "b")
	r = startAgent(t, testConfig(nested, "cfj_join2", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "reporting", func() bool { return r.a.Health().LastReportAt != "" })
	for d, mode := range map[string]os.FileMode{filepath.Join(parent, "a"): 0o755, nested: 0o700} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %04o", d, fi.Mode(), err, mode)
		}
	}
	r.stop()

	// Owned by someone else: refused.
	if os.Geteuid() != 0 {
		t.Skip("changing a directory's owner needs root")
	}
	other := filepath.Join(parent, "other")
	os.Mkdir(other, 0o700)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	a, err := New(testConfig(other, "", cp.URL), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Run fails at once; the bound only ends a Run that would not.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Run(ctx); err == nil || !strings.Contains(err.Error(), "is owned by uid 65534, not by the agent's user (uid 0); it holds the node credential") {
		t.Errorf("Run with another user's state directory: %v", err)
	}
}

// TestStateDirLock: two agents sharing a state directory would overwrite each other's node
// credential; the second one refuses to start, naming the directory, the first one's process
// ID and the fix, and leaves the first one's credential alone. Once the first one stops, the
// directory is free again. (agent check only reads the directory and takes no lock: see
// hostsetup's TestCheckTakesNoLock.)
func TestStateDirLock(t *testing.T) {
	cp := agenttest.NewFakeCP(t, "cfj_join1", "cfj_join2")
	dir := filepath.Join(t.TempDir(), "state")
	first := startAgent(t, testConfig(dir, "cfj_join1", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "reporting", func() bool { return first.a.Health().LastReportAt != "" })
	before, err := ReadState(dir)
	if err != nil || before.NodeCredential == "" {
		t.Fatalf("the first agent's state: %+v, %v", before, err)
	}

	second := testConfig(dir, "cfj_join2", cp.URL)
	second.NodeIP = netip.MustParseAddr("127.0.0.2")
	second.Listen = "127.0.0.1:0"
	a, err := New(second, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = a.Run(ctx)
	want := "state directory (--state-dir, CUBEFLEET_AGENT_STATE_DIR): " + dir + " is in use by another agent (process " + strconv.Itoa(os.Getpid()) + "), which holds " + filepath.Join(dir, LockFile) + ": two agents sharing a state directory would overwrite each other's node credential; give each agent its own CUBEFLEET_AGENT_STATE_DIR (--state-dir), or stop the other agent"
	if err == nil || err.Error() != want {
		t.Fatalf("a second agent on the same state directory: %v\nwant %s", err, want)
	}
	if ctx.Err() != nil {
		t.Error("the second agent ran until its context ended instead of refusing to start")
	}
	if after, err := ReadState(dir); err != nil || after != before {
		t.Errorf("the state file changed: %+v, %v; want %+v", after, err, before)
	}
	if n := len(cp.CallsTo("/register")); n != 1 {
		t.Errorf("%d registrations, want only the first agent's", n)
	}

	// The lock goes with the agent: the next one starts.
	first.stop()
	again := startAgent(t, testConfig(dir, "", cp.URL))
	testkit.WaitFor(t, 10*time.Second, "reporting after the first agent stopped", func() bool { return again.a.Health().LastReportAt != "" })
}
