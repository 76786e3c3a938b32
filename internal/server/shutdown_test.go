package server

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestShutdownOrder stops a real server on a database it opened itself (SQLite and
// PostgreSQL) and checks, at each step of the control plane's shutdown, what must already be
// true: after the front the listener refuses connections while the database still answers;
// after the loops the scheduler and the sandboxes have handed their leases over while the
// database was open, and the registry still holds its health lease until it stops; only the
// last step closes the database. A listener that closed after the store, or a loop that ran on
// after it, fails here, as does a log line about a closed database.
func TestShutdownOrder(t *testing.T) {
	databases := map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(t *testing.T, dir string) string { return filepath.Join(dir, "cubefleet.db") },
		"postgres": func(t *testing.T, _ string) string { return storetest.PostgresURL(t) },
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			logBuf := &testkit.SyncBuffer{}
			log := slog.New(slog.NewJSONHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg := Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), Database: databases[name](t, dir), Dev: true}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv, err := New(ctx, cfg, log)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			db, addr := srv.db, srv.Addr().String()
			// held reports whether lease name is held (it expires in the future).
			held := func(name string) bool {
				var n int
				if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM store_leases WHERE name = $1 AND expires_at > $2`, name, time.Now().UnixMilli()).Scan(&n); err != nil {
					t.Errorf("read lease %s: %v", name, err)
				}
				return n > 0
			}
			loopLeases := []string{lane.LeaseName, sandboxes.LeaseName} // given up as the loops stop
			const registryLease = "nodes.health"                        // given up as the registry stops
			var mu sync.Mutex
			var stages []controlplane.Stage
			srv.hooks.stopped = func(st controlplane.Stage) {
				mu.Lock()
				stages = append(stages, st)
				mu.Unlock()
				pingErr := db.PingContext(context.Background())
				if st == controlplane.StageDatabase {
					if pingErr == nil {
						t.Errorf("after %s: the database still answers", st)
					}
					return
				}
				if pingErr != nil {
					t.Errorf("after %s: the database is already closed: %v", st, pingErr)
					return
				}
				if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					conn.Close()
					t.Errorf("after %s: the listener %s still accepts connections", st, addr)
				}
				for _, name := range loopLeases {
					if want := st == controlplane.StageFront; held(name) != want {
						t.Errorf("after %s: lease %s held = %v, want %v", st, name, !want, want)
					}
				}
				if want := st != controlplane.StageNodes; held(registryLease) != want {
					t.Errorf("after %s: lease %s held = %v, want %v", st, registryLease, !want, want)
				}
			}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx) }()
			testkit.WaitFor(t, 20*time.Second, "the loops and the registry to take their leases", func() bool {
				return held(lane.LeaseName) && held(sandboxes.LeaseName) && held(registryLease)
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			want := []controlplane.Stage{controlplane.StageFront, controlplane.StageLoops, controlplane.StageNodeRoutes, controlplane.StageNodes, controlplane.StageDatabase}
			if !slices.Equal(stages, want) {
				t.Errorf("shutdown steps %q, want %q", stages, want)
			}
			if out := logBuf.String(); strings.Contains(out, "database is closed") || !strings.Contains(out, `"msg":"stopped"`) {
				t.Errorf("the log of the shutdown:\n%s", out)
			}
		})
	}
}
