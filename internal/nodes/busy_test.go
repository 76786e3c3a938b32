package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/store"
)

// TestRegisterWhileDatabaseHeld holds the database the way a long fleet apply does (SQLite:
// an open write transaction, which excludes every other writer; PostgreSQL: a transaction
// holding the registrations table against writers) and checks that registrations (stock,
// join, re-register with a credential) and reports still answer 200 within a second, from
// memory, and that everything is written once the database is free.
func TestRegisterWhileDatabaseHeld(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		client := &http.Client{Timeout: 5 * time.Second}
		join := e.joinToken(JoinTokenInput{AnyIP: true})
		// A node that joined before: it re-registers with its credential during the hold.
		early := e.joinToken(JoinTokenInput{AnyIP: true})
		_, body := e.call(client, "POST", registerPath, early, withNode(t, "10.3.0.100"))
		var joined struct {
			Credential string `json:"node_credential"`
		}
		json.Unmarshal(body, &joined)
		e.flush()

		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.db.Dialect() == store.Postgres {
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
			code, out := e.call(client, "POST", path, token, body)
			if d := time.Since(start); code != 200 || d >= time.Second {
				t.Errorf("%s while the database is held: %d in %s, want 200 within 1s", what, code, d)
			}
			return out
		}
		var wg sync.WaitGroup
		for i := range 4 {
			id := fmt.Sprintf("10.3.0.%d", i+1)
			wg.Go(func() {
				timed("stock register "+id, "", registerPath, withNode(t, id))
				timed("stock status "+id, "", statusPath(id), testdata(t, "status.json"))
			})
		}
		wg.Go(func() {
			out := timed("join", join, registerPath, withNode(t, "10.3.0.50"))
			var fresh struct {
				Credential string `json:"node_credential"`
			}
			json.Unmarshal(out, &fresh)
			timed("status with the fresh credential", fresh.Credential, statusPath("10.3.0.50"), testdata(t, "status.json"))
		})
		wg.Go(func() {
			timed("re-register with a credential", joined.Credential, registerPath, withNode(t, "10.3.0.100"))
		})
		wg.Wait()
		if time.Since(held) > 3*time.Second {
			t.Fatalf("the calls took longer than the hold; the test proves nothing")
		}
		<-released
		deadline := time.Now().Add(15 * time.Second)
		for {
			n := e.count(`SELECT count(*) FROM nodes_registrations`)
			s := e.count(`SELECT count(*) FROM nodes_status`)
			if n == 6 && s == 6 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the hold: %d registrations, %d statuses written, want 6 and 6", n, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := e.count(`SELECT count(*) FROM nodes_join_tokens WHERE uses_left = 0`); n != 2 {
			t.Errorf("%d used-up join tokens, want 2", n)
		}
	})
}
