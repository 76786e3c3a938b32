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

// holdAtMost bounds how long TestRegisterWhileDatabaseHeld holds the database: a call that
// answers only after it waited for the database answers after the hold.
const holdAtMost = time.Minute

// TestRegisterWhileDatabaseHeld holds the database the way a long fleet apply does (SQLite:
// an open write transaction, which excludes every other writer; PostgreSQL: a transaction
// holding the registrations table against writers) and checks that registrations (stock,
// join, re-register with a credential) and reports are answered 200 while the database is
// still held (from memory and the journal, not once the hold ends), and that everything is
// written once the database is free. The hold lasts until every call answered, or a minute:
// far longer than any call takes unless it waits for the database.
func TestRegisterWhileDatabaseHeld(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		client := &http.Client{Timeout: 2 * holdAtMost}
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
		answered := make(chan struct{}) // closed once every call below answered
		released := make(chan struct{}) // closed as the hold ends
		go func() {
			select {
			case <-answered:
			case <-time.After(holdAtMost):
			}
			close(released) // before the hold ends: an answer that waited for it sees this
			tx.Rollback()
		}()
		whileHeld := func(what string, token string, path string, body []byte) []byte {
			code, out := e.Call(client, "POST", path, token, body)
			select {
			case <-released:
				t.Errorf("%s: answered %d only once the database was free, want 200 while it is held", what, code)
			default:
				if code != 200 {
					t.Errorf("%s while the database is held: %d %s, want 200", what, code, out)
				}
			}
			return out
		}
		var wg sync.WaitGroup
		for i := range 4 {
			id := fmt.Sprintf("10.3.0.%d", i+1)
			wg.Go(func() {
				whileHeld("stock register "+id, "", nodeapi.PathRegister, nodetest.WithNode(id))
				whileHeld("stock status "+id, "", nodeapi.StatusPath(id), nodetest.Status())
			})
		}
		wg.Go(func() {
			out := whileHeld("join", join, nodeapi.PathRegister, nodetest.WithNode("10.3.0.50"))
			var fresh nodeapi.RegisterResponse
			json.Unmarshal(out, &fresh)
			whileHeld("status with the fresh credential", fresh.NodeCredential, nodeapi.StatusPath("10.3.0.50"), nodetest.Status())
		})
		wg.Go(func() {
			whileHeld("re-register with a credential", joined.NodeCredential, nodeapi.PathRegister, nodetest.WithNode("10.3.0.100"))
		})
		wg.Wait()
		close(answered)
		<-released
		testkit.WaitFor(t, 15*time.Second, "6 registrations and 6 statuses written after the hold", func() bool {
			return e.Count(`SELECT count(*) FROM nodes_registrations`) == 6 && e.Count(`SELECT count(*) FROM nodes_status`) == 6
		})
		if n := e.Count(`SELECT count(*) FROM nodes_join_tokens WHERE uses_left = 0`); n != 2 {
			t.Errorf("%d used-up join tokens, want 2", n)
		}
	})
}
