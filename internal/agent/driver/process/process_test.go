package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/testkit"

	"golang.org/x/sys/unix"
)

// testLeases is the host's own uid lease directory, which every agent of the host shares: the
// tests of this package, of other packages and of other checkouts running at the same time
// share it too, so a uid is never lent to two sandboxes at once. A lease whose sandbox
// directory is gone is taken over, so leftovers of killed runs free themselves.
var testLeases = DefaultUIDLeaseDir

func TestMain(m *testing.M) {
	maybeRunProbe()
	MaybeRunSupervisor()
	cleanup, err := makeProbeBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
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
// (t.TempDir is 0700), the tests' shared lease directory, a cgroup parent of the test's own
// (removed at the end), and the agent's own user when the tests do not run as root.
func testConfig(t testing.TB) Config {
	t.Helper()
	base := t.TempDir()
	for p := base; p != filepath.Clean(os.TempDir()) && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	parent := "cubefleet-test-" + filepath.Base(filepath.Dir(base)) + "-" + filepath.Base(base)
	t.Cleanup(func() { // every sandbox's and spare's cgroup is gone by now
		for _, dir := range Detect().Cgroups.Group("", parent).Dirs() {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				left, _ := os.ReadDir(dir)
				t.Errorf("cgroups left behind in %s: %v", dir, left)
			}
		}
	})
	return Config{
		Dir:          filepath.Join(base, "sandboxes"),
		UIDLeaseDir:  testLeases,
		CgroupParent: parent,
		AllowOwnUser: os.Geteuid() != 0,
	}
}

