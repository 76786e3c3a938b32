package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/agent/driver/process"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/server/servertest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestMain runs the binary's hidden sandbox modes first: an agent a test starts re-executes this
// test binary as its sandboxes' supervisor and as its namespace probe.
func TestMain(m *testing.M) {
	process.MaybeRunSupervisor()
	storetest.Main(m)
}

// cliEnv is a running --dev control plane on 127.0.0.1:0 and an environment pointing the CLI
// at it.
type cliEnv struct {
	t         *testing.T
	url       string
	dir       string // temporary directory: data dir, token files, working directory
	tokenFile string // the administrator's key (mode 0600)
	env       map[string]string
}

// testNow is the server clock of the golden tests.
func testNow() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// mustServe starts a --dev server on database ("" for SQLite in the data dir) with a fixed
// clock, serving until the test ends, and makes the test's working directory a fresh one.
// Each opt may change the configuration before the server starts.
func mustServe(t *testing.T, database string, opts ...func(*server.Config)) *cliEnv {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := server.Config{DataDir: filepath.Join(dir, "data"), Database: database, Dev: true, Now: testNow}
	for _, opt := range opts {
		opt(&cfg)
	}
	srv := servertest.Start(t, cfg, nil)
	return &cliEnv{
		t: t, url: srv.URL(), dir: dir, tokenFile: filepath.Join(dir, "data", controlplane.AdminTokenFile),
		env: map[string]string{"CUBEFLEET_URL": srv.URL(), "XDG_CONFIG_HOME": filepath.Join(dir, "xdg"), "HOME": dir},
	}
}

// eachDatabase runs fn against a server on SQLite and one on PostgreSQL (each started with
// opts, as mustServe does).
func eachDatabase(t *testing.T, fn func(t *testing.T, c *cliEnv), opts ...func(*server.Config)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, mustServe(t, "", opts...)) })
	t.Run("postgres", func(t *testing.T) { fn(t, mustServe(t, storetest.PostgresURL(t), opts...)) })
}

// run executes the CLI with stdin and returns the exit code, stdout and stderr.
func (c *cliEnv) run(stdin string, args ...string) (int, string, string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, IO{In: strings.NewReader(stdin), Out: &out, Err: &errb, Getenv: func(k string) string { return c.env[k] }})
	return code, out.String(), errb.String()
}

// admin runs the CLI as the administrator (--token-file) and fails the test unless it exits 0.
func (c *cliEnv) admin(args ...string) string {
	c.t.Helper()
	code, out, errOut := c.run("", append(args, "--token-file", c.tokenFile)...)
	if code != ExitOK {
		c.t.Fatalf("cubefleet %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

var idPattern = regexp.MustCompile(`\b[a-z]+_[0-9A-HJKMNP-TV-Z]{26}\b`)

// sinceZero is a node state's "(since 0s)", which `nodes get` shows once the registry's health
// check has seen the node's state change: on the tests' fixed clock it is always 0s, but whether
// the check (on its own ticker) has run before the command depends on the machine's load.
var sinceZero = regexp.MustCompile(`(State: +[A-Za-z,]+) \(since 0s\)`)

// normalize replaces what changes from run to run (ids, the temporary directory, the server's
// port) with placeholders.
func (c *cliEnv) normalize(s string) string {
	s = idPattern.ReplaceAllString(s, "<id>")
	s = sinceZero.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, c.dir, "$TMP")
	return strings.ReplaceAll(s, c.url, "$URL")
}

// bgRun is a cubefleet command running in the background with its own context: a server, a
// simulator, a `nodes drain --wait`.
type bgRun struct {
	args     []string
	out, err testkit.SyncBuffer
	cancel   context.CancelFunc
	exited   chan struct{} // closed when Run returned
	code     int           // Run's exit code, once exited is closed
}

// start runs `cubefleet args...` in the background with the environment getenv (nil: an empty
// one). The test's end cancels it and waits for it, and a failed test logs its output.
func start(t *testing.T, getenv func(string) string, args ...string) *bgRun {
	t.Helper()
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &bgRun{args: args, cancel: cancel, exited: make(chan struct{})}
	go func() {
		defer close(r.exited)
		r.code = Run(ctx, args, IO{In: strings.NewReader(""), Out: &r.out, Err: &r.err, Getenv: getenv})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.exited:
		case <-time.After(20 * time.Second):
			t.Errorf("cubefleet %s did not stop within 20 s of its cancel", strings.Join(args, " "))
		}
		if t.Failed() {
			t.Logf("cubefleet %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.out.String(), r.err.String())
		}
	})
	return r
}

// listening waits until standard output holds a match of re (a "listening on URL" line) and
// returns the match and its groups. The command exiting first fails the test.
func (r *bgRun) listening(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	testkit.WaitFor(t, 20*time.Second, "a line matching "+re.String()+" on standard output", func() bool {
		select {
		case <-r.exited:
			t.Fatalf("cubefleet %s exited %d before it listened", strings.Join(r.args, " "), r.code)
		default:
		}
		m = re.FindStringSubmatch(r.out.String())
		return m != nil
	})
	return m
}

// waitStderr waits until standard error holds want.
func (r *bgRun) waitStderr(t *testing.T, want string) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%q on standard error", want), func() bool {
		return strings.Contains(r.err.String(), want)
	})
}

// exit waits for the command to end and returns its exit code.
func (r *bgRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-r.exited:
		return r.code
	case <-time.After(20 * time.Second):
		t.Fatalf("cubefleet %s did not end", strings.Join(r.args, " "))
	}
	return -1
}

// stop cancels the command (Ctrl-C) and returns its exit code.
func (r *bgRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	return r.exit(t)
}

// transcript records CLI runs as a golden file shows them: each command, its exit code, its
// stdout and its stderr.
type transcript struct {
	strings.Builder
	t *testing.T
}

// run runs `cubefleet args...` (runCLI), records it and returns its stdout.
func (tr *transcript) run(args ...string) string {
	tr.t.Helper()
	code, out, errOut := runCLI(tr.t, nil, args...)
	fmt.Fprintf(tr, "$ cubefleet %s\nexit %d\n", strings.Join(args, " "), code)
	if out != "" {
		fmt.Fprintf(tr, "stdout:\n%s", out)
	}
	if errOut != "" {
		fmt.Fprintf(tr, "stderr:\n%s", errOut)
	}
	tr.WriteString("\n")
	return out
}
