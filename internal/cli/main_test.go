package cli

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/server"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

func TestMain(m *testing.M) { storetest.Main(m) }

// syncBuffer is a bytes.Buffer safe for a command's goroutine to write while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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
	ctx, cancel := context.WithCancel(context.Background())
	cfg := server.Config{
		Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), Database: database, Dev: true, Now: testNow,
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &cliEnv{
		t: t, url: srv.URL(), dir: dir, tokenFile: filepath.Join(dir, "data", server.AdminTokenFile),
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

// normalize replaces what changes from run to run (ids, the temporary directory, the server's
// port) with placeholders.
func (c *cliEnv) normalize(s string) string {
	s = idPattern.ReplaceAllString(s, "<id>")
	s = strings.ReplaceAll(s, c.dir, "$TMP")
	return strings.ReplaceAll(s, c.url, "$URL")
}

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir(t), name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// goldenDir is testdata in the package directory (tests chdir away from it).
func goldenDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(pkgDir, "testdata")
}

// pkgDir is the package directory, where go test starts.
var pkgDir = func() string {
	d, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return d
}()
