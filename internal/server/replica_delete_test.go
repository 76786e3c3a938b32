package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// TestDeleteWinsOnEveryReplica: two servers on one PostgreSQL, both holding a node in memory.
// It is deleted through b; a, which has not read the deletion yet, takes a report that changes
// the node's registration and flushes it. The deletion still wins: once both have read each
// other's writes, neither serves the node and the database holds no row of it. The node then
// joins again (a new join token, through a) and is back on both.
func TestDeleteWinsOnEveryReplica(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	a, _ := replica(t, dsn, "")
	b, _ := replica(t, dsn, a.dir)
	a.srv.sys.NodeStore.Announce(context.Background()) // a learns of b now, not at its next announcement
	a.makePool("fra-cubes")
	b.srv.sys.Nodes.RefreshPools(context.Background())
	const id = "127.0.0.1"
	cred := a.joinAgent("fra-cubes", id)
	report(t, a.srv.InternalURL(), id, cred)
	report(t, b.srv.InternalURL(), id, cred)
	get := func(e *testEnv) error { return e.call(e.admin, "nodes.get", map[string]any{"nodeId": id}, nil) }
	testkit.WaitFor(t, 10*time.Second, "b to serve the node", func() bool { return get(b) == nil })
	count := func(query string) int {
		var n int
		if err := a.db.QueryRowContext(context.Background(), query, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	b.must(b.admin, "nodes.cordon", map[string]any{"nodeId": id}, nil)
	b.must(b.admin, "nodes.delete", map[string]any{"nodeId": id, "force": true}, nil)
	testkit.WaitFor(t, 10*time.Second, "b to write the deletion", func() bool {
		return count(`SELECT count(*) FROM nodes_deleted WHERE node_id = $1`) > 0
	})
	// a still holds the node (it reads b's writes once a second): a report that changes its
	// quota queues its registration, which a writes now.
	var body map[string]any
	if err := json.Unmarshal(statusBody(t), &body); err != nil {
		t.Fatal(err)
	}
	body["quota"] = map[string]any{"milli_cpu": 32000, "mem_mb": 80000, "max_mvm_num": 100, "create_concurrent_num": 4}
	raw, _ := json.Marshal(body)
	if code, _, out := nodeCall(t, "POST", a.srv.InternalURL()+nodeapi.StatusPath(id), cred, raw); code != 200 {
		t.Logf("a read the deletion before the report (%d %s): the write-back was not exercised", code, out)
	}
	if err := a.srv.sys.NodeStore.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // both replicas read the other's writes (every second) and flush
	for name, e := range map[string]*testEnv{"a": a, "b": b} {
		if err := get(e); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("nodes.get on %s after the deletion: %v, want NOT_FOUND", name, err)
		}
	}
	if n := count(`SELECT count(*) FROM nodes_registrations WHERE node_id = $1`); n != 0 {
		t.Errorf("%d registration rows of the deleted node", n)
	}

	// A node that really registers again comes back, on both replicas.
	cred = a.joinAgent("fra-cubes", id)
	report(t, a.srv.InternalURL(), id, cred)
	testkit.WaitFor(t, 10*time.Second, "both replicas to serve the node joined again", func() bool { return get(a) == nil && get(b) == nil })
	report(t, b.srv.InternalURL(), id, cred)
	if n := count(`SELECT count(*) FROM nodes_registrations WHERE node_id = $1`); n != 1 {
		t.Errorf("%d registration rows of the node joined again, want 1", n)
	}
}
