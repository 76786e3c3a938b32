package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/controlplane"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/privatefile"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// statusBody is the golden status report (64 cores quota, 3.5 used, 4 sandboxes).
func statusBody(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// joinAgent joins node id (an address on 127.0.0.0/8) to pool with a join token and returns
// its node credential.
func (e *testEnv) joinAgent(pool, id string) string {
	e.t.Helper()
	var jt contract.JoinTokenCreated
	e.must(e.admin, "nodes.joinTokens.create", map[string]any{"pool": pool, "ip": id}, &jt)
	code, _, out := nodeCall(e.t, "POST", e.srv.InternalURL()+nodeapi.PathRegister, jt.Token, registerBody(e.t, id, "ignored"))
	if code != 200 {
		e.t.Fatalf("join %s: %d %s", id, code, out)
	}
	var joined nodeapi.RegisterResponse
	json.Unmarshal(out, &joined)
	return joined.NodeCredential
}

// report sends the golden status of node id to base.
func report(t *testing.T, base, id, cred string) {
	t.Helper()
	if code, _, out := nodeCall(t, "POST", base+nodeapi.StatusPath(id), cred, statusBody(t)); code != 200 {
		t.Fatalf("status %s: %d %s", id, code, out)
	}
}

// TestPlacementFromTheRegistry: the scheduler places on a joined agent that reported, never on
// a stock Cubelet of the same pool nor on a cordoned node; nodes.get shows the reservation.
func TestPlacementFromTheRegistry(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, allowLoopback)
		testkit.WaitFor(t, 10*time.Second, "the scheduler lease", e.srv.sys.Lane.Holding)
		pool := e.makePool("fra-cubes")
		cred := e.joinAgent("fra-cubes", "127.0.0.1")
		if code, _, out := nodeCall(t, "POST", e.srv.InternalURL()+nodeapi.PathRegister, "", registerBody(t, "10.0.0.7", "fra-cubes")); code != 200 {
			t.Fatalf("stock Cubelet: %d %s", code, out)
		}
		report(t, e.srv.InternalURL(), "10.0.0.7", "")
		place := func(id string) (contract.PlaceOutput, error) {
			var out contract.PlaceOutput
			err := e.call(e.admin, "scheduler.place", map[string]any{"sandboxId": id, "pool": pool, "cpu": 10000, "memoryMiB": 2048}, &out)
			return out, err
		}
		if _, err := place("sbx_early"); !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) || !strings.Contains(err.Error(), "1 registry-only (stock Cubelet)") || !strings.Contains(err.Error(), "1 not ready") {
			t.Fatalf("before the agent's first report: %v", err)
		}
		report(t, e.srv.InternalURL(), "127.0.0.1", cred)
		// 64,000 millicores of quota, 3,500 reported in use: six sandboxes of 10,000 fit.
		for i := range 6 {
			out, err := place("sbx_" + string(rune('a'+i)))
			if err != nil || out.NodeID != "127.0.0.1" {
				t.Fatalf("placement %d: %+v %v", i, out, err)
			}
		}
		_, err := place("sbx_g")
		if !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) || !strings.Contains(err.Error(), "2 nodes: 1 registry-only (stock Cubelet), 1 insufficient cpu") {
			t.Fatalf("the seventh: %v", err)
		}
		var got contract.NodeOutput
		e.must(e.admin, "nodes.get", map[string]any{"nodeId": "127.0.0.1"}, &got)
		if got.Room == nil || got.Room.Reserved.CPU != 60000 || got.Room.Reservations != 6 || got.Room.Remaining.CPU != 500 || got.Room.Reported.CPU != 3500 {
			t.Errorf("nodes.get room: %+v", got.Room)
		}
		// nodes.list and the console's Nodes page show the reservations too.
		var list contract.NodeList
		e.must(e.admin, "nodes.list", map[string]any{}, &list)
		if r := list.Rooms["127.0.0.1"]; r == nil || r.Reservations != 6 || r.Reserved.CPU != 60000 {
			t.Errorf("nodes.list rooms: %+v", list.Rooms)
		}
		rows, err := e.srv.sys.ConsoleNodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			if want := map[string]string{"127.0.0.1": "6 sandboxes: 60 cores, 12.0Gi", "10.0.0.7": "-"}[row.ID]; row.Reserved != want {
				t.Errorf("console node %s reserved %q, want %q", row.ID, row.Reserved, want)
			}
		}
		var st contract.SchedulerStatus
		e.must(e.admin, "scheduler.status", map[string]any{}, &st)
		if len(st.Reservations) != 6 || st.Reservations[0].PoolName != "fra-cubes" || st.Reservations[0].Pool != pool || st.Reservations[0].ReservedAt == 0 || st.Now < st.Reservations[0].ReservedAt {
			t.Errorf("scheduler.status reservations: %+v", st.Reservations)
		}
		var rel contract.ReleaseOutput
		e.must(e.admin, "scheduler.release", map[string]any{"sandboxId": "sbx_a"}, &rel)
		if !rel.Released {
			t.Error("sbx_a held no reservation")
		}
		if _, err := place("sbx_g"); err != nil {
			t.Errorf("after a release: %v", err)
		}
		if _, err := e.srv.sys.Nodes.Cordon(context.Background(), "127.0.0.1", "disk", "svc_test"); err != nil {
			t.Fatal(err)
		}
		e.must(e.admin, "scheduler.release", map[string]any{"sandboxId": "sbx_b"}, &rel)
		if _, err := place("sbx_h"); err == nil || !strings.Contains(err.Error(), "1 cordoned") {
			t.Errorf("a cordoned node: %v", err)
		}
	})
}

