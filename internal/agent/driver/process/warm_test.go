package process

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/agent/driver"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// warm makes a warm sandbox, which must be warm.
func warm(t *testing.T, d *Driver, spec driver.Spec) driver.Status {
	t.Helper()
	st, err := d.Warm(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != driver.StateWarm || st.Ended() {
		t.Fatalf("Warm(%s) = %+v, want warm", spec.ID, st)
	}
	return st
}

// A warm sandbox waits as its own user in its cgroup, runs nothing, and runs its claim's command
// with the claim's environment, timeout and output limit under the warm sandbox's limits.
func TestWarmThenClaim(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	w := warm(t, d, driver.Spec{ID: "w1", MemoryMiB: 256, CPUMillicores: 500})
	if uid := sandboxUID(t, d, "w1"); uid >= 0 {
		procs := processesOf(uid)
		if len(procs) != perSandbox(d) || procs[0] != w.PID {
			t.Errorf("processes of the warm sandbox's user: %v, want only its stage %d (and with namespaces the stage under it)", procs, w.PID)
		}
	}
	if list, _ := d.List(ctx); len(list) != 1 || list[0].State != driver.StateWarm {
		t.Errorf("List = %+v, want the warm sandbox", list)
	}
	if fi, err := os.Stat(filepath.Join(d.dir("w1"), fileClaim)); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("claim socket: %v, %v; want it private to the agent's user", fi, err)
	}

	const secret = "claim-secret-4711"
	began := time.Now()
	st, err := d.Claim(ctx, driver.Spec{
		ID: "w1", Argv: sh(`echo "$TOKEN" | wc -c; id -u; pwd; echo err >&2; sleep 30`),
		Env: []string{"TOKEN=" + secret}, WorkDir: "job", Timeout: 300 * time.Millisecond, OutputLimitBytes: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != driver.StateRunning || st.PID != w.PID {
		t.Fatalf("Claim = %+v, want running in the warm sandbox's stage (pid %d)", st, w.PID)
	}
	end, err := d.Wait(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if end.Reason != driver.ReasonTimeout || end.EndedAt.Sub(began) < 300*time.Millisecond {
		t.Errorf("end %+v, want the claim's timeout, counted from the claim", end)
	}
	out, _ := d.Output(ctx, "w1")
	uid := strconv.Itoa(os.Geteuid())
	if u := sandboxUID(t, d, "w1"); u >= 0 {
		uid = strconv.Itoa(u)
	}
	want := strconv.Itoa(len(secret)+1) + "\n" + uid + "\n" + filepath.Join(d.dir("w1"), dirWork, "job") + "\n"
	if string(out.Stdout) != want || string(out.Stderr) != "err\n" {
		t.Errorf("output %q %q, want %q", out.Stdout, out.Stderr, want)
	}
	var rec sandboxRecord
	readJSON(filepath.Join(d.dir("w1"), fileSandbox), &rec)
	if rec.MemoryMiB != 256 || rec.OutputLimitBytes != 100 || len(rec.Argv) != 3 || rec.ClaimedAt.IsZero() || strings.Join(rec.EnvNames, ",") != "TOKEN" {
		t.Errorf("record after the claim %+v", rec)
	}
	filepath.WalkDir(d.dir("w1"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the claim's secret", p)
			}
		}
		return nil
	})
}

// A claim is carried out once: a second claim (also through a new driver after an agent
// restart) returns the sandbox as it is; a claim of something that is not warm is refused.
func TestClaimOnceAndAfterRestart(t *testing.T) {
	cfg := testConfig(t)
	d1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	warm(t, d1, driver.Spec{ID: "later"})
	warm(t, d1, driver.Spec{ID: "twice"})
	claim := driver.Spec{ID: "twice", Argv: []string{"sleep", "30"}}
	first, err := d1.Claim(ctx, claim)
	if err != nil || first.State != driver.StateRunning {
		t.Fatalf("Claim = %+v, %v", first, err)
	}
	claim.Argv = []string{"sleep", "60"}
	if again, err := d1.Claim(ctx, claim); err != nil || again.PID != first.PID || again.StartedAt != first.StartedAt {
		t.Errorf("a second claim = %+v, %v; want the first one's sandbox", again, err)
	}
	// Warm again: the existing sandbox, idempotent by id.
	if st, err := d1.Warm(ctx, driver.Spec{ID: "twice"}); err != nil || st.State != driver.StateRunning {
		t.Errorf("Warm of a claimed id = %+v, %v; want it as it is", st, err)
	}
	d1.Close()

	d2 := newDriver(t, cfg)
	st, err := d2.Claim(ctx, driver.Spec{ID: "later", Argv: sh("echo claimed after a restart")})
	if err != nil || st.State != driver.StateRunning && st.State != driver.StateExited { // echo may be done already
		t.Fatalf("Claim through a new driver = %+v, %v", st, err)
	}
	end, _ := d2.Wait(ctx, "later")
	out, _ := d2.Output(ctx, "later")
	if end.State != driver.StateExited || string(out.Stdout) != "claimed after a restart\n" {
		t.Errorf("claimed after a restart: %+v %q", end, out.Stdout)
	}
	if again, err := d2.Claim(ctx, driver.Spec{ID: "twice", Argv: []string{"true"}}); err != nil || again.PID != first.PID {
		t.Errorf("a claim after the restart = %+v, %v; want the first claim's sandbox", again, err)
	}

	start(t, d2, driver.Spec{ID: "plain", Argv: []string{"sleep", "30"}})
	if _, err := d2.Claim(ctx, driver.Spec{ID: "plain", Argv: []string{"true"}}); !cubefleet.IsCode(err, cubefleet.CodeConflict) {
		t.Errorf("claim of a started sandbox = %v, want CONFLICT", err)
	}
	if _, err := d2.Claim(ctx, driver.Spec{ID: "nobody", Argv: []string{"true"}}); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
		t.Errorf("claim of an unknown sandbox = %v, want NOT_FOUND", err)
	}
	if _, err := d2.Warm(ctx, driver.Spec{ID: "argv", Argv: []string{"true"}}); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
		t.Errorf("Warm with a command = %v, want INVALID_INPUT", err)
	}
	if _, err := os.Stat(d2.dir("argv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused warm spec left %s", d2.dir("argv"))
	}
}

