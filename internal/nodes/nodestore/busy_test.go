package nodestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestRegisterWhileDatabaseHeld holds the database the way a long fleet apply does (SQLite:
// an open write transaction, which excludes every other writer; PostgreSQL: a transaction
// holding the registrations table against writers) and checks that registrations (stock,
// join, re-register with a credential) and reports still answer 200 within a second, from
// memory, and that everything is written once the database is free.
func TestRegisterWhileDatabaseHeld(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		client := &http.Client{Timeout: 5 * time.Second}
		join := e.JoinToken(nodes.JoinTokenInput{AnyIP: true})
		// A node that joined before: it re-registers with its credential during the hold.
		early := e.JoinToken(nodes.JoinTokenInput{AnyIP: true})
		_, body := e.Call(client, "POST", nodeapi.PathRegister, early, nodetest.WithNode("10.3.0.100"))
		var joined nodeapi.RegisterResponse
		json.Unmarshal(body, &joined)
		e.Flush()

		tx, err := e.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.DB.Dialect() == store.Postgres {
			_, err = tx.ExecContext(ctx, `LOCK TABLE nodes_registrations, nodes_status, nodes_join_tokens IN EXCLUSIVE MODE`)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO events_log (id, at, tenant_id, type, subject, data) VALUES ('evt_hold', 0, 'root', 'test.hold', '', '{}')`)
		}
		if err != nil {
			t.Fatal(err)
		}
		held := time.Now()
		released := make(chan struct{})
		go func() {
			time.Sleep(3 * time.Second)
			tx.Rollback()
			close(released)
		}()
		timed := func(what string, token string, path string, body []byte) []byte {
			start := time.Now()
			code, out := e.Call(client, "POST", path, token, body)
			if d := time.Since(start); code != 200 || d >= time.Second {
				t.Errorf("%s while the database is held: %d in %s, want 200 within 1s", what, code, d)
			}
			return out
		}
		var wg sync.WaitGroup
		for i := range 4 {
			id := fmt.Sprintf("10.3.0.%d", i+1)
			wg.Go(func() {
				timed("stock register "+id, "", nodeapi.PathRegister, nodetest.WithNode(id))
				timed("stock status "+id, "", nodeapi.StatusPath(id), nodetest.Status())
			})
		}
		wg.Go(func() {
			out := timed("join", join, nodeapi.PathRegister, nodetest.WithNode("10.3.0.50"))
			var fresh nodeapi.RegisterResponse
			json.Unmarshal(out, &fresh)
			timed("status with the fresh credential", fresh.NodeCredential, nodeapi.StatusPath("10.3.0.50"), nodetest.Status())
		})
		wg.Go(func() {
			timed("re-register with a credential", joined.NodeCredential, nodeapi.PathRegister, nodetest.WithNode("10.3.0.100"))
		})
		wg.Wait()
		if time.Since(held) > 3*time.Second {
			t.Fatalf("the calls took longer than the hold; the test proves nothing")
		}
		<-released
		testkit.WaitFor(t, 15*time.Second, "6 registrations and 6 statuses written after the hold", func() bool {
			return e.Count(`SELECT count(*) FROM nodes_registrations`) == 6 && e.Count(`SELECT count(*) FROM nodes_status`) == 6
		})
		if n := e.Count(`SELECT count(*) FROM nodes_join_tokens WHERE uses_left = 0`); n != 2 {
			t.Errorf("%d used-up join tokens, want 2", n)
		}
	})
}
