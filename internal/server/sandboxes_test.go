package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/client"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/sandboxes/sandboxtest"
	"github.com/cubefleet/cubefleet/internal/testkit"
)

// sandboxFleet makes a pool of root (owner quota: keeps `keep` sandboxes), offered to acme and
// globex with offers, a flavor, a template "py" for each of root, acme and globex, and joins
// the nodes ids with slots microVM slots each, as agents that run sandboxes until stopped.
func sandboxFleet(t *testing.T, e *testEnv, keep int64, offers map[string]map[string]any, slots int64, ids ...string) (string, []*sandboxtest.Agent) {
	t.Helper()
	var site, pool, flavor obj
	e.must(e.admin, "compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}, &site)
	e.must(e.admin, "compute.pools.create", map[string]any{"tenantId": "root", "siteId": site.id(), "class": "vps-host", "policy": map[string]any{"disruptionBudget": 0.2}}, &pool)
	if keep > 0 {
		e.must(e.admin, "compute.ownerQuotas.create", map[string]any{"tenantId": "root", "poolId": pool.id(), "resource": "sandboxes", "max": keep}, nil)
	}
	for tenant, o := range offers {
		e.must(e.admin, "compute.offers.create", map[string]any{"tenantId": "root", "poolId": pool.id(), "toTenantId": tenant, "quota": o["quota"], "priority": o["priority"]}, nil)
	}
	e.must(e.admin, "compute.flavors.create", map[string]any{"tenantId": "root", "poolId": pool.id(), "name": "small", "vcpu": 1, "memoryGiB": 1, "diskGiB": 1}, &flavor)
	for _, tenant := range []string{"root", "acme", "globex"} {
		if _, ok := offers[tenant]; tenant != "root" && !ok {
			continue
		}
		e.must(e.admin, "compute.sandboxTemplates.create", map[string]any{"tenantId": tenant, "poolId": pool.id(), "flavorId": flavor.id(), "name": "py",
			"imageId": "python-3.12", "network": "private"}, nil)
	}
	var agents []*sandboxtest.Agent
	for _, id := range ids {
		var join struct{ Token string }
		e.must(e.admin, "nodes.joinTokens.create", map[string]any{"pool": pool.id(), "ip": id}, &join)
		a := sandboxtest.Join(t, e.url, join.Token, id, slots)
		a.Behave = func(nodeapi.SandboxSpec) sandboxtest.Run { return sandboxtest.Run{} }
		a.Start(100 * time.Millisecond)
		agents = append(agents, a)
	}
	// The templates are prepared on every node by the server's loop before anything is placed.
	testkit.WaitFor(t, 15*time.Second, "the templates prepared on the nodes", func() bool {
		for _, id := range ids {
			var n struct{ LocalTemplates []string }
			if e.call(e.admin, "nodes.get", map[string]any{"nodeId": id}, &n) != nil || len(n.LocalTemplates) < len(offers)+1 {
				return false
			}
		}
		return true
	})
	return pool.id(), agents
}

// TestConcurrentCreatesThroughTheAPI: 200 creates at once through the API on 3 nodes of 6 slots
// never exceed a quota or a node's max_mvm_num: acme's offer of 8 holds, the offered tenants
// together take exactly the 12 the owner's share of 6 leaves them, and the owner's creates
// beyond the nodes' room wait (pending) instead of overbooking them.
func TestConcurrentCreatesThroughTheAPI(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		offers := map[string]map[string]any{
			"acme":   {"quota": map[string]int64{"sandboxes": 8}, "priority": 5},
			"globex": {"quota": map[string]int64{"sandboxes": 50}, "priority": 1},
		}
		_, agents := sandboxFleet(t, e, 6, offers, 6, "127.0.0.2", "127.0.0.3", "127.0.0.4")
		counts := map[string]map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 200 {
			tenant := []string{"acme", "globex", "root", "acme", "globex"}[i%5]
			wg.Go(func() {
				var s sandboxes.Sandbox
				err := e.call(e.admin, "sandboxes.create", map[string]any{"tenantId": tenant, "template": "py", "command": []string{"sleep"}, "async": true}, &s)
				outcome := "ok"
				if err != nil {
					outcome = string(cubefleet.ErrorCode(err))
					if ce, ok := err.(*cubefleet.Error); !ok || ce.Details["quota"] != "sandboxes" {
						outcome += ": " + err.Error()
					}
				}
				mu.Lock()
				if counts[tenant] == nil {
					counts[tenant] = map[string]int{}
				}
				counts[tenant][outcome]++
				mu.Unlock()
			})
		}
		wg.Wait()
		acme, globex, root := counts["acme"]["ok"], counts["globex"]["ok"], counts["root"]["ok"]
		if acme > 8 || acme+globex != 12 || root != 40 {
			t.Fatalf("admitted acme %d, globex %d, root %d (want at most 8, 12 together, 40): %v", acme, globex, root, counts)
		}
		for tenant, c := range counts {
			for outcome := range c {
				if outcome != "ok" && outcome != string(cubefleet.CodeResourceExhausted) {
					t.Errorf("%s: %s", tenant, outcome)
				}
			}
		}
		// The nodes fill up (18 slots), the rest waits; no node ever ran more than its 6.
		testkit.WaitFor(t, 30*time.Second, "18 sandboxes running", func() bool {
			var l struct{ Items []sandboxes.Sandbox }
			n := 0
			for _, tenant := range []string{"root", "acme", "globex"} {
				e.must(e.admin, "sandboxes.list", map[string]any{"tenantId": tenant, "state": "running", "limit": 1000}, &l)
				n += len(l.Items)
			}
			return n == 18
		})
		time.Sleep(time.Second) // a last look: nothing more is placed
		for _, a := range agents {
			if p := a.Peak(); p > 6 {
				t.Errorf("node %s ran %d sandboxes at once; its max_mvm_num is 6", a.ID, p)
			}
		}
		var l struct{ Items []sandboxes.Sandbox }
		e.must(e.admin, "sandboxes.list", map[string]any{"tenantId": "root", "state": "pending", "limit": 1000}, &l)
		if len(l.Items) == 0 || l.Items[0].Reason != sandboxes.ReasonWaitingForRoom {
			t.Errorf("the owner's creates beyond the room: %d pending", len(l.Items))
		}
	})
}

