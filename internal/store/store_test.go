package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var demo = store.Module{Name: "demo", FS: fstest.MapFS{
	"0001_things.sql": {Data: []byte("-- +goose Up\nCREATE TABLE things (id TEXT PRIMARY KEY, n BIGINT NOT NULL);\n-- +goose Down\nDROP TABLE things;\n")},
}}

func TestEachMigratesAndRollsBack(t *testing.T) {
	storetest.Each(t, []store.Module{demo}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		st, err := db.MigrationStatus(ctx, demo)
		if err != nil || len(st) != 1 || st[0] != "demo/0001_things" {
			t.Fatalf("status = %v, %v", st, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ($1, $2)`, "a", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ($1, $2)`, "a", 2); !store.IsUniqueViolation(err) {
			t.Fatalf("duplicate insert: %v, want a unique violation", err)
		}
		boom := errors.New("boom")
		err = db.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ($1, $2)`, "b", 1); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, want boom", err)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM things`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("rows after rollback = %d, %v; want 1", n, err)
		}
		// Migrating again is a no-op.
		if err := db.Migrate(ctx, demo); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLease(t *testing.T) {
	storetest.Each(t, []store.Module{store.LeaseModule}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := time.UnixMilli(1_790_000_000_000)
		take := func(holder string, at time.Time) bool {
			ok, err := db.TryLease(ctx, "drift", holder, 10*time.Second, at)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !take("a", now) {
			t.Fatal("a could not take a free lease")
		}
		if take("b", now.Add(5*time.Second)) {
			t.Fatal("b took a's live lease")
		}
		if !take("a", now.Add(9*time.Second)) {
			t.Fatal("a could not renew")
		}
		if take("b", now.Add(18*time.Second)) {
			t.Fatal("b took the lease a renewed")
		}
		if !take("b", now.Add(20*time.Second)) {
			t.Fatal("b could not take the expired lease")
		}
	})
}

// TestInTxRollsBackOnPanic: a panic inside InTx rolls the transaction back and goes on up.
func TestInTxRollsBackOnPanic(t *testing.T) {
	storetest.Each(t, []store.Module{demo}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("recovered %v, want the panic to go on up", p)
				}
			}()
			db.InTx(ctx, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ($1, $2)`, "p", 1); err != nil {
					t.Fatal(err)
				}
				panic("boom")
			})
		}()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM things`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("rows after the panic = %d, %v; want 0", n, err)
		}
	})
}

// TestLockKeySerializes: two transactions that lock the same key run one after the other.
func TestLockKeySerializes(t *testing.T) {
	storetest.Each(t, []store.Module{demo}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ('counter', 0)`); err != nil {
			t.Fatal(err)
		}
		// Each transaction reads the counter, then writes it plus one: without the lock two of
		// them could read the same value on PostgreSQL (READ COMMITTED) and lose an increment.
		const workers, rounds = 4, 10
		errs := make(chan error, workers)
		for range workers {
			go func() {
				for range rounds {
					err := db.InTx(ctx, func(tx *sql.Tx) error {
						if err := db.LockKey(ctx, tx, "counter"); err != nil {
							return err
						}
						var n int
						if err := tx.QueryRowContext(ctx, `SELECT n FROM things WHERE id = 'counter'`).Scan(&n); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, `UPDATE things SET n = $1 WHERE id = 'counter'`, n+1)
						return err
					})
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range workers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT n FROM things WHERE id = 'counter'`).Scan(&n); err != nil || n != workers*rounds {
			t.Fatalf("counter = %d, %v; want %d", n, err, workers*rounds)
		}
	})
}

// TestOpenErrorsHideThePassword: a PostgreSQL URL that cannot be reached is named in the error
// without its password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = store.Open(ctx, "postgres://cubefleet:hunter2@"+addr+"/fleet?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, "hunter2") || !strings.Contains(msg, "cubefleet:xxxxx@"+addr) {
		t.Errorf("Open error %q: want the URL with its password hidden", msg)
	}
}

// TestSQLitePathWithURICharacters: a database path holding '#', '?', '%' or a space opens the
// file at that very path.
func TestSQLitePathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job#2 ?x=1 %41")
	path := filepath.Join(dir, "cubefleet.db")
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(context.Background(), demo); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("%s: %v", path, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("files beside the data directory: %v, want only it", entries)
	}
}

func TestSQLiteFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cubefleet.db")
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("database file mode %04o, want 0600", fi.Mode().Perm())
	}
}

// A connection keeps its statements: the same query runs again, also while rows of it are
// still open in the same transaction (the open rows keep theirs), and after the schema changed.
func TestSQLiteKeptStatements(t *testing.T) {
	db := storetest.SQLite(t, demo)
	ctx := context.Background()
	for i, id := range []string{"a", "b", "c"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ($1, $2)`, id, i); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT id FROM things WHERE n >= $1 ORDER BY id`
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		outer, err := tx.QueryContext(ctx, q, 0)
		if err != nil {
			return err
		}
		defer outer.Close()
		var got []string
		for outer.Next() {
			var id string
			if err := outer.Scan(&id); err != nil {
				return err
			}
			// The same statement, while outer's rows are open.
			var inner []string
			rows, err := tx.QueryContext(ctx, q, 1)
			if err != nil {
				return err
			}
			for rows.Next() {
				var s string
				rows.Scan(&s)
				inner = append(inner, s)
			}
			rows.Close()
			if strings.Join(inner, ",") != "b,c" {
				t.Errorf("inner rows %v, want b,c", inner)
			}
			got = append(got, id)
		}
		if strings.Join(got, ",") != "a,b,c" {
			t.Errorf("outer rows %v, want a,b,c", got)
		}
		return outer.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE things ADD COLUMN note TEXT NOT NULL DEFAULT 'x'`); err != nil {
		t.Fatal(err)
	}
	for range 3 { // every connection of the pool sees the new schema through its kept statement
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM things WHERE n >= $1`, 0).Scan(&n); err != nil || n != 3 {
			t.Fatalf("count = %d, %v", n, err)
		}
		var note string
		if err := db.QueryRowContext(ctx, `SELECT note FROM things WHERE id = $1`, "a").Scan(&note); err != nil || note != "x" {
			t.Fatalf("note = %q, %v", note, err)
		}
	}
}

