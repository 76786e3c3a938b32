package nodestore_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodestore"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// TestJournalReplay writes a journal by hand (as a crash leaves it) and restarts the registry:
// the replay writes what the database lacks and nothing else, spends join tokens, records the
// joined events, skips a torn last line, replays an older server's shorter rows (the columns
// added since empty) and empties the journal.
func TestJournalReplay(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		// A node the database holds, newer than its journaled registration.
		if code, body := e.Do("POST", nodeapi.PathRegister, "", nodetest.WithNode("10.5.0.1")); code != 200 {
			t.Fatalf("register: %d %s", code, body)
		}
		e.Flush()
		var written int64
		if err := e.DB.QueryRow(`SELECT updated_at FROM nodes_registrations WHERE node_id = '10.5.0.1'`).Scan(&written); err != nil {
			t.Fatal(err)
		}
		// A node deleted after its journaled registration.
		if _, err := e.DB.Exec(`INSERT INTO nodes_deleted (node_id, at, writer) VALUES ('10.5.0.5', $1, 'test')`, written+10); err != nil {
			t.Fatal(err)
		}
		tokenID := func() string {
			tok, _, err := e.Store.CreateJoinToken(ctx, e.DB, nodes.JoinTokenInput{Pool: nodetest.Pool.Name, AnyIP: true}, "test")
			if err != nil {
				t.Fatal(err)
			}
			return tok.ID
		}
		fresh, spent := tokenID(), tokenID()
		if _, err := e.DB.Exec(`UPDATE nodes_join_tokens SET uses_left = 0 WHERE id = $1`, spent); err != nil {
			t.Fatal(err)
		}

		row := func(id, ip string, at int64) []any {
			return nodestore.JournalRow(nodes.Registration{NodeID: id, HostIP: ip, Agent: nodes.AgentCubelet, RegisteredAt: at, UpdatedAt: at, State: nodes.StateReady}, "crashed")
		}
		if err := nodestore.AppendJournal(e.Cfg.Store.JournalPath, []nodestore.JournalRecord{
			{Row: row("10.5.0.1", "10.5.9.9", written-1)},                                                // older than the database's
			{Row: row("10.5.0.2", "10.5.0.2", written)},                                                  // new: written
			{Row: row("10.5.0.3", "10.5.0.3", written), Join: &nodestore.JournalJoin{fresh, "10.5.0.3"}}, // a join: written, token spent
			{Row: row("10.5.0.4", "10.5.0.4", written), Join: &nodestore.JournalJoin{spent, "10.5.0.4"}}, // token spent elsewhere: dropped
			{Row: row("10.5.0.5", "10.5.0.5", written)},                                                  // deleted since: dropped
			{Row: row("10.5.0.7", "10.5.0.7", written)[:nodestore.MinJournalCols+4]},                     // an older server's row (no cordon_by): written
		}...); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(e.Cfg.Store.JournalPath, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`{"row":["10.5.0.6","10.5`) // torn: the crash came mid-append
		f.Close()

		e = e.Restart()
		var ip string
		if err := e.DB.QueryRow(`SELECT host_ip FROM nodes_registrations WHERE node_id = '10.5.0.1'`).Scan(&ip); err != nil || ip != "10.5.0.1" {
			t.Errorf("10.5.0.1: host_ip %q (%v): an older journaled registration overwrote a newer one", ip, err)
		}
		for id, want := range map[string]int{"10.5.0.2": 1, "10.5.0.3": 1, "10.5.0.4": 0, "10.5.0.5": 0, "10.5.0.6": 0, "10.5.0.7": 1} {
			if n := e.Count(`SELECT count(*) FROM nodes_registrations WHERE node_id = $1`, id); n != want {
				t.Errorf("%s: %d registrations after the replay, want %d", id, n, want)
			}
		}
		if n := e.Count(`SELECT count(*) FROM nodes_registrations WHERE writer = 'crashed'`); n != 0 {
			t.Errorf("%d replayed rows name the crashed replica as their writer", n)
		}
		if n := e.Count(`SELECT uses_left FROM nodes_join_tokens WHERE id = $1`, fresh); n != 0 {
			t.Errorf("the journaled join's token has %d uses left, want 0", n)
		}
		for _, id := range []string{"10.5.0.2", "10.5.0.3", "10.5.0.7"} {
			if got := e.EventTypes(id); !slices.Equal(got, []string{nodes.EventJoined}) {
				t.Errorf("%s: events %v, want [%s]", id, got, nodes.EventJoined)
			}
		}
		if _, err := os.Stat(e.Cfg.Store.JournalPath); !os.IsNotExist(err) {
			t.Errorf("the journal is still there after the replay: %v", err)
		}
		if _, err := e.Reg.Get(ctx, "10.5.0.2"); err != nil {
			t.Errorf("a replayed node is not in the registry: %v", err)
		}
	})
}