// newDriver returns a driver on cfg, whose sandboxes are all stopped and which is closed at the
// end of the test.
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

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run starts spec and waits for its end.
func run(t *testing.T, d *Driver, spec driver.Spec) (driver.Status, driver.Output) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := d.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	st, err := d.Wait(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Output(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st, out
}

// start starts spec, which must be running.
func start(t *testing.T, d *Driver, spec driver.Spec) driver.Status {
	t.Helper()
	st, err := d.Start(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != driver.StateRunning || st.PID <= 0 {
		t.Fatalf("Start(%s) = %+v, want running with a pid", spec.ID, st)
	}
	return st
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// processesOf returns the live processes (zombies have ended) whose real uid is uid, read from
// /proc directly.
func processesOf(uid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		if strings.Contains(string(data), "\nState:\tZ") {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i > 0 && len(data) > i+2 && data[i+2] != 'Z'
}

func sandboxUID(t *testing.T, d *Driver, id string) int {
	t.Helper()
	var rec sandboxRecord
	if ok, err := readJSON(filepath.Join(d.dir(id), fileSandbox), &rec); !ok || err != nil {
		t.Fatalf("sandbox record of %s: %v", id, err)
	}
	return rec.UID
}

func TestExitCodeAndOutput(t *testing.T) {
	d := newDriver(t, testConfig(t))
	st, out := run(t, d, driver.Spec{ID: "echo", Argv: sh("echo out; echo err >&2; exit 3")})
	if st.State != driver.StateExited || st.Reason != driver.ReasonExited || st.ExitCode != 3 || st.Message != "exited with code 3" {
		t.Errorf("status %+v, want exited with code 3", st)
	}
	if string(out.Stdout) != "out\n" || string(out.Stderr) != "err\n" || out.StdoutTruncated || out.StderrTruncated {
		t.Errorf("output %+v", out)
	}
	if st.StdoutBytes != 4 || st.StderrBytes != 4 {
		t.Errorf("byte counts %d %d, want 4 4", st.StdoutBytes, st.StderrBytes)
	}
	if st.StartedAt.IsZero() || st.EndedAt.Before(st.StartedAt) {
		t.Errorf("times %s .. %s", st.StartedAt, st.EndedAt)
	}
	if st.Stats.PeakMemoryBytes <= 0 {
		t.Errorf("peak memory %d, want > 0", st.Stats.PeakMemoryBytes)
	}
}

func TestSignalled(t *testing.T) {
	d := newDriver(t, testConfig(t))
	st, _ := run(t, d, driver.Spec{ID: "segv", Argv: sh("kill -SEGV $$")})
	if st.State != driver.StateExited || st.Signal != "SIGSEGV" || st.ExitCode != -1 || st.Message != "killed by SIGSEGV" {
		t.Errorf("status %+v, want exited, killed by SIGSEGV", st)
	}
}

func TestExecFailure(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	for _, tc := range []struct {
		argv []string
		env  []string
		want string
	}{
		{[]string{"no-such-program"}, nil, "exec no-such-program: not found in the default PATH (/usr/local/bin:/usr/bin:/bin)"},
		{[]string{"sh"}, []string{"PATH=/nonexistent"}, "exec sh: not found in the PATH of the sandbox's environment"},
		{[]string{"/etc/passwd"}, nil, "exec /etc/passwd: permission denied"},
	} {
		id := "fail-" + strconv.Itoa(len(tc.want))
		st, err := d.Start(ctx, driver.Spec{ID: id, Argv: tc.argv, Env: tc.env})
		if err != nil {
			t.Fatal(err)
		}
		if st.State != driver.StateFailed || st.Message != tc.want || st.PID != 0 {
			t.Errorf("%v: %+v, want failed: %s", tc.argv, st, tc.want)
		}
		if again, err := d.Wait(ctx, id); err != nil || again.State != driver.StateFailed {
			t.Errorf("Wait = %+v, %v", again, err)
		}
	}
}

func TestInvalidSpecCreatesNothing(t *testing.T) {
	cfg := testConfig(t)
	d := newDriver(t, cfg)
	_, err := d.Start(testCtx(t), driver.Spec{ID: "../x", Argv: []string{"true"}, Env: []string{"SECRET"}})
	if !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) || !strings.Contains(err.Error(), "id:") {
		t.Fatalf("err = %v, want INVALID_INPUT naming id", err)
	}
	ents, _ := os.ReadDir(cfg.Dir)
	if len(ents) != 1 || ents[0].Name() != ".lock" {
		t.Errorf("sandbox directory holds %v after a refused spec", ents)
	}
	if _, err := d.Status(testCtx(t), "nope"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		t.Errorf("Status(nope) = %v, want NOT_FOUND", err)
	}
}

// The environment is exactly the spec's; values never reach the log or the sandbox's records.
func TestEnvironmentExactAndSecretsKept(t *testing.T) {
	cfg := testConfig(t)
	var logBuf testkit.SyncBuffer
	cfg.Log = slog.New(slog.NewTextHandler(&logBuf, nil))
	os.Setenv("CUBEFLEET_TEST_AGENT_SECRET", "agent-secret-value")
	defer os.Unsetenv("CUBEFLEET_TEST_AGENT_SECRET")
	d := newDriver(t, cfg)
	const secret = "s3cr3t-value-9f8e"
	st, out := run(t, d, driver.Spec{ID: "env", Argv: []string{"/usr/bin/env"}, Env: []string{"A=1", "API_TOKEN=" + secret}})
	if st.State != driver.StateExited || st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	if got := string(out.Stdout); got != "A=1\nAPI_TOKEN="+secret+"\n" {
		t.Errorf("environment in the sandbox:\n%s\nwant exactly A and API_TOKEN", got)
	}
	if !strings.Contains(logBuf.String(), "API_TOKEN") {
		t.Errorf("the log does not name the variables: %s", logBuf.String())
	}
	if strings.Contains(logBuf.String(), secret) {
		t.Errorf("the log holds a secret value: %s", logBuf.String())
	}
	filepath.WalkDir(d.dir("env"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && filepath.Base(p) != fileStdout {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret value", p)
			}
		}
		return nil
	})
}

func TestOutputTruncated(t *testing.T) {
	d := newDriver(t, testConfig(t))
	st, out := run(t, d, driver.Spec{
		ID: "big", OutputLimitBytes: 1000,
		Argv: sh("head -c 300000 /dev/zero | tr '\\0' a; head -c 1000 /dev/zero | tr '\\0' b >&2"),
	})
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	want := strings.Repeat("a", 1000) + driver.TruncationMarker(1000)
	if string(out.Stdout) != want || !out.StdoutTruncated {
		t.Errorf("stdout is %d bytes ending %q, want 1000 bytes then the marker", len(out.Stdout), out.Stdout[max(0, len(out.Stdout)-60):])
	}
	if string(out.Stderr) != strings.Repeat("b", 1000) || out.StderrTruncated {
		t.Errorf("stderr exactly at the limit: %d bytes, truncated %v; want all of it, no marker", len(out.Stderr), out.StderrTruncated)
	}
	if st.StdoutBytes != 300000 || st.StderrBytes != 1000 {
		t.Errorf("byte counts %d %d, want 300000 1000", st.StdoutBytes, st.StderrBytes)
	}
}

func TestWorkDirAndUmask(t *testing.T) {
	d := newDriver(t, testConfig(t))
	st, out := run(t, d, driver.Spec{ID: "wd", WorkDir: "a/b", Argv: sh("pwd; touch f; stat -c %a f")})
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	want := filepath.Join(d.dir("wd"), dirWork, "a/b") + "\n600\n"
	if string(out.Stdout) != want {
		t.Errorf("output %q, want %q", out.Stdout, want)
	}
}

// Under umask 077 (the agent started from a shell that set it) sandboxes run as well: every
// directory whose mode matters gets it explicitly, the sandbox directory's missing parents too.
// The test runs itself again in a child process under that umask (a umask is the whole
// process's).
func TestUnderUmask077(t *testing.T) {
	requireRoot(t)
	if os.Getenv("CUBEFLEET_TEST_UMASK077") == "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", `umask 077 && exec "$0" "$@"`, self, "-test.run=^TestUnderUmask077$", "-test.v")
		cmd.Env = append(os.Environ(), "CUBEFLEET_TEST_UMASK077=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestUnderUmask077")) {
			t.Fatalf("under umask 077: %v\n%s", err, out)
		}
		return
	}
	if old := syscall.Umask(0o077); old != 0o077 {
		t.Fatalf("umask %04o, want 0077", old)
	}
	cfg := testConfig(t)
	cfg.Dir = filepath.Join(filepath.Dir(cfg.Dir), "missing", "parents", "sandboxes")
	d := newDriver(t, cfg)
	st, out := run(t, d, driver.Spec{ID: "u1", WorkDir: "a/b", Argv: sh("id -u; echo hi > f; cat f")})
	if st.ExitCode != 0 || !strings.HasSuffix(string(out.Stdout), "\nhi\n") {
		t.Fatalf("status %+v, output %q %q", st, out.Stdout, out.Stderr)
	}
	for p, mode := range map[string]os.FileMode{
		filepath.Dir(filepath.Dir(cfg.Dir)): 0o755, filepath.Dir(cfg.Dir): 0o755, cfg.Dir: 0o711,
		filepath.Join(d.dir("u1"), dirWork): 0o700,
	} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %04o", p, fi.Mode(), err, mode)
		}
	}
	// A warm sandbox and its claim too (the claim socket is the agent's only).
	warm(t, d, driver.Spec{ID: "w1"})
	if fi, err := os.Stat(filepath.Join(d.dir("w1"), fileClaim)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("claim socket: %v, %v; want mode 0600", fi, err)
	}
	ctx := testCtx(t)
	if _, err := d.Claim(ctx, driver.Spec{ID: "w1", Argv: sh("echo claimed > f; cat f"), WorkDir: "job"}); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Wait(ctx, "w1"); err != nil || st.ExitCode != 0 {
		o, _ := d.Output(ctx, "w1")
		t.Errorf("claimed sandbox: %+v, %v; output %q %q", st, err, o.Stdout, o.Stderr)
	}
}