// On SQLite a transaction waits for the one before it, and gives up when its context ends.
func TestSQLiteInTxTakesTurns(t *testing.T) {
	db := storetest.SQLite(t, demo)
	ctx := context.Background()
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.InTx(ctx, func(tx *sql.Tx) error {
			close(holding)
			<-release
			_, err := tx.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ($1, $2)`, "first", 1)
			return err
		})
	}()
	<-holding
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := db.InTx(short, func(tx *sql.Tx) error {
		t.Error("ran while another transaction held the turn")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting InTx = %v, want its context's deadline", err)
	}
	second := make(chan error, 1)
	go func() {
		second <- db.InTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE things SET n = 2 WHERE id = $1`, "first")
			return err
		})
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT n FROM things WHERE id = $1`, "first").Scan(&n); err != nil || n != 2 {
		t.Fatalf("n = %d, %v: the second transaction ran before the first", n, err)
	}
}

// InGroupTx: concurrent callers' writes all commit (sharing transactions on SQLite), a
// caller's error undoes only its own writes, a panic reaches its own caller, and a caller whose
// context has ended gets its error without its fn running. Both databases.
func TestInGroupTx(t *testing.T) {
	storetest.Each(t, []store.Module{demo}, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		boom := errors.New("boom")
		var wg sync.WaitGroup
		errs := make([]error, 200)
		for i := range errs {
			wg.Go(func() {
				errs[i] = db.InGroupTx(ctx, func(tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ($1, $2)`, fmt.Sprint(i), i); err != nil {
						return err
					}
					if i%10 == 3 {
						return boom // its insert is undone, the others' are not
					}
					return nil
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if want := i%10 == 3; want != errors.Is(err, boom) || !want && err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM things`).Scan(&n); err != nil || n != 180 {
			t.Fatalf("%d rows, %v; want 180", n, err)
		}

		func() {
			defer func() {
				if p := recover(); p != "oops" {
					t.Errorf("recovered %v, want the fn's panic", p)
				}
			}()
			db.InGroupTx(ctx, func(tx *sql.Tx) error {
				tx.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ('panic', 0)`)
				panic("oops")
			})
		}()
		if err := db.InGroupTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO things (id, n) VALUES ('after', 0)`)
			return err
		}); err != nil {
			t.Fatalf("after a panic: %v", err)
		}

		done, cancel := context.WithCancel(ctx)
		cancel()
		ran := false
		if err := db.InGroupTx(done, func(tx *sql.Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
			t.Fatalf("ended context: %v (ran %v)", err, ran)
		}
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM things`).Scan(&n); err != nil || n != 181 {
			t.Fatalf("%d rows, %v; want 181 (the panicking call's insert undone)", n, err)
		}
	})
}

// TestIsUnreachable: connection failures are unreachable; a query's own failure is not.
func TestIsUnreachable(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connect", fmt.Errorf("authenticate: %w", &pgconn.ConnectError{}), true},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"bad conn", fmt.Errorf("query: %w", driver.ErrBadConn), true},
		{"broken", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"closed by the driver", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"no rows", sql.ErrNoRows, false},
		{"other", errors.New("syntax error"), false},
	} {
		if got := store.IsUnreachable(c.err); got != c.want {
			t.Errorf("%s: IsUnreachable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestLogPages: a forward page keeps limit rows and names the last as the next cursor when
// more were read; a tail page keeps the newest limit rows, oldest first, and says older exist.
func TestLogPages(t *testing.T) {
	id := func(s string) string { return s }
	for _, c := range []struct {
		rows       []string
		limit      int
		page, next string
	}{
		{[]string{"a", "b", "c"}, 2, "a,b", "b"},
		{[]string{"a", "b"}, 2, "a,b", ""},
		{[]string{}, 2, "", ""},
	} {
		page, next := store.ForwardPage(c.rows, c.limit, id)
		if strings.Join(page, ",") != c.page || next != c.next {
			t.Errorf("ForwardPage(%v, %d) = %v, %q; want %s, %q", c.rows, c.limit, page, next, c.page, c.next)
		}
	}
	for _, c := range []struct {
		newestFirst []string
		limit       int
		page        string
		older       bool
	}{
		{[]string{"c", "b", "a"}, 2, "b,c", true},
		{[]string{"b", "a"}, 2, "a,b", false},
	} {
		page, older := store.TailPage(c.newestFirst, c.limit)
		if strings.Join(page, ",") != c.page || older != c.older {
			t.Errorf("TailPage(%v, %d) = %v, %v; want %s, %v", c.newestFirst, c.limit, page, older, c.page, c.older)
		}
	}
	for in, want := range map[int]int{0: 100, -1: 100, 1: 1, 1000: 1000, 1001: 100} {
		if got := store.PageLimit(in); got != want {
			t.Errorf("PageLimit(%d) = %d, want %d", in, got, want)
		}
	}
}