// TestSandboxesAPI: a tenant sees only its own sandboxes (another tenant's is NOT_FOUND, through
// every method), a quota refusal carries a Retry-After, and a secret:// value reaches the
// sandbox only: no API answer, log line or table holds it.
func TestSandboxesAPI(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		offers := map[string]map[string]any{"acme": {"quota": map[string]int64{"sandboxes": 1}, "priority": 5}}
		_, agents := sandboxFleet(t, e, 0, offers, 4, "127.0.0.2")
		const value = "s3cr3t-VALUE-nobody-may-see"
		e.must(e.admin, "secrets.create", map[string]any{"tenantId": "acme", "name": "api-token", "value": value}, nil)
		acmeKey, _ := e.key("acme", "acme-ops", "sandboxes:*@tenant/acme")
		globexKey, _ := e.key("globex", "globex-ops", "sandboxes:*@tenant/globex")
		var s sandboxes.Sandbox
		status, body := e.post(acmeKey, "sandboxes.create", map[string]any{"tenantId": "acme", "template": "py", "command": []string{"env"},
			"env": map[string]string{"API_TOKEN": "secret://api-token"}})
		if status != 200 {
			t.Fatalf("create: %d %s", status, body)
		}
		json.Unmarshal(body, &s)
		if s.State != sandboxes.StateRunning || s.Env["API_TOKEN"] != "secret://api-token" {
			t.Fatalf("created: %+v", s)
		}
		answers := string(body)
		for _, m := range []string{"sandboxes.get", "sandboxes.wait", "sandboxes.logs", "sandboxes.list"} {
			in := map[string]any{"tenantId": "acme", "id": s.ID}
			switch m {
			case "sandboxes.list":
				in = map[string]any{"tenantId": "acme"}
			case "sandboxes.wait":
				in["timeoutSeconds"] = 1
			}
			status, body := e.post(acmeKey, m, in)
			if status != 200 {
				t.Errorf("%s: %d %s", m, status, body)
			}
			answers += string(body)
			// Another tenant's key, on its own tenant: the sandbox does not exist there.
			in["tenantId"] = "globex"
			if status, body := e.post(globexKey, m, in); m != "sandboxes.list" && status != http.StatusNotFound {
				t.Errorf("%s by another tenant: %d %s, want 404", m, status, body)
			} else if m == "sandboxes.list" && strings.Contains(string(body), s.ID) {
				t.Errorf("another tenant lists it: %s", body)
			}
		}
		if status, body := e.post(globexKey, "sandboxes.delete", map[string]any{"tenantId": "globex", "id": s.ID}); status != http.StatusNotFound {
			t.Errorf("delete by another tenant: %d %s", status, body)
		}
		// The offer allows one sandbox: a second is refused with a retry hint.
		req, _ := json.Marshal(map[string]any{"tenantId": "acme", "template": "py", "command": []string{"true"}})
		hr, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/sandboxes.create", strings.NewReader(string(req)))
		hr.Header.Set("Authorization", "Bearer "+acmeKey)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" {
			t.Errorf("a create past the offer: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		sp, _ := agents[0].Spec(s.ID)
		if !strings.Contains(strings.Join(sp.Env, "\n"), "API_TOKEN="+value) {
			t.Errorf("the sandbox's env: %v", sp.Env)
		}
		if strings.Contains(answers, value) {
			t.Errorf("an API answer holds the secret's value")
		}
		if strings.Contains(e.log.String(), value) {
			t.Errorf("the server log holds the secret's value")
		}
		e.must(e.admin, "sandboxes.delete", map[string]any{"tenantId": "acme", "id": s.ID}, nil)
	})
}

