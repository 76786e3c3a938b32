package storetest_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

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