// A sandbox id starts at most once, however often and concurrently it is asked.
func TestStartIdempotent(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	spec := driver.Spec{ID: "once", Argv: []string{"sleep", "30"}}
	var wg sync.WaitGroup
	pids := make([]int, 8)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := d.Start(ctx, spec)
			if err != nil {
				t.Error(err)
			}
			pids[i] = st.PID
		}()
	}
	wg.Wait()
	for _, pid := range pids {
		if pid != pids[0] || pid <= 0 {
			t.Fatalf("concurrent starts gave pids %v, want one", pids)
		}
	}
	other := spec
	other.Argv = []string{"sleep", "60"}
	if st, _ := d.Start(ctx, other); st.PID != pids[0] {
		t.Errorf("a later Start with another spec gave pid %d, want the existing %d", st.PID, pids[0])
	}
	if uid := sandboxUID(t, d, "once"); uid >= 0 {
		// Exactly one sandbox's processes (a process of an earlier holder of the uid may still
		// be ending when the lease is handed on: wait for it, never for fewer).
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d processes of the sandbox's user", perSandbox(d)), func() bool {
			procs := processesOf(uid)
			if len(procs) < perSandbox(d) {
				t.Fatalf("processes of the sandbox's user: %v, want %d", procs, perSandbox(d))
			}
			return len(procs) == perSandbox(d)
		})
	}
	if _, err := d.Stop(ctx, "once"); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Start(ctx, spec); st.State != driver.StateKilled {
		t.Errorf("Start after the end = %+v, want the ended sandbox, not a new run", st)
	}
}