// TestDrainWithSandboxes: nodes.get shows what a node runs; a drain ends only when the agent
// reports it runs nothing (not when the sandboxes are told to stop: one that ignores SIGTERM
// holds it open for its grace); the pool's disruption budget (0.2 of 3 nodes: 1 at once) refuses
// a second drain, and force overrides it, noted in the audit log.
func TestDrainWithSandboxes(t *testing.T) {
	eachServer(t, func(t *testing.T, e *testEnv) {
		_, agents := sandboxFleet(t, e, 0, nil, 4, "127.0.0.2", "127.0.0.3", "127.0.0.4")
		for _, a := range agents {
			a.Behave = func(nodeapi.SandboxSpec) sandboxtest.Run {
				return sandboxtest.Run{IgnoreTerm: true, Grace: 1500 * time.Millisecond}
			}
		}
		var ids []string
		for range 3 {
			var s sandboxes.Sandbox
			e.must(e.admin, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "command": []string{"sleep"}}, &s)
			ids = append(ids, s.ID)
		}
		var s sandboxes.Sandbox
		e.must(e.admin, "sandboxes.get", map[string]any{"tenantId": "root", "id": ids[0]}, &s)
		node := s.NodeID
		var n struct {
			Drain     *struct{ State string }
			Sandboxes *sandboxes.NodeSandboxes
		}
		e.must(e.admin, "nodes.drain", map[string]any{"nodeId": node, "reason": "kernel update"}, &n)
		if n.Drain == nil || n.Drain.State != "Draining" || n.Sandboxes == nil || n.Sandboxes.Running == 0 {
			t.Fatalf("drain: %+v %+v", n.Drain, n.Sandboxes)
		}
		var other string
		for _, a := range agents {
			if a.ID != node {
				other = a.ID
				break
			}
		}
		ce := e.mustFail(e.admin, "nodes.drain", map[string]any{"nodeId": other}, cubefleet.CodeConflict)
		if !strings.Contains(ce.Message, "disruption budget 0.2") || !strings.Contains(ce.Message, node) {
			t.Errorf("past the budget: %s", ce.Message)
		}
		e.must(e.admin, "nodes.drain", map[string]any{"nodeId": other, "force": true}, nil)
		var msg string
		e.db.QueryRow(`SELECT message FROM audit_log WHERE method = 'nodes.drain' AND target = $1`, other).Scan(&msg)
		if !strings.Contains(msg, "forced past the disruption budget") {
			t.Errorf("the forced drain's audit row: %q", msg)
		}
		// Stop what runs on the node: it ignores SIGTERM, so the drain stays open for the grace.
		for _, id := range ids {
			e.must(e.admin, "sandboxes.delete", map[string]any{"tenantId": "root", "id": id}, nil)
		}
		asked := time.Now()
		e.must(e.admin, "nodes.get", map[string]any{"nodeId": node}, &n)
		if n.Drain.State != "Draining" {
			t.Fatalf("drained while its sandboxes ignore SIGTERM: %+v", n.Drain)
		}
		testkit.WaitFor(t, 15*time.Second, "the node drained", func() bool {
			e.must(e.admin, "nodes.get", map[string]any{"nodeId": node}, &n)
			return n.Drain.State == "Drained"
		})
		if d := time.Since(asked); d < time.Second {
			t.Errorf("drained %s after the stop, before the sandboxes' grace of 1.5 s", d)
		}
		if n.Sandboxes.Running != 0 {
			t.Errorf("drained with %d sandboxes running by the records", n.Sandboxes.Running)
		}
	})
}

// TestLongPollsHoldNoSlot: with one API worker, calls that wait for a sandbox (sandboxes.wait,
// a create without async) give their slot back while they wait: other calls run meanwhile.
func TestLongPollsHoldNoSlot(t *testing.T) {
	e := mustStart(t, nil, func(c *Config) { c.APIWorkers = 1 })
	sandboxFleet(t, e, 0, nil, 4) // no nodes: every sandbox waits for room
	var s struct{ ID, State string }
	e.must(e.admin, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "async": true}, &s)
	if s.State != "pending" {
		t.Fatalf("created %+v, want pending", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	api := client.New(e.url, e.admin, nil)
	waits := make(chan error, 3)
	defer func() { // the waits end with their clients
		cancel()
		for range 3 {
			<-waits
		}
	}()
	for range 2 {
		go func() {
			waits <- api.Call(ctx, "sandboxes.wait", map[string]any{"tenantId": "root", "id": s.ID, "until": "running", "timeoutSeconds": 60}, nil)
		}()
	}
	go func() {
		waits <- api.Call(ctx, "sandboxes.create", map[string]any{"tenantId": "root", "template": "py", "waitSeconds": 60}, nil)
	}()
	testkit.WaitFor(t, 20*time.Second, "the waits waiting", func() bool {
		return e.srv.sys.Sandboxes.Waiting() >= 3
	})
	var got struct{ State string }
	e.must(e.admin, "sandboxes.get", map[string]any{"tenantId": "root", "id": s.ID}, &got)
	if len(waits) != 0 || got.State != "pending" {
		t.Fatalf("sandboxes.get ran only after a wait ended (%d ended), or found %+v", len(waits), got)
	}
}