// A warm sandbox is stopped like a running one (killed, stopped, nothing left of it), and a
// claim of it is then refused; one whose command cannot start fails.
func TestWarmStoppedAndFailedClaim(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	w := warm(t, d, driver.Spec{ID: "idle"})
	end, err := d.Stop(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	if end.State != driver.StateKilled || end.Reason != driver.ReasonStopped || end.Message != "stopped while warm, before a claim" {
		t.Errorf("Stop of a warm sandbox = %+v", end)
	}
	testkit.WaitFor(t, 5*time.Second, "the warm stage to end", func() bool { return !running(w.PID) })
	if _, err := d.Claim(ctx, driver.Spec{ID: "idle", Argv: []string{"true"}}); !cubefleet.IsCode(err, cubefleet.CodeConflict) {
		t.Errorf("claim of a stopped warm sandbox = %v, want CONFLICT", err)
	}

	warm(t, d, driver.Spec{ID: "typo"})
	st, err := d.Claim(ctx, driver.Spec{ID: "typo", Argv: []string{"no-such-program-here"}})
	if err != nil || st.State != driver.StateFailed || !strings.Contains(st.Message, "no-such-program-here: not found") {
		t.Errorf("claim of a missing program = %+v, %v; want failed naming it", st, err)
	}
	if err := d.Remove(ctx, "typo"); err != nil {
		t.Error(err)
	}
}

// A warm sandbox whose exec stage is killed from outside while it waits ends at once, lost,
// saying how its stage ended; a claim of it is then refused (CONFLICT) rather than handed to a
// stage that is gone.
func TestWarmStageKilledWhileWarm(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	w := warm(t, d, driver.Spec{ID: "victim"})
	if err := syscall.Kill(w.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var st driver.Status
	testkit.WaitFor(t, 5*time.Second, "the warm sandbox to end", func() bool {
		st, _ = d.Status(ctx, "victim")
		return st.Ended()
	})
	if st.State != driver.StateLost || st.Signal != "SIGKILL" || !strings.Contains(st.Message, "ended while the sandbox was warm, before a claim: killed by SIGKILL") {
		t.Errorf("a warm sandbox whose stage was killed: %+v", st)
	}
	if _, err := d.Claim(ctx, driver.Spec{ID: "victim", Argv: []string{"true"}}); !cubefleet.IsCode(err, cubefleet.CodeConflict) {
		t.Errorf("claim of a warm sandbox whose stage is gone = %v, want CONFLICT", err)
	}
	if _, err := os.Stat(filepath.Join(d.dir("victim"), fileClaim)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the claim socket is left: %v", err)
	}
}

// A claim that reaches a warm sandbox whose stage was killed before its supervisor noticed runs
// nothing and says so: the sandbox ends lost or failed, naming how its stage ended (never a
// broken pipe), or the claim is refused. The supervisor is held (SIGSTOP) while its stage is
// killed and the claim sent, so that both wait for it when it goes on.
func TestClaimOfWarmSandboxWhoseStageIsGone(t *testing.T) {
	d := newDriver(t, testConfig(t))
	ctx := testCtx(t)
	for i := range 5 {
		id := "gone" + strconv.Itoa(i)
		w := warm(t, d, driver.Spec{ID: id})
		var sup Ident
		readJSON(filepath.Join(d.dir(id), fileSupervisor), &sup)
		if err := syscall.Kill(sup.PID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(w.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, "the stage to end", func() bool { return !running(w.PID) })
		type answer struct {
			st  driver.Status
			err error
		}
		claimed := make(chan answer, 1)
		go func() {
			st, err := d.Claim(ctx, driver.Spec{ID: id, Argv: []string{"true"}})
			claimed <- answer{st, err}
		}()
		time.Sleep(50 * time.Millisecond) // the claim waits on the socket
		if err := syscall.Kill(sup.PID, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		a := <-claimed
		switch {
		case cubefleet.IsCode(a.err, cubefleet.CodeConflict):
		case a.err != nil:
			t.Errorf("claim %d: %v, want the sandbox's end or CONFLICT", i, a.err)
		case a.st.State != driver.StateLost && a.st.State != driver.StateFailed,
			!strings.Contains(a.st.Message, "killed by SIGKILL"), strings.Contains(a.st.Message, "broken pipe"):
			t.Errorf("claim %d of a warm sandbox whose stage is gone = %+v, want it lost or failed, naming how the stage ended", i, a.st)
		}
	}
}
