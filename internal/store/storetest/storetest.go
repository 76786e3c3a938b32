// Package storetest gives tests real databases: a fresh migrated SQLite file per test, and a
// fresh database per test on one throwaway PostgreSQL cluster per test binary, started with the
// machine's initdb and pg_ctl on 127.0.0.1 on a free port (as the postgres user when the test
// runs as root, since PostgreSQL refuses to run as root). Set CUBEFLEET_TEST_POSTGRES to a
// postgres:// URL to use an existing server instead. Without PostgreSQL the PostgreSQL half of a
// test skips with a clear message, except under CI=true, where it fails.
package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cubefleet/cubefleet/internal/store"
)

// Main runs a package's tests (call it from TestMain) and stops the PostgreSQL cluster, if one
// was started, when they are done.
func Main(m *testing.M) {
	code := m.Run()
	cluster.stop()
	os.Exit(code)
}

// Each runs fn as two sub-tests, "sqlite" and "postgres", each on a fresh database migrated
// with modules.
func Each(t *testing.T, modules []store.Module, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t, modules...)) })
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t, modules...)) })
}

// SQLite returns a fresh SQLite database in t's temporary directory, migrated with modules and
// closed at cleanup.
func SQLite(tb testing.TB, modules ...store.Module) *store.DB {
	tb.Helper()
	return open(tb, filepath.Join(tb.TempDir(), "cubefleet.db"), modules)
}

// Postgres returns a fresh database on the test binary's PostgreSQL cluster, migrated with
// modules and closed at cleanup.
func Postgres(tb testing.TB, modules ...store.Module) *store.DB {
	tb.Helper()
	return open(tb, PostgresURL(tb), modules)
}

// PostgresURL creates a fresh, empty database on the test binary's PostgreSQL cluster and
// returns its URL.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	base, err := cluster.url()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("PostgreSQL is required under CI: %v", err)
		}
		tb.Skipf("no PostgreSQL for this test (%v); install PostgreSQL (initdb, pg_ctl) or set CUBEFLEET_TEST_POSTGRES", err)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	admin, err := sql.Open("pgx", base+"/postgres?sslmode=disable")
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	return base + "/" + name + "?sslmode=disable"
}

var dbSeq atomic.Int64

func open(tb testing.TB, dsn string, modules []store.Module) *store.DB {
	tb.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx, modules...); err != nil {
		tb.Fatal(err)
	}
	return db
}

// pgCluster is the one PostgreSQL cluster of a test binary, started on first use.
type pgCluster struct {
	once    sync.Once
	base    string // postgres://user@127.0.0.1:port
	err     error
	dir     string
	asUser  string
	started bool
}

var cluster pgCluster

func (c *pgCluster) url() (string, error) {
	c.once.Do(func() { c.base, c.err = c.start() })
	return c.base, c.err
}

func (c *pgCluster) start() (string, error) {
	if u := os.Getenv("CUBEFLEET_TEST_POSTGRES"); u != "" {
		return strings.TrimRight(strings.SplitN(u, "?", 2)[0], "/"), nil
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("initdb not on PATH")
	}
	pgctl, err := exec.LookPath("pg_ctl")
	if err != nil {
		return "", fmt.Errorf("pg_ctl not on PATH")
	}
	dir, err := os.MkdirTemp("", "cubefleet-pg-")
	if err != nil {
		return "", err
	}
	c.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", err
		}
		c.asUser = "postgres"
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", port, dir)
	if out, err := c.run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return "", fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	c.started = true
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d", port), nil
}

func (c *pgCluster) run(name string, args ...string) ([]byte, error) {
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.asUser, "--", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

func (c *pgCluster) stop() {
	if c.started {
		pgctl, _ := exec.LookPath("pg_ctl")
		c.run(pgctl, "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