func TestStop(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	st := start(t, d, driver.Spec{ID: "stop", Argv: []string{"sleep", "30"}})
	end, err := d.Stop(ctx, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if end.State != driver.StateKilled || end.Reason != driver.ReasonStopped || end.Signal != "SIGTERM" || end.Message != "stopped: killed by SIGTERM" {
		t.Errorf("status %+v, want killed (stopped) by SIGTERM", end)
	}
	if running(st.PID) {
		t.Errorf("pid %d still runs", st.PID)
	}
	if again, err := d.Stop(ctx, "stop"); err != nil || again.EndedAt != end.EndedAt {
		t.Errorf("a second Stop = %+v, %v; want the same end", again, err)
	}
}

func TestTimeout(t *testing.T) {
	d := newDriver(t, testConfig(t))
	st, _ := run(t, d, driver.Spec{ID: "slow", Argv: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond})
	if st.State != driver.StateKilled || st.Reason != driver.ReasonTimeout || st.Signal != "SIGTERM" {
		t.Errorf("status %+v, want killed (timeout) by SIGTERM", st)
	}
	if d := st.EndedAt.Sub(st.StartedAt); d < 200*time.Millisecond {
		t.Errorf("ended %s after its start, before its timeout", d)
	}
	if !strings.HasPrefix(st.Message, "timeout after 200ms: ") {
		t.Errorf("message %q", st.Message)
	}
}

// A sandbox that ignores SIGTERM is killed after its grace, on a timeout and on Stop.
func TestIgnoresSIGTERMKilledAfterGrace(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	const grace = 500 * time.Millisecond
	// sleep inherits SIGTERM ignored; "ready" says the trap is set.
	stubborn := sh(`trap "" TERM; echo ready; exec sleep 30`)
	st, _ := run(t, d, driver.Spec{ID: "timeout", Argv: stubborn, Timeout: 300 * time.Millisecond, Grace: grace})
	if st.Reason != driver.ReasonTimeout || st.Signal != "SIGKILL" || st.Message != "timeout after 300ms: killed by SIGKILL after ignoring SIGTERM for 500ms" {
		t.Errorf("status %+v, want killed by SIGKILL after the grace", st)
	}
	if took := st.EndedAt.Sub(st.StartedAt); took < 300*time.Millisecond+grace {
		t.Errorf("ended %s after its start, before its timeout and grace", took)
	}

	start(t, d, driver.Spec{ID: "stop", Argv: stubborn, Grace: grace})
	testkit.WaitFor(t, 10*time.Second, "the trap", func() bool {
		out, _ := d.Output(ctx, "stop")
		return string(out.Stdout) == "ready\n"
	})
	began := time.Now()
	end, err := d.Stop(ctx, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < grace || end.Signal != "SIGKILL" || end.Reason != driver.ReasonStopped {
		t.Errorf("Stop returned after %s with %+v; want SIGKILL after the %s grace", took, end, grace)
	}
}

// Stats while running come from the sandbox's cgroup or its processes.
func TestStatsWhileRunning(t *testing.T) {
	d := newDriver(t, testConfig(t))
	start(t, d, driver.Spec{ID: "busy", Argv: sh("while :; do :; done")})
	ctx := testCtx(t)
	testkit.WaitFor(t, 10*time.Second, "CPU time of a busy sandbox", func() bool {
		s, err := d.Stats(ctx, "busy")
		return err == nil && s.CPU >= 100*time.Millisecond && s.MemoryBytes > 0
	})
}

// An agent restart (the driver dropped and made anew on the same directory) finds the running
// sandboxes again, and the ends of those that ended meanwhile, output included.
func TestRecoveryAfterRestart(t *testing.T) {
	cfg := testConfig(t)
	d1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	long := start(t, d1, driver.Spec{ID: "long", Argv: []string{"sleep", "30"}})
	start(t, d1, driver.Spec{ID: "short", Argv: sh("sleep 0.3; echo done")})
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "is in use by process "+strconv.Itoa(os.Getpid())) {
		t.Errorf("a second driver on the same directory: %v, want refused naming this process", err)
	}
	d1.Close()
	// "short" ends while no driver runs: its supervisor writes result.json.
	testkit.WaitFor(t, 20*time.Second, "short's result while no driver runs", func() bool {
		_, err := os.Stat(filepath.Join(cfg.Dir, "short", "result.json"))
		return err == nil
	})

	d2 := newDriver(t, cfg)
	ctx := testCtx(t)
	list, err := d2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "long" || list[0].State != driver.StateRunning || list[0].PID != long.PID ||
		list[1].ID != "short" || list[1].State != driver.StateExited {
		t.Fatalf("List after the restart = %+v", list)
	}
	if out, _ := d2.Output(ctx, "short"); string(out.Stdout) != "done\n" {
		t.Errorf("output of short: %q", out.Stdout)
	}
	if st, _ := d2.Start(ctx, driver.Spec{ID: "long", Argv: []string{"sleep", "1"}}); st.PID != long.PID {
		t.Errorf("Start after the restart = %+v, want the running one (pid %d)", st, long.PID)
	}
	st, err := d2.Stop(ctx, "long")
	if err != nil || st.Reason != driver.ReasonStopped {
		t.Errorf("Stop after the restart = %+v, %v", st, err)
	}
}

// A sandbox whose supervisor is killed -9 is reported lost, and nothing of it is left.
func TestLostWhenSupervisorKilled(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	st := start(t, d, driver.Spec{ID: "victim", Argv: sh("sleep 30 & sleep 30")})
	var sup Ident
	if ok, err := readJSON(filepath.Join(d.dir("victim"), fileSupervisor), &sup); !ok || err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sup.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	end, err := d.Wait(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if end.State != driver.StateLost || end.Reason != driver.ReasonLost || !strings.Contains(end.Message, fmt.Sprintf("supervisor (pid %d)", sup.PID)) {
		t.Errorf("status %+v, want lost naming the supervisor", end)
	}
	testkit.WaitFor(t, 5*time.Second, "the sandbox's process to die", func() bool { return !running(st.PID) })
	if uid := sandboxUID(t, d, "victim"); uid >= 0 {
		if left := processesOf(uid); len(left) > 0 {
			t.Errorf("processes left of the lost sandbox: %v", left)
		}
	}
	if again, _ := d.Status(ctx, "victim"); again.EndedAt != end.EndedAt {
		t.Errorf("the lost status is not kept: %+v", again)
	}
}

// A recycled pid is not taken for a supervisor: the identity includes the start time.
func TestIdentityNotFooledByRecycledPID(t *testing.T) {
	self, err := identOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !self.alive() {
		t.Fatal("this process is not alive by its identity")
	}
	other := self
	other.StartTicks++
	if other.alive() {
		t.Error("an identity with another start time is alive")
	}
	other = self
	other.BootID = "another-boot"
	if other.alive() {
		t.Error("an identity of another boot is alive")
	}
}

// A sandbox cannot read the agent's credential: a 0600 root file in a 0700 directory.
func TestCannotReadAgentCredential(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	state := filepath.Join(filepath.Dir(cfg.Dir), "agent-state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(state, "node.json")
	if err := os.WriteFile(cred, []byte(`{"node_credential":"cfn_topsecret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, cfg)
	st, out := run(t, d, driver.Spec{ID: "thief", Argv: []string{"cat", cred}})
	if st.ExitCode == 0 || bytes.Contains(out.Stdout, []byte("topsecret")) || refusals(out.Stderr) != 1 {
		t.Errorf("cat %s: %+v, stdout %q, stderr %q; want Permission denied (or, in a mount namespace where it is not there, No such file)", cred, st, out.Stdout, out.Stderr)
	}
	// Nor another sandbox's working directory, nor the records of its own.
	start(t, d, driver.Spec{ID: "neighbour", Argv: sh("echo private > f; sleep 30")})
	neighbour := filepath.Join(d.dir("neighbour"), dirWork, "f")
	testkit.WaitFor(t, 5*time.Second, "the neighbour's file", func() bool { _, err := os.Stat(neighbour); return err == nil })
	st, out = run(t, d, driver.Spec{ID: "snoop", Argv: sh("cat " + neighbour + "; cat ../sandbox.json")})
	if bytes.Contains(out.Stdout, []byte("private")) || bytes.Contains(out.Stdout, []byte("argv")) || refusals(out.Stderr) != 2 {
		t.Errorf("snoop: stdout %q, stderr %q; want two Permission denied (or No such file)", out.Stdout, out.Stderr)
	}
}

// refusals counts the files a sandbox's output says it could not read: Permission denied, or
// (behind its mount namespace, where they are not there) No such file or directory.
func refusals(stderr []byte) int {
	return bytes.Count(stderr, []byte("Permission denied")) + bytes.Count(stderr, []byte("No such file or directory"))
}

// perSandbox is how many processes a sandbox running one program has: with namespaces, its
// init and the program; without, the program.
func perSandbox(d *Driver) int {
	if len(d.Isolation().Namespaces) > 0 {
		return 2
	}
	return 1
}

// mainPID returns the host pid of the program of the sandbox whose Status.PID is pid: the
// init's child with namespaces, else pid itself.
func mainPID(t *testing.T, d *Driver, pid int) int {
	t.Helper()
	if len(d.Isolation().Namespaces) == 0 {
		return pid
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if f := strings.Fields(string(b)); err == nil && len(f) == 1 {
		n, _ := strconv.Atoi(f[0])
		return n
	}
	t.Fatalf("the children of the init %d: %q, %v; want its one program", pid, b, err)
	return 0
}

// Each sandbox runs as a user of its own with no supplementary groups, no new privileges, its
// own session, and its limits.
func TestLimitsAndCredentials(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	st := start(t, d, driver.Spec{ID: "limited", Argv: []string{"sleep", "30"}, MemoryMiB: 64, CPUMillicores: 500})
	start(t, d, driver.Spec{ID: "other", Argv: []string{"sleep", "30"}})
	uid := sandboxUID(t, d, "limited")
	if uid < DefaultFirstUID || uid >= DefaultFirstUID+DefaultUIDCount || sandboxUID(t, d, "other") == uid {
		t.Errorf("uids %d and %d: want two distinct uids of the range", uid, sandboxUID(t, d, "other"))
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", st.PID))
	for _, want := range []string{
		fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid),
		fmt.Sprintf("Gid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid),
		"NoNewPrivs:\t1",
	} {
		if !strings.Contains(string(status), want) {
			t.Errorf("/proc/%d/status lacks %q:\n%s", st.PID, want, status)
		}
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "Groups:" && len(f) > 1 {
			t.Errorf("supplementary groups %v, want none", f[1:])
		}
	}
	stat, err := readStat(st.PID)
	if err != nil || stat.SID != st.PID || stat.PGID != st.PID {
		t.Errorf("session %d, group %d (%v): want its own, %d", stat.SID, stat.PGID, err, st.PID)
	}
	limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", mainPID(t, d, st.PID)))
	iso := d.Isolation()
	want := []string{fmt.Sprintf("Max open files            %-20d %-20d files", DefaultMaxOpenFiles, DefaultMaxOpenFiles)}
	if !iso.has("memory") {
		want = append(want, fmt.Sprintf("Max address space         %-20d %-20d bytes", 64<<20, 64<<20))
	}
	if !iso.has("pids") {
		want = append(want, fmt.Sprintf("Max processes             %-20d %-20d processes", DefaultMaxProcesses, DefaultMaxProcesses))
	}
	for _, w := range want {
		if !strings.Contains(string(limits), w) {
			t.Errorf("/proc/%d/limits lacks %q:\n%s", st.PID, w, limits)
		}
	}
	if iso.Cgroups.Tracks() {
		var rec sandboxRecord
		readJSON(filepath.Join(d.dir("limited"), fileSandbox), &rec)
		cg := rec.Cgroup
		procCg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", st.PID))
		if cg.IsZero() {
			t.Fatalf("the sandbox has no cgroup on a host with %s", iso)
		}
		for _, dir := range cg.Dirs() {
			if !strings.Contains(string(procCg), ":/cubefleet-test-"+strings.SplitN(dir, "/cubefleet-test-", 2)[1]+"\n") {
				t.Errorf("/proc/%d/cgroup does not name %s:\n%s", st.PID, dir, procCg)
			}
		}
		for ctl, files := range map[string][][2]string{
			"cpu":    {{"cpu.max", "50000 100000"}, {"cpu.cfs_quota_us", "50000"}},
			"memory": {{"memory.max", strconv.Itoa(64 << 20)}, {"memory.limit_in_bytes", strconv.Itoa(64 << 20)}},
			"pids":   {{"pids.max", strconv.Itoa(DefaultMaxProcesses)}, {"pids.max", strconv.Itoa(DefaultMaxProcesses)}},
		} {
			v := iso.Cgroups.Version(ctl)
			if v == 0 {
				continue
			}
			file := files[2-v]
			found := false
			for _, dir := range cg.Dirs() {
				if b, err := os.ReadFile(filepath.Join(dir, file[0])); err == nil {
					found = true
					if strings.TrimSpace(string(b)) != file[1] {
						t.Errorf("%s = %q, want %s", filepath.Join(dir, file[0]), b, file[1])
					}
				}
			}
			if !found {
				t.Errorf("no %s in %v (cgroup v%d %s)", file[0], cg.Dirs(), v, ctl)
			}
		}
	}
}

// The memory limit holds: a sandbox that asks for more than its MemoryMiB does not get it.
func TestMemoryLimitHolds(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	// dd allocates a buffer of its block size.
	st, out := run(t, d, driver.Spec{ID: "hog", MemoryMiB: 64, Argv: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"}})
	if st.State == driver.StateExited && st.ExitCode == 0 {
		t.Errorf("a sandbox limited to 64 MiB allocated 256 MiB: %+v\n%s", st, out.Stderr)
	}
	st, out = run(t, d, driver.Spec{ID: "modest", MemoryMiB: 256, Argv: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=32M", "count=1"}})
	if st.ExitCode != 0 {
		t.Errorf("32 MiB within 256 MiB failed: %+v\n%s", st, out.Stderr)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// StopAll leaves no process of any sandbox, nor any supervisor: not the background children, not
// one that left the session, not one that ignores SIGTERM.
func TestStopAllLeavesNoOrphan(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, testConfig(t))
	tree := sh(`trap "" TERM; sleep 100 & setsid sleep 100 & (sleep 100 &); exec sleep 100`)
	var uids []int
	for _, id := range []string{"a", "b", "c"} {
		start(t, d, driver.Spec{ID: id, Argv: tree, Grace: 30 * time.Second})
		uid := sandboxUID(t, d, id)
		uids = append(uids, uid)
		testkit.WaitFor(t, 5*time.Second, "the sandbox's processes", func() bool { return len(processesOf(uid)) >= 4 })
	}
	var sups []Ident
	for _, id := range []string{"a", "b", "c"} {
		var sup Ident
		readJSON(filepath.Join(d.dir(id), fileSupervisor), &sup)
		sups = append(sups, sup)
	}
	// The grace is 30 s; StopAll has 500 ms before it kills what remains.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	if err := d.StopAll(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("StopAll took %s", took)
	}
	for _, uid := range uids {
		if left := processesOf(uid); len(left) > 0 {
			t.Errorf("uid %d still runs %v", uid, left)
		}
	}
	for _, s := range sups {
		if running(s.PID) {
			t.Errorf("supervisor %d still runs", s.PID)
		}
	}
	list, _ := d.List(testCtx(t))
	for _, st := range list {
		if st.State != driver.StateKilled {
			t.Errorf("%s: %+v, want killed", st.ID, st)
		}
	}
}

func TestRemove(t *testing.T) {
	cfg := testConfig(t)
	d := newDriver(t, cfg)
	ctx := testCtx(t)
	first := start(t, d, driver.Spec{ID: "gone", Argv: []string{"sleep", "30"}})
	uid := sandboxUID(t, d, "gone")
	if err := d.Remove(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.dir("gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox's directory is still there: %v", err)
	}
	if running(first.PID) {
		t.Errorf("pid %d still runs", first.PID)
	}
	if uid >= 0 {
		if h := (&uidLeases{dir: cfg.UIDLeaseDir}).holder(filepath.Join(cfg.UIDLeaseDir, strconv.Itoa(uid))); h == d.dir("gone") {
			t.Errorf("uid %d is still leased to %s", uid, h)
		}
	}
	if _, err := d.Status(ctx, "gone"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		t.Errorf("Status after Remove = %v, want NOT_FOUND", err)
	}
	if err := d.Remove(ctx, "gone"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		t.Errorf("a second Remove = %v, want NOT_FOUND", err)
	}
	if again := start(t, d, driver.Spec{ID: "gone", Argv: []string{"sleep", "30"}}); again.PID == first.PID {
		t.Errorf("a removed id did not start anew")
	}
}

// A sandbox's uid lease ends with it: when it exits, when it is stopped, and when StopAll (agent
// down) stops it; its directory is closed to other users first (0700), so the next sandbox of
// that uid cannot reach what it left. A new driver retires ended sandboxes it finds leased.
func TestUIDLeaseEndsWithSandbox(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	d := newDriver(t, cfg)
	ctx := testCtx(t)
	leased := func(id string, uid int) bool {
		return (&uidLeases{dir: cfg.UIDLeaseDir}).holder(filepath.Join(cfg.UIDLeaseDir, strconv.Itoa(uid))) == d.dir(id)
	}
	st, out := run(t, d, driver.Spec{ID: "done", Argv: sh("echo ok")})
	if st.ExitCode != 0 || string(out.Stdout) != "ok\n" {
		t.Fatalf("status %+v, output %q", st, out.Stdout)
	}
	uid := sandboxUID(t, d, "done")
	if leased("done", uid) {
		t.Errorf("uid %d is still leased to the ended sandbox", uid)
	}
	if fi, err := os.Stat(d.dir("done")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the ended sandbox's directory: %v, %v; want mode 0700", fi.Mode(), err)
	}

	start(t, d, driver.Spec{ID: "stopped", Argv: []string{"sleep", "300"}})
	start(t, d, driver.Spec{ID: "down", Argv: []string{"sleep", "300"}})
	stoppedUID, downUID := sandboxUID(t, d, "stopped"), sandboxUID(t, d, "down")
	if !leased("stopped", stoppedUID) || !leased("down", downUID) {
		t.Fatal("a running sandbox's uid is not leased to it")
	}
	if _, err := d.Stop(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	if leased("stopped", stoppedUID) {
		t.Errorf("uid %d is still leased to the stopped sandbox", stoppedUID)
	}
	if err := d.StopAll(ctx); err != nil {
		t.Fatal(err)
	}
	if leased("down", downUID) {
		t.Errorf("uid %d is still leased after StopAll", downUID)
	}

	// An ended sandbox whose lease outlived it (its agent died in between) is retired by the
	// next driver on the directory.
	d.Close()
	os.Chmod(d.dir("done"), 0o711)
	// The host's lease directory is shared: write the lease only if the uid is free.
	if err := (&uidLeases{dir: cfg.UIDLeaseDir}).create(filepath.Join(cfg.UIDLeaseDir, strconv.Itoa(uid)), d.dir("done")); err != nil {
		t.Skipf("uid %d was leased again meanwhile (%v): the rest needs it", uid, err)
	}
	d2 := newDriver(t, cfg)
	if leased("done", uid) {
		t.Errorf("uid %d is still leased to an ended sandbox after a new driver started", uid)
	}
	if fi, err := os.Stat(d2.dir("done")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the ended sandbox's directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
}

// A uid is lent again once its sandbox ended: removing (or stopping all, with) the ended one
// never touches the processes of the sandbox that has its uid now. One uid, outside the range the
// other tests use, in a lease directory of the test's own.
func TestUIDLentAgainNotKilledWithTheOld(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	cfg.UIDLeaseDir, cfg.FirstUID, cfg.UIDCount = filepath.Join(t.TempDir(), "leases"), 2_100_000, 1
	d := newDriver(t, cfg)
	ctx := testCtx(t)
	if st, _ := run(t, d, driver.Spec{ID: "old", Argv: []string{"true"}}); st.ExitCode != 0 {
		t.Fatalf("old: %+v", st)
	}
	now := start(t, d, driver.Spec{ID: "new", Argv: []string{"sleep", "300"}})
	if a, b := sandboxUID(t, d, "old"), sandboxUID(t, d, "new"); a != b {
		t.Fatalf("uids %d and %d, want the one uid lent again", a, b)
	}
	if err := d.Remove(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Status(ctx, "new"); err != nil || st.State != driver.StateRunning || !running(now.PID) {
		t.Errorf("the sandbox holding the uid now, after the old one's removal: %+v, %v", st, err)
	}
}

// The sandbox directory must be reachable by the sandboxes' users: not inside a 0700 directory
// such as the agent's state directory.
func TestDirInsidePrivateDirectoryRefused(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	private := filepath.Join(filepath.Dir(cfg.Dir), "state")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Dir = filepath.Join(private, "sandboxes")
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), private+" has mode 0700, so a sandbox's user cannot reach its working directory") {
		t.Errorf("New = %v, want refused naming %s", err, private)
	}
}

func TestDirOfAnotherUserRefused(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	if err := os.Mkdir(cfg.Dir, 0o711); err != nil {
		t.Fatal(err)
	}
	os.Chown(cfg.Dir, 65534, 65534)
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "is owned by uid 65534, not by the agent's user (uid 0)") {
		t.Errorf("New = %v, want refused naming the owner", err)
	}
}

func TestUIDRangeWithAccountsRefused(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	cfg.FirstUID, cfg.UIDCount = 1, 100 // daemon, bin, ... live here
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "holds the accounts") {
		t.Errorf("New = %v, want refused naming the accounts", err)
	}
}

// Without root the driver refuses, unless told to run sandboxes as its own user. As root, the
// test runs itself again as nobody.
func TestWithoutRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		if os.Getenv("CUBEFLEET_TEST_AS_NOBODY") != "" {
			t.Fatal("still root")
		}
		cfg := testConfig(t)
		bin := filepath.Join(filepath.Dir(cfg.Dir), "test.bin")
		self, _ := os.Executable()
		copyFile(t, self, bin)
		cmd := exec.Command(bin, "-test.run=^TestWithoutRoot$", "-test.v")
		cmd.Env = []string{"CUBEFLEET_TEST_AS_NOBODY=1", "TMPDIR=/tmp", "PATH=/usr/bin:/bin"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestWithoutRoot")) {
			t.Fatalf("as nobody: %v\n%s", err, out)
		}
		return
	}
	cfg := testConfig(t)
	cfg.AllowOwnUser = false
	_, err := New(cfg)
	want := fmt.Sprintf("the process driver runs each sandbox as a user of its own, which needs root, and this agent runs as uid %d", os.Geteuid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New without root = %v, want %q", err, want)
	}
	cfg.AllowOwnUser = true
	d := newDriver(t, cfg)
	iso := d.Isolation()
	if !iso.OwnUser || !strings.Contains(iso.String(), fmt.Sprintf("sandboxes run as the agent's own user (uid %d)", os.Geteuid())) {
		t.Errorf("isolation %q does not say sandboxes run as the agent's user", iso)
	}
	st, out := run(t, d, driver.Spec{ID: "me", Argv: []string{"id", "-u"}})
	if st.ExitCode != 0 || strings.TrimSpace(string(out.Stdout)) != strconv.Itoa(os.Geteuid()) {
		t.Errorf("id -u: %+v %q", st, out.Stdout)
	}
	// Without a user of its own a sandbox is tracked by its session: StopAll still ends a tree.
	start(t, d, driver.Spec{ID: "tree", Argv: sh(`sleep 100 & exec sleep 100`)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.StopAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Start whose context ends before the sandbox runs leaves nothing running and a definite end.
func TestStartCancelledLeavesNothingRunning(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	st, err := d.Start(ctx, driver.Spec{ID: "late", Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != driver.StateFailed || !strings.Contains(st.Message, "wait for the supervisor's report") {
		t.Errorf("status %+v, want failed waiting for the supervisor", st)
	}
	if uid := sandboxUID(t, d, "late"); uid >= 0 {
		if left := processesOf(uid); len(left) > 0 {
			t.Errorf("processes of the sandbox run: %v", left)
		}
	}
	if again, _ := d.Start(testCtx(t), driver.Spec{ID: "late", Argv: []string{"sleep", "30"}}); again.State != driver.StateFailed {
		t.Errorf("a retried Start = %+v, want the failed sandbox", again)
	}
}

// An agent started with SIGHUP and SIGINT ignored (under nohup) does not pass that on: a
// sandbox starts with no signal ignored.
func TestNoSignalIgnoredInSandbox(t *testing.T) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	defer signal.Reset(syscall.SIGHUP, syscall.SIGINT)
	d := newDriver(t, testConfig(t))
	st, out := run(t, d, driver.Spec{ID: "sigs", Argv: []string{"grep", "SigIgn", "/proc/self/status"}})
	if st.ExitCode != 0 || string(out.Stdout) != "SigIgn:\t0000000000000000\n" {
		t.Errorf("%+v: %q, want no signal ignored", st, out.Stdout)
	}
}

// TestEndMessage: the message of a sandbox's end names each signal once, SIGTERM too.
func TestEndMessage(t *testing.T) {
	spec := driver.Spec{Timeout: 30 * time.Second, MemoryMiB: 256}
	killed := func(sig unix.Signal) unix.WaitStatus { return unix.WaitStatus(sig) }
	exited := func(code int) unix.WaitStatus { return unix.WaitStatus(code << 8) }
	for _, c := range []struct {
		cause      driver.Reason
		ws         unix.WaitStatus
		afterGrace bool
		want       string
	}{
		{driver.ReasonStopped, killed(unix.SIGTERM), false, "stopped: killed by SIGTERM"},
		{driver.ReasonStopped, exited(0), false, "stopped: after SIGTERM, exited with code 0"},
		{driver.ReasonStopped, killed(unix.SIGKILL), true, "stopped: killed by SIGKILL after ignoring SIGTERM for 10s"},
		{driver.ReasonTimeout, killed(unix.SIGTERM), false, "timeout after 30s: killed by SIGTERM"},
		{driver.ReasonTimeout, exited(143), false, "timeout after 30s: after SIGTERM, exited with code 143"},
		{"", killed(unix.SIGTERM), false, "killed by SIGTERM"},
		{"", exited(2), false, "exited with code 2"},
	} {
		if _, got := endMessage(c.cause, c.ws, c.afterGrace, spec); got != c.want {
			t.Errorf("endMessage(%q, %v, %v) = %q, want %q", c.cause, c.ws, c.afterGrace, got, c.want)
		}
	}
}