// TestCubeMasterSurface: CubeMaster's health route and node listing answer in its `ret`
// envelope on the internal listener and on --cubemaster-listen, beside the legacy node-agent
// routes under the same /internal/meta prefix; the one-click quickcheck's control-plane checks
// pass as its script runs them.
func TestCubeMasterSurface(t *testing.T) {
	e := mustStart(t, storetest.SQLite(t), func(c *Config) {
		allowLoopback(c)
		c.InternalListen, c.CubeMasterListen = "127.0.0.1:0", "127.0.0.1:0"
	})
	ops := strings.TrimPrefix(e.srv.InternalURL(), "http://")
	master := strings.TrimPrefix(e.srv.CubeMasterURL(), "http://")
	script := filepath.Join("testdata", "quickcheck-control-plane.sh")
	run := func(budget string) (int, string) {
		cmd := exec.Command("bash", script, master, ops, "127.0.0.1")
		cmd.Env = append(os.Environ(), "CUBE_QUICKCHECK_READY_TIMEOUT="+budget)
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run("0"); code != 1 || !strings.Contains(out, "ok: CubeMaster health") || !strings.Contains(out, "FAIL: node 127.0.0.1") {
		t.Fatalf("before the node registers: exit %d\n%s", code, out)
	}
	// A stock Cubelet of the oldest kind registers under CubeMaster's prefix.
	for _, base := range []string{e.srv.CubeMasterURL(), e.srv.InternalURL()} {
		if code, _, out := nodeCall(t, "GET", base+nodeapi.MetaAgentPrefix+nodeapi.RouteReadyz, "", nil); code != 200 || string(out) != `{"ret":{"ret_code":200,"ret_msg":"ok"}}` {
			t.Fatalf("legacy readyz on %s: %d %s", base, code, out)
		}
	}
	if code, _, out := nodeCall(t, "POST", e.srv.CubeMasterURL()+nodeapi.MetaAgentPrefix+nodeapi.RouteRegister, "", registerBody(t, "127.0.0.1", "default-cluster")); code != 200 {
		t.Fatalf("legacy register: %d %s", code, out)
	}
	report(t, e.srv.InternalURL(), "127.0.0.1", "")
	if code, out := run("10"); code != 0 {
		t.Fatalf("quickcheck: exit %d\n%s", code, out)
	}
	for _, base := range []string{e.srv.CubeMasterURL(), e.srv.InternalURL()} {
		code, _, out := nodeCall(t, "GET", base+nodeapi.MetaNodesPath, "", nil)
		var list nodeapi.MetaNodes
		if err := json.Unmarshal(out, &list); err != nil || code != 200 || *list.Ret.RetCode != 200 || len(list.Data) != 1 || list.Data[0].HostIP != "127.0.0.1" || !list.Data[0].Healthy {
			t.Fatalf("GET %s%s: %d %v %s", base, nodeapi.MetaNodesPath, code, err, out)
		}
		if !strings.Contains(string(out), `"host_ip":"127.0.0.1"`) || !strings.HasPrefix(string(out), `{"ret":{"ret_code":200,"ret_msg":"ok"},"data":[{"node_id":"127.0.0.1"`) {
			t.Errorf("not CubeMaster's compact snake_case shape: %.200s", out)
		}
		code, _, out = nodeCall(t, "GET", base+nodeapi.MetaNodesPath+"/127.0.0.1", "", nil)
		var one nodeapi.MetaNode
		if err := json.Unmarshal(out, &one); err != nil || code != 200 || one.Data.NodeID != "127.0.0.1" {
			t.Errorf("one node: %d %v %s", code, err, out)
		}
		code, _, out = nodeCall(t, "GET", base+nodeapi.MetaNodesPath+"/10.9.9.9", "", nil)
		if code != 404 || !strings.HasPrefix(string(out), `{"ret":{"ret_code":404,`) {
			t.Errorf("unknown node: %d %s", code, out)
		}
	}
	// The API listener serves none of it while --internal-listen is set.
	if code, _, _ := nodeCall(t, "GET", e.url+nodeapi.CubeMasterHealthPath, "", nil); code != 404 {
		t.Errorf("/notify/health on the API listener: %d", code)
	}
}

// replica starts a server on the PostgreSQL database dsn, serving until stop is called or the
// test ends. With template "" it is the first replica (--dev: it bootstraps the database);
// otherwise its data dir gets template's secrets key and admin key (another replica of the
// same control plane).
func replica(t *testing.T, dsn, template string) (e *testEnv, stop func()) {
	t.Helper()
	dir := t.TempDir()
	copies := []string{controlplane.SecretsKeyFile, controlplane.AdminTokenFile}
	if template == "" {
		copies = nil
	}
	for _, f := range copies {
		b, err := os.ReadFile(filepath.Join(template, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logBuf := &testkit.SyncBuffer{}
	cfg := Config{Listen: "127.0.0.1:0", DataDir: dir, Database: dsn, Dev: template == ""}
	allowLoopback(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, slog.New(slog.NewJSONHandler(logBuf, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	token, err := privatefile.Read(filepath.Join(dir, controlplane.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, srv: srv, url: srv.URL(), db: srv.db, log: logBuf, admin: strings.TrimSpace(string(token)), dir: dir}, stop
}

// TestLeaseFailoverKeepsReservations: two servers on one PostgreSQL. Placements through either
// are decided by the lease holder; when it stops, the other takes the lease over with every
// reservation, so the node is never overbooked.
func TestLeaseFailoverKeepsReservations(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	a, stopA := replica(t, dsn, "")
	testkit.WaitFor(t, 10*time.Second, "a to take the scheduler lease", a.srv.sys.Lane.Holding)
	b, _ := replica(t, dsn, a.dir)
	pool := a.makePool("fra-cubes")
	b.srv.sys.Nodes.RefreshPools(context.Background())
	cred := a.joinAgent("fra-cubes", "127.0.0.1")
	report(t, a.srv.InternalURL(), "127.0.0.1", cred) // a node's reports land on any replica
	report(t, b.srv.InternalURL(), "127.0.0.1", cred)
	place := func(e *testEnv, id string) error {
		var out contract.PlaceOutput
		return e.call(e.admin, "scheduler.place", map[string]any{"sandboxId": id, "pool": pool, "cpu": 10000, "memoryMiB": 2048}, &out)
	}
	for i, e := range []*testEnv{a, b, a, b} {
		if err := place(e, "sbx_"+string(rune('a'+i))); err != nil {
			t.Fatalf("placement %d: %v", i, err)
		}
	}
	if b.srv.sys.Lane.Holding() {
		t.Fatal("two replicas hold the scheduler lease")
	}
	stopA()
	testkit.WaitFor(t, 10*time.Second, "b to take the lease over", b.srv.sys.Lane.Holding)
	report(t, b.srv.InternalURL(), "127.0.0.1", cred)
	for _, id := range []string{"sbx_e", "sbx_f"} {
		if err := place(b, id); err != nil {
			t.Fatalf("%s after the failover: %v", id, err)
		}
	}
	if err := place(b, "sbx_g"); !cubefleet.IsCode(err, cubefleet.CodeResourceExhausted) || !strings.Contains(err.Error(), "insufficient cpu") {
		t.Fatalf("the seventh sandbox after the failover: %v (the failover lost reservations)", err)
	}
	var st contract.SchedulerStatus
	b.must(b.admin, "scheduler.status", map[string]any{}, &st)
	if !st.LeaseHolder || len(st.Reservations) != 6 {
		t.Errorf("status: holder %v, %d reservations", st.LeaseHolder, len(st.Reservations))
	}
}
