// Package store opens the control plane's database (SQLite through modernc.org/sqlite, or
// PostgreSQL through pgx), runs each module's embedded goose migrations with the module's own
// version table, and runs transactions. The SQL the modules write is portable between the two:
// `$N` placeholders, TEXT, BIGINT and INTEGER columns, times as Unix milliseconds.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Dialect names the database behind a DB.
type Dialect string

// The supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Querier is what a module's SQL needs: *sql.DB, *sql.Tx and *sql.Conn all satisfy it. Module
// functions take a Querier so the same code runs alone or inside a caller's transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DB is an open database. It is safe for concurrent use.
type DB struct {
	*sql.DB
	dialect Dialect
	// writer serializes InTx on SQLite (a semaphore of one): one write transaction at a time
	// holds the database's write lock, and the others wait here, woken at once, instead of in
	// SQLite's busy handler, which sleeps 1 to 100 ms between tries. nil on PostgreSQL.
	writer chan struct{}
	group  group // the callers of InGroupTx waiting for a shared transaction (SQLite)
}

// Dialect reports which database this is.
func (db *DB) Dialect() Dialect { return db.dialect }

// Open opens the database named by dsn: a `postgres://` or `postgresql://` URL opens PostgreSQL
// through pgx; anything else is a SQLite file path (created if missing, WAL mode, foreign keys
// on, busy timeout 10 s, write transactions taken with BEGIN IMMEDIATE). It pings the database
// before it returns. Errors never include the DSN's password.
func Open(ctx context.Context, dsn string) (*DB, error) {
	var db *DB
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sqldb, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("open postgres %s: %w", redact(dsn), err)
		}
		sqldb.SetMaxOpenConns(32)
		sqldb.SetMaxIdleConns(32)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		db = &DB{DB: sqldb, dialect: Postgres}
	} else {
		if dir := filepath.Dir(dsn); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("open sqlite: %w", err)
			}
		}
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
		sqldb, err := openSQLite("file:" + uriPath.Replace(dsn) + "?" + q.Encode())
		if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", dsn, err)
		}
		// Keep every connection open: opening one runs the pragmas again, and a busy
		// server would otherwise open and close connections beyond the default 2 idle.
		sqldb.SetMaxOpenConns(8)
		sqldb.SetMaxIdleConns(8)
		db = &DB{DB: sqldb, dialect: SQLite, writer: make(chan struct{}, 1)}

	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s database %s: %w", db.dialect, redact(dsn), err)
	}
	if db.dialect == SQLite {
		// The database holds sealed secrets and key hashes: owner only. SQLite gives its -wal
		// and -shm files the database file's mode.
		if err := os.Chmod(dsn, 0o600); err != nil {
			db.Close()
			return nil, fmt.Errorf("open sqlite %s: %w", dsn, err)
		}
	}
	return db, nil
}

// uriPath escapes what a file: URI's path cannot hold as it is: SQLite reads '%' as an escape,
// '?' as the start of the query and '#' as the start of the fragment (a data directory such as
// "job#2" would otherwise open a database at "job").
var uriPath = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// redact hides the password of a URL-shaped DSN.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if err != nil && strings.Contains(dsn, "@") {
			return "(unparsable database URL)"
		}
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Module is one module's embedded migrations: files `NNNN_name.sql` (goose format) at the root
// of FS. Each module keeps its own version table, `goose_<name>`, so modules migrate
// independently (`fleet/0001_names`, `fleet/0002_applied`, ...).
type Module struct {
	Name string
	FS   fs.FS
}

// EmbeddedModule returns the module name whose migrations are the files of fsys's
// "migrations" directory (a module embeds them with `//go:embed migrations/*.sql`).
func EmbeddedModule(name string, fsys fs.FS) Module {
	sub, err := fs.Sub(fsys, "migrations")
	if err != nil {
		panic(fmt.Sprintf("store: module %s: %v", name, err)) // fs.Sub fails only for an invalid path literal
	}
	return Module{Name: name, FS: sub}
}

// Migrate runs every module's pending migrations, in the order given. On PostgreSQL it holds a
// session advisory lock so several servers starting together migrate once.
func (db *DB) Migrate(ctx context.Context, modules ...Module) error {
	for _, m := range modules {
		opts := []goose.ProviderOption{goose.WithTableName("goose_" + m.Name), goose.WithDisableGlobalRegistry(true)}
		dialect := goose.DialectSQLite3
		if db.dialect == Postgres {
			dialect = goose.DialectPostgres
			locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(fnvHash("cubefleet-migrate:" + m.Name))))
			if err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
			opts = append(opts, goose.WithSessionLocker(locker))
		}
		p, err := goose.NewProvider(dialect, db.DB, m.FS, opts...)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	return nil
}

// MigrationStatus lists the applied versions of a module as `<module>/<file name>`.
func (db *DB) MigrationStatus(ctx context.Context, m Module) ([]string, error) {
	dialect := goose.DialectSQLite3
	if db.dialect == Postgres {
		dialect = goose.DialectPostgres
	}
	p, err := goose.NewProvider(dialect, db.DB, m.FS, goose.WithTableName("goose_"+m.Name), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, err
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range st {
		if s.State == goose.StateApplied {
			out = append(out, m.Name+"/"+strings.TrimSuffix(filepath.Base(s.Source.Path), ".sql"))
		}
	}
	return out, nil
}

func fnvHash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// InTx runs fn in a transaction and commits it when fn returns nil; any error (or panic) rolls
// it back, so nothing fn wrote survives a failure. On SQLite the transaction holds the write
// lock from its start (BEGIN IMMEDIATE), and the transactions of one DB take turns in the
// process: fn must not call InTx, nor write outside tx. A caller whose ctx ends while it waits
// for its turn gets ctx's error.
func (db *DB) InTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	if db.writer != nil {
		select {
		case db.writer <- struct{}{}:
			defer func() { <-db.writer }()
		case <-ctx.Done():
			return fmt.Errorf("begin: %w", ctx.Err())
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
		if err != nil {
			tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// LockKey takes a transaction-scoped exclusive lock named key: pg_advisory_xact_lock on
// PostgreSQL; on SQLite the write transaction already excludes every other writer, so it does
// nothing there. The lock is released when the transaction ends.
func (db *DB) LockKey(ctx context.Context, tx *sql.Tx, key string) error {
	if db.dialect != Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(fnvHash(key))); err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	return nil
}

// Ping answers nil when the database answers a query within ctx.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	return db.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}

// IsBusy reports whether err is SQLite's "database is locked" (SQLITE_BUSY): another writer
// held the database for longer than the busy timeout. The caller may retry.
func IsBusy(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY"))
}

// IsUnreachable reports whether err says the database could not be reached, as opposed to a
// query that failed: no connection could be made (refused, timed out, PostgreSQL starting or
// shutting down: SQLSTATE classes 08 and 57P), or the one in use broke (pgconn.ErrConnClosed
// included: the driver had closed it before a BEGIN or COMMIT was sent). Such a call may succeed
// once the database is back; the API answers it UNAVAILABLE (503, Retry-After).
func IsUnreachable(err error) bool {
	if err == nil {
		return false
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	var coded interface{ SQLState() string }
	switch {
	case errors.As(err, &connect), errors.As(err, &netErr), errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed):
		return true
	case errors.As(err, &coded):
		state := coded.SQLState()
		return strings.HasPrefix(state, "08") || strings.HasPrefix(state, "57P")
	}
	return false
}

// IsUniqueViolation reports whether err is a unique-constraint violation on either database.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) && coded.SQLState() == "23505" {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505")
}
