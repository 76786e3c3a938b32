package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// registerBody is a stock Cubelet's register body for node id in cluster label.
func registerBody(t *testing.T, id, label string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "register.json"))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte("10.0.0.7"), []byte(id))
	return bytes.ReplaceAll(b, []byte(`"default-cluster"`), []byte(`"`+label+`"`))
}

// nodeCall sends a node-agent or internal call to base with an optional bearer token.
func nodeCall(t *testing.T, method, url, token string, body []byte, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

// makePool creates a site and a pool of root and gives the pool a fleet name.
func (e *testEnv) makePool(name string) string {
	e.t.Helper()
	var site, pool obj
	e.must(e.admin, "compute.sites.create", map[string]any{"tenantId": "root", "kind": "shared", "region": "eu-central"}, &site)
	e.must(e.admin, "compute.pools.create", map[string]any{"tenantId": "root", "siteId": site.id(), "class": "vps-host"}, &pool)
	if _, err := e.db.Exec(`INSERT INTO fleet_names (tenant_id, kind, name, object_id) VALUES ('root', 'pool', $1, $2)`, name, pool.id()); err != nil {
		e.t.Fatal(err)
	}
	e.srv.sys.Nodes.RefreshPools(context.Background())
	return pool.id()
}

func allowLoopback(c *Config) {
	c.NodeAgentAllowUnauthenticated = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
}

// TestNodesAPI drives the public nodes.* methods and events.list over a stock Cubelet and a
// joined agent: listing with pools from join tokens and cluster labels, cordon, labels,
// delete, and the events and audit rows they leave.
func TestNodesAPI(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, allowLoopback)
		ctx := context.Background()
		poolID := e.makePool("fra-cubes")
		agent := e.srv.InternalURL()
		// A stock Cubelet whose cluster_label names the pool, one whose label names none.
		for id, label := range map[string]string{"10.0.0.7": "fra-cubes", "10.0.0.8": "nowhere"} {
			if code, _, out := nodeCall(t, "POST", agent+nodeapi.PathRegister, "", registerBody(t, id, label)); code != 200 {
				t.Fatalf("register %s: %d %s", id, code, out)
			}
		}
		// A cubefleet agent that joins with a token for the pool.
		var jt contract.JoinTokenCreated
		e.must(e.admin, "nodes.joinTokens.create", map[string]any{"pool": "fra-cubes", "ip": "127.0.0.1"}, &jt)
		if !strings.HasPrefix(jt.Token, nodeapi.JoinTokenPrefix) || jt.JoinToken.PoolID != poolID || jt.JoinToken.Uses != 1 {
			t.Fatalf("join token: %+v", jt)
		}
		code, _, out := nodeCall(t, "POST", agent+nodeapi.PathRegister, jt.Token, registerBody(t, "127.0.0.1", "ignored"))
		if code != 200 || !bytes.Contains(out, []byte(`"node_credential":"cfn_`)) {
			t.Fatalf("join: %d %s", code, out)
		}
		var joined nodeapi.RegisterResponse
		json.Unmarshal(out, &joined)
		status, _ := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "status.json"))
		for _, c := range []struct{ id, token string }{{"10.0.0.7", ""}, {"10.0.0.8", ""}, {"127.0.0.1", joined.NodeCredential}} {
			if code, _, out := nodeCall(t, "POST", agent+nodeapi.StatusPath(c.id), c.token, status); code != 200 {
				t.Fatalf("status %s: %d %s", c.id, code, out)
			}
		}
		e.srv.sys.Nodes.CheckHealth(ctx)

		var list contract.NodeList
		e.must(e.admin, "nodes.list", map[string]any{}, &list)
		if len(list.Items) != 3 || list.HeartbeatTimeout != 15000 || list.LostAfter != 300000 {
			t.Fatalf("list: %+v", list)
		}
		byID := map[string]contract.Node{}
		for _, v := range list.Items {
			byID[v.ID] = v
		}
		if v := byID["10.0.0.7"]; v.Pool != "fra-cubes" || v.PoolID != poolID || v.Schedulable || !v.RegistryOnly || v.State != contract.NodeReady {
			t.Errorf("stock node in a known pool: %+v", v)
		}
		if v := byID["10.0.0.8"]; v.PoolID != "" || v.Schedulable || !slices.ContainsFunc(v.UnschedulableReasons, func(r string) bool { return strings.HasPrefix(r, "unknown pool") }) {
			t.Errorf("stock node in an unknown pool: %+v", v)
		}
		if v := byID["127.0.0.1"]; v.Agent != nodes.AgentCubefleet || v.PoolID != poolID || !v.Schedulable || v.Allocated == nil || v.Allocated.Mvm != 4 {
			t.Errorf("joined node: %+v", v)
		}
		e.must(e.admin, "nodes.list", map[string]any{"pool": "fra-cubes"}, &list)
		if len(list.Items) != 2 {
			t.Errorf("list --pool fra-cubes: %d nodes, want 2", len(list.Items))
		}
		e.mustFail(e.admin, "nodes.list", map[string]any{"state": "Sleeping"}, cubefleet.CodeInvalidInput)
		// An unknown pool is NOT_FOUND, naming it; a pool with no nodes, or a cluster label no
		// pool holds, lists what matches.
		if ce := e.mustFail(e.admin, "nodes.list", map[string]any{"pool": "nosuch"}, cubefleet.CodeNotFound); !strings.Contains(ce.Message, `"nosuch"`) {
			t.Errorf("list --pool nosuch: %v", ce)
		}
		e.must(e.admin, "nodes.list", map[string]any{"pool": "nowhere"}, &list)
		if len(list.Items) != 1 || list.Items[0].ID != "10.0.0.8" {
			t.Errorf("list --pool nowhere (a cluster label): %+v", list.Items)
		}
		e.makePool("empty-pool")
		e.must(e.admin, "nodes.list", map[string]any{"pool": "empty-pool"}, &list)
		if len(list.Items) != 0 {
			t.Errorf("list --pool empty-pool: %+v", list.Items)
		}
		e.mustFail(e.admin, "nodes.get", map[string]any{"nodeId": "10.9.9.9"}, cubefleet.CodeNotFound)
		e.mustFail(e.admin, "nodes.joinTokens.create", map[string]any{"pool": "no-such-pool"}, cubefleet.CodeInvalidInput)
		e.mustFail(e.admin, "nodes.joinTokens.create", map[string]any{"pool": poolID, "ip": "not-an-ip"}, cubefleet.CodeInvalidInput)
		e.mustFail(e.admin, "nodes.joinTokens.create", map[string]any{"pool": poolID, "uses": -1}, cubefleet.CodeInvalidInput)

		// Cordon, label, delete through the API.
		var got contract.NodeOutput
		e.must(e.admin, "nodes.cordon", map[string]any{"nodeId": "127.0.0.1", "detail": "kernel update"}, &got)
		if !got.Cordoned || got.CordonDetail != "kernel update" || got.Schedulable {
			t.Errorf("cordon: %+v", got.Node)
		}
		got = contract.NodeOutput{}
		var labelled contract.NodeLabelOutput
		e.must(e.admin, "nodes.label", map[string]any{"nodeId": "127.0.0.1", "set": map[string]string{"rack": "r12"}, "remove": []string{"kubernetes.io/os"}}, &labelled)
		if got := labelled.Node; got.Labels["rack"] != "r12" || got.Labels["kubernetes.io/os"] != "" || got.Labels[nodeapi.ReservedLabel] != "true" || !labelled.Changed {
			t.Errorf("label: %v changed %v", got.Labels, labelled.Changed)
		}
		// The same again, and removing a label the node does not have, change nothing.
		for _, in := range []map[string]any{
			{"nodeId": "127.0.0.1", "set": map[string]string{"rack": "r12"}},
			{"nodeId": "127.0.0.1", "remove": []string{"missing"}},
		} {
			labelled = contract.NodeLabelOutput{}
			e.must(e.admin, "nodes.label", in, &labelled)
			if labelled.Changed || labelled.ID != "127.0.0.1" || labelled.Labels["rack"] != "r12" {
				t.Errorf("label %v: changed %v, %+v", in, labelled.Changed, labelled.Labels)
			}
		}
		e.mustFail(e.admin, "nodes.label", map[string]any{"nodeId": "127.0.0.1", "set": map[string]string{nodeapi.ReservedLabel: "false"}}, cubefleet.CodeForbidden)
		e.mustFail(e.admin, "nodes.label", map[string]any{"nodeId": "127.0.0.1", "set": map[string]string{"bad key": "x"}}, cubefleet.CodeInvalidInput)
		e.mustFail(e.admin, "nodes.delete", map[string]any{"nodeId": "10.0.0.7"}, cubefleet.CodeConflict) // not cordoned
		ce := e.mustFail(e.admin, "nodes.delete", map[string]any{"nodeId": "127.0.0.1"}, cubefleet.CodeConflict)
		if !strings.Contains(ce.Message, "still runs 4 sandboxes") {
			t.Errorf("delete with sandboxes: %s", ce.Message)
		}
		e.must(e.admin, "nodes.delete", map[string]any{"nodeId": "127.0.0.1", "force": true}, &got)
		if got.ID != "127.0.0.1" {
			t.Errorf("delete answered %+v", got.Node)
		}
		// The deleted agent is refused; the internal route agrees the node is gone.
		if code, _, _ := nodeCall(t, "POST", agent+nodeapi.StatusPath("127.0.0.1"), joined.NodeCredential, status); code != 401 {
			t.Errorf("status of the deleted agent: %d, want 401", code)
		}
		if code, _, _ := nodeCall(t, "GET", e.srv.InternalURL()+nodeapi.NodePath("127.0.0.1"), "", nil); code != 404 {
			t.Errorf("GET the deleted node: %d, want 404", code)
		}
		e.must(e.admin, "nodes.uncordon", map[string]any{"nodeId": "10.0.0.7"}, &got)

		if err := e.srv.sys.NodeStore.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		var evs contract.EventList
		e.must(e.admin, "events.list", map[string]any{"subject": "127.0.0.1"}, &evs)
		var types []string
		for _, ev := range evs.Items {
			types = append(types, ev.Type)
		}
		if !slices.Equal(types, []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventDeleted}) {
			t.Errorf("events of 127.0.0.1: %v", types)
		}
		e.must(e.admin, "events.list", map[string]any{"type": "node.joined"}, &evs)
		if len(evs.Items) != 3 {
			t.Errorf("%d node.joined events, want 3", len(evs.Items))
		}
		var n int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE method IN ('nodes.cordon', 'nodes.label', 'nodes.delete', 'nodes.joinTokens.create') AND outcome = 'ok'`).Scan(&n)
		if n != 6 { // the two nodes.label calls that changed nothing are audited too
			t.Errorf("%d audit rows for the node changes, want 6", n)
		}
		// The join token's secret never reached the log.
		if strings.Contains(e.log.String(), jt.Token) || strings.Contains(e.log.String(), joined.NodeCredential) {
			t.Errorf("a token reached the log")
		}
		// Metrics count reports and events.
		code, _, metrics := nodeCall(t, "GET", e.url+"/metrics", "", nil)
		for _, want := range []string{`cubefleet_node_reports_total{result="ok"} 3`, `cubefleet_node_events_total{type="node.deleted"} 1`, `cubefleet_nodes{state="Ready"} 2`} {
			if code != 200 || !bytes.Contains(metrics, []byte(want)) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// TestInternalListen: with --internal-listen the node routes are served there and not on
// --listen, and the API is not served on the internal listener.
func TestInternalListen(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, func(c *Config) {
			allowLoopback(c)
			c.InternalListen = "127.0.0.1:0"
		})
		in := e.srv.InternalURL()
		if in == e.url {
			t.Fatalf("InternalURL = URL = %s", in)
		}
		body := registerBody(t, "10.0.0.7", "x")
		if code, _, out := nodeCall(t, "POST", in+nodeapi.PathRegister, "", body); code != 200 {
			t.Errorf("register on the internal listener: %d %s", code, out)
		}
		if code, _, _ := nodeCall(t, "POST", e.url+nodeapi.PathRegister, "", body); code != 404 {
			t.Errorf("register on the public listener: %d, want 404", code)
		}
		if code, _, _ := nodeCall(t, "GET", e.url+nodeapi.NodesPrefix, "", nil); code != 404 {
			t.Errorf("nodes on the public listener: %d, want 404", code)
		}
		if code, _, out := nodeCall(t, "GET", in+nodeapi.NodesPrefix, "", nil); code != 200 || !bytes.Contains(out, []byte(`"IP":"10.0.0.7"`)) {
			t.Errorf("nodes on the internal listener: %d %s", code, out)
		}
		if code, _, _ := nodeCall(t, "POST", in+"/api/v1/nodes.list", e.admin, []byte(`{}`)); code != 404 {
			t.Errorf("the API on the internal listener: %d, want 404", code)
		}
		if code, _, _ := nodeCall(t, "GET", in+"/healthz", "", nil); code != 200 {
			t.Errorf("healthz on the internal listener: %d", code)
		}
		var list contract.NodeList
		e.must(e.admin, "nodes.list", map[string]any{}, &list)
		if len(list.Items) != 1 {
			t.Errorf("nodes.list: %d nodes", len(list.Items))
		}
	})
}

// TestNodeAgentRequestID: the request id of a node-agent call is the caller's X-Request-Id
// or X-RequestID when it is at most 128 of [A-Za-z0-9._:-], a fresh one otherwise, and is
// echoed back.
func TestNodeAgentRequestID(t *testing.T) {
	e := mustStart(t, storetest.SQLite(t), allowLoopback)
	url := e.url + nodeapi.PathReadyz
	for _, c := range []struct {
		header, value string
		echoed        bool
	}{
		{"X-Request-Id", "abc-123", true},
		{"X-RequestID", "cubelet.7_1", true},
		{"X-Request-Id", strings.Repeat("a", 128), true},
		{"X-Request-Id", strings.Repeat("a", 129), false},
		{"X-Request-Id", "has space", false},
		{"X-RequestID", "semi;colon", false},
	} {
		code, h, body := nodeCall(t, "GET", url, "", nil, c.header, c.value)
		got := h.Get(RequestIDHeader)
		if code != 200 || string(body) != `{"ret":{"ret_code":200,"ret_msg":"ok"}}` || (got == c.value) != c.echoed || got == "" {
			t.Errorf("%s: %q: %d %s, id %q", c.header, c.value, code, body, got)
		}
	}
}

// TestNodesDrain drives nodes.drain: a key without nodes:drain (even one holding nodes:cordon)
// is refused FORBIDDEN, audited, and changes nothing; a key holding it drains the node (cordoned,
// Draining with the sandboxes left), audited; draining again is idempotent; a report of no
// sandboxes makes it Drained; events.list and the metrics show both events; uncordon ends it.
func TestNodesDrain(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, allowLoopback)
		ctx := context.Background()
		agent := e.srv.InternalURL()
		if code, _, out := nodeCall(t, "POST", agent+nodeapi.PathRegister, "", registerBody(t, "10.0.0.7", "x")); code != 200 {
			t.Fatalf("register: %d %s", code, out)
		}
		status, _ := os.ReadFile(filepath.Join("..", "nodes", "nodetest", "testdata", "status.json"))
		if code, _, out := nodeCall(t, "POST", agent+nodeapi.StatusPath("10.0.0.7"), "", status); code != 200 {
			t.Fatalf("status: %d %s", code, out)
		}

		cordoner, cordonerID := e.key("root", "cordoner", "nodes:cordon@tenant/root", "nodes:get@tenant/root")
		ce := e.mustFail(cordoner, "nodes.drain", map[string]any{"nodeId": "10.0.0.7", "reason": "kernel update"}, cubefleet.CodeForbidden)
		if !strings.Contains(ce.Message, "nodes:drain") {
			t.Errorf("FORBIDDEN does not name the permission: %s", ce.Message)
		}
		var n int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE method = 'nodes.drain' AND outcome = 'forbidden' AND principal_id = $1 AND permission = 'nodes:drain'`,
			cordonerID).Scan(&n)
		if n != 1 {
			t.Errorf("%d forbidden audit rows for nodes.drain, want 1", n)
		}
		var got contract.NodeOutput
		e.must(cordoner, "nodes.get", map[string]any{"nodeId": "10.0.0.7"}, &got)
		if got.Cordoned || got.Drain != nil {
			t.Fatalf("a refused drain changed the node: %+v", got.Node)
		}

		drainer, drainerID := e.key("root", "drainer", "nodes:drain@tenant/root")
		e.mustFail(drainer, "nodes.drain", map[string]any{}, cubefleet.CodeInvalidInput)
		e.mustFail(drainer, "nodes.drain", map[string]any{"nodeId": "10.9.9.9"}, cubefleet.CodeNotFound)
		for range 2 { // idempotent
			got = contract.NodeOutput{}
			e.must(drainer, "nodes.drain", map[string]any{"nodeId": "10.0.0.7", "reason": "kernel update"}, &got)
			d := got.Drain
			if d == nil || d.State != contract.DrainDraining || d.SandboxesLeft != 4 || d.Reason != "kernel update" || d.RequestedBy != drainerID ||
				d.RequestedAt == 0 || !got.Cordoned || got.CordonDetail != "kernel update" || !got.Healthy || got.Now == 0 {
				t.Fatalf("nodes.drain: %+v (drain %+v)", got.Node, d)
			}
		}
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE method = 'nodes.drain' AND outcome = 'ok' AND principal_id = $1 AND target = '10.0.0.7'`,
			drainerID).Scan(&n)
		if n != 2 {
			t.Errorf("%d ok audit rows for nodes.drain, want 2", n)
		}
		// The wire keeps Healthy and says SchedulingDisabled.
		_, _, wire := nodeCall(t, "GET", e.srv.InternalURL()+nodeapi.NodePath("10.0.0.7"), "", nil)
		if !bytes.Contains(wire, []byte(`"SchedulingDisabled":true`)) || !bytes.Contains(wire, []byte(`"Healthy":true`)) {
			t.Errorf("wire of a draining node: %s", wire)
		}

		empty := bytes.Replace(status, []byte(`"mvm_num": 4`), []byte(`"mvm_num": 0`), 1)
		if code, _, out := nodeCall(t, "POST", agent+nodeapi.StatusPath("10.0.0.7"), "", empty); code != 200 {
			t.Fatalf("status: %d %s", code, out)
		}
		got = contract.NodeOutput{}
		e.must(e.admin, "nodes.get", map[string]any{"nodeId": "10.0.0.7"}, &got)
		if d := got.Drain; d == nil || d.State != contract.DrainDrained || d.SandboxesLeft != 0 || d.DrainedAt == 0 {
			t.Errorf("after a report of no sandboxes: %+v", d)
		}
		var list contract.NodeList
		e.must(e.admin, "nodes.list", map[string]any{}, &list)
		if len(list.Items) != 1 || list.Items[0].Drain == nil || list.Items[0].Drain.State != contract.DrainDrained {
			t.Errorf("nodes.list: %+v", list.Items)
		}

		if err := e.srv.sys.NodeStore.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		var evs contract.EventList
		e.must(e.admin, "events.list", map[string]any{"subject": "10.0.0.7"}, &evs)
		var types []string
		for _, ev := range evs.Items {
			types = append(types, ev.Type)
		}
		if want := []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventDraining, nodes.EventDrained}; !slices.Equal(types, want) {
			t.Errorf("events = %v, want %v", types, want)
		}
		_, _, metrics := nodeCall(t, "GET", e.url+"/metrics", "", nil)
		for _, want := range []string{`cubefleet_node_events_total{type="node.draining"} 1`, `cubefleet_node_events_total{type="node.drained"} 1`} {
			if !bytes.Contains(metrics, []byte(want)) {
				t.Errorf("metrics lack %s", want)
			}
		}

		got = contract.NodeOutput{}
		e.must(e.admin, "nodes.uncordon", map[string]any{"nodeId": "10.0.0.7"}, &got)
		if got.Drain != nil || got.Cordoned {
			t.Errorf("after uncordon: %+v", got.Node)
		}
	})
}
