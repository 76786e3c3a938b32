package storetest_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var demo = store.Module{Name: "demo", FS: fstest.MapFS{
	"0001_things.sql": {Data: []byte("-- +goose Up\nCREATE TABLE things (id TEXT PRIMARY KEY);\n-- +goose Down\nDROP TABLE things;\n")},
}}

// TestEachGivesFreshDatabases: Each runs its function on SQLite and on PostgreSQL, and every
// database it (or SQLite, or Postgres) hands out is new: migrated, and empty of what another
// test wrote.
func TestEachGivesFreshDatabases(t *testing.T) {
	ctx := context.Background()
	var dialects []store.Dialect
	for range 2 {
		storetest.Each(t, []store.Module{demo}, func(t *testing.T, db *store.DB) {
			dialects = append(dialects, db.Dialect())
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM things`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("a fresh database holds %d things, %v", n, err)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO things (id) VALUES ('left behind')`); err != nil {
				t.Fatal(err)
			}
		})
	}
	if len(dialects) == 4 && (dialects[0] != store.SQLite || dialects[1] != store.Postgres) {
		t.Errorf("Each ran on %v, want sqlite then postgres", dialects)
	}
	a, b := storetest.PostgresURL(t), storetest.PostgresURL(t)
	if a == b {
		t.Errorf("PostgresURL gave the same database twice: %s", a)
	}
}
