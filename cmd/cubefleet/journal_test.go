package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/store"
)

// TestRegistrationSurvivesCrash holds the database the way a long fleet apply does, registers a
// node with a join token and a stock Cubelet while it is held (both answered while it is still
// held: from the journal; the hold ends only after the crash), SIGKILLs the server before it
// could write them, and starts it again: both nodes are there, Unknown until they report, the
// joined node's credential works, and its join token is spent.
func TestRegistrationSurvivesCrash(t *testing.T) {
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			database := dsn(t)
			dataDir := filepath.Join(t.TempDir(), "data")
			c := startServerIn(t, dataDir, database, "", "--node-agent-allow-unauthenticated", "127.0.0.0/8")
			doc := filepath.Join(t.TempDir(), "fleet.json")
			writeFile(t, doc, `{"version": 1, "sites": [{"name": "lab", "kind": "shared", "region": "eu-central"}],
				"pools": [{"name": "cubes", "site": "lab", "class": "vps-host"}]}`, 0o644)
			c.ok("fleet", "apply", doc, "--tenant", "root", "--yes")
			token := strings.TrimSpace(c.ok("nodes", "join-token", "create", "--pool", "cubes", "--ip", "127.0.0.1"))

			release := holdDatabase(t, c.dataDir, database)
			joined := registerBody(t, "127.0.0.1")
			code, body := post(t, c.url+nodeapi.PathRegister, token, joined)
			if code != 200 {
				t.Fatalf("join while the database is held: %d %s", code, body)
			}
			var reply nodeapi.RegisterResponse
			if err := json.Unmarshal(body, &reply); err != nil || reply.NodeCredential == "" {
				t.Fatalf("join answered without a credential: %s", body)
			}
			if code, body = post(t, c.url+nodeapi.PathRegister, "", registerBody(t, "10.9.0.2")); code != 200 {
				t.Fatalf("stock register while the database is held: %d %s", code, body)
			}
			if fi, err := os.Stat(filepath.Join(c.dataDir, "nodes-journal.jsonl")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("journal: %v (mode %v), want a 0600 file", err, fi)
			}
			c.crash()
			release()

			// A long heartbeat timeout: the nodes stay Unknown until they report, however long
			// the checks below take.
			c = startServerIn(t, dataDir, database, "", "--node-agent-allow-unauthenticated", "127.0.0.0/8",
				"--node-heartbeat-timeout", "10m", "--node-lost-after", "1h")
			for _, id := range []string{"127.0.0.1", "10.9.0.2"} {
				c.ok("nodes", "get", id)
				if out := c.ok("nodes", "events", id, "--type", "node.joined"); strings.Count(out, "node.joined") != 1 {
					t.Errorf("node.joined events of %s after the replay:\n%s", id, out)
				}
			}
			if out := c.ok("nodes", "list", "--state", "unknown"); !strings.Contains(out, "127.0.0.1") || !strings.Contains(out, "no report since start") {
				t.Errorf("nodes that have not reported since the restart:\n%s", out)
			}
			if code, body := post(t, c.url+nodeapi.StatusPath("127.0.0.1"), reply.NodeCredential, statusBody(t)); code != 200 {
				t.Errorf("status with the credential issued before the crash: %d %s", code, body)
			}
			if out := c.ok("nodes", "get", "127.0.0.1"); !strings.Contains(out, "State:          Ready") {
				t.Errorf("the node after its first report since the restart:\n%s", out)
			}
			if code, body := post(t, c.url+nodeapi.PathRegister, token, registerBody(t, "10.9.0.3")); code != 401 {
				t.Errorf("the journaled join's token was used again: %d %s", code, body)
			}
			if _, err := os.Stat(filepath.Join(c.dataDir, "nodes-journal.jsonl")); !os.IsNotExist(err) {
				t.Errorf("the journal is still there after the replay: %v", err)
			}
		})
	}
}

// holdDatabase holds the database against the registry's writes the way a long fleet apply
// does (SQLite: an open write transaction; PostgreSQL: the node tables locked) until release.
func holdDatabase(t *testing.T, dataDir, database string) (release func()) {
	t.Helper()
	ctx := context.Background()
	if database == "" {
		database = filepath.Join(dataDir, "cubefleet.db")
	}
	db, err := store.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if db.Dialect() == store.Postgres {
		_, err = tx.ExecContext(ctx, `LOCK TABLE nodes_registrations, nodes_status, nodes_join_tokens IN EXCLUSIVE MODE`)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO events_log (id, at, tenant_id, type, subject, data) VALUES ('evt_hold', 0, 'root', 'test.hold', '', '{}')`)
	}
	if err != nil {
		t.Fatal(err)
	}
	var done bool
	release = func() {
		if !done {
			done = true
			tx.Rollback()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// post sends body to url with an optional bearer token; it returns the status and the body.
func post(t *testing.T, url, token string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// registerBody is the stock Cubelet register payload of internal/nodes/nodetest/testdata for node id.
func registerBody(t *testing.T, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "nodes", "nodetest", "testdata", "register.json"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte("10.0.0.7"), []byte(id))
}

// statusBody is the stock Cubelet status payload of internal/nodes/nodetest/testdata.
func statusBody(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "nodes", "nodetest", "testdata", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
