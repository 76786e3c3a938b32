package nodehttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// TestAuth: our agent joins with a join token and reports with its node credential; every
// other way in (no token, a wrong token, a used or expired join token, a token from the wrong
// address, another node's credential, a deleted node's credential, unauthenticated calls from
// outside the allowed networks, a stolen join token naming a registered node) is refused and
// audited.
func TestAuth(t *testing.T) {
	allowed := netip.MustParsePrefix("127.0.0.9/32") // stock Cubelets: only from 127.0.0.9
	nodetest.Each(t, func(c *nodetest.Config) {
		c.HTTP.AllowUnauthenticated = []netip.Prefix{allowed}
		c.HTTP.Authenticate = nodetest.FakeKeys
	}, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		a, b, c3, c5, stock := nodetest.From("127.0.0.1"), nodetest.From("127.0.0.2"), nodetest.From("127.0.0.3"), nodetest.From("127.0.0.5"), nodetest.From("127.0.0.9")
		status := nodetest.Status()
		audited := 0
		refused := func(what string, gotStatus int, body []byte, wantStatus int, reason string) {
			t.Helper()
			if gotStatus != wantStatus || !bytes.Contains(body, []byte(reason)) {
				t.Errorf("%s: %d %s, want %d with %q", what, gotStatus, body, wantStatus, reason)
			}
			e.Flush()
			n := e.Count(`SELECT count(*) FROM audit_log WHERE outcome <> 'ok'`)
			if n != audited+1 {
				t.Errorf("%s: %d refusal audit rows, want %d", what, n, audited+1)
			}
			audited = n
			// The next refusal comes in a window of its own: it is audited at once, not
			// summarized with this one (TestRefusalsSummarizedPerPeer).
			e.Clock.Add(nodehttp.RefusalWindow)
		}

		// The join: a single-use token bound to 127.0.0.1.
		join := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1"})
		code, body := e.Call(a, "POST", nodeapi.PathRegister, join, nodetest.WithNode("127.0.0.1"))
		if code != 200 {
			t.Fatalf("join: %d %s", code, body)
		}
		var joined nodeapi.RegisterResponse
		json.Unmarshal(body, &joined)
		cred := joined.NodeCredential
		if !strings.HasPrefix(cred, nodeapi.CredentialPrefix) || joined.NodeID != "127.0.0.1" {
			t.Fatalf("join answer: %s", body)
		}
		if code, body := e.Call(a, "POST", nodeapi.StatusPath("127.0.0.1"), cred, status); code != 200 {
			t.Fatalf("status with the credential: %d %s", code, body)
		}
		if code, body := e.Call(a, "POST", nodeapi.PathRegister, cred, nodetest.WithNode("127.0.0.1")); code != 200 || bytes.Contains(body, []byte("node_credential")) {
			t.Fatalf("register again with the credential: %d %s", code, body)
		}
		v, _ := e.Reg.Get(ctx, "127.0.0.1")
		if v.Agent != nodes.AgentCubefleet || v.PoolID != nodetest.Pool.ID || v.Pool != nodetest.Pool.Name || !v.Schedulable {
			t.Errorf("joined node: %+v", v)
		}
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM nodes_registrations WHERE credential_hash = $1`, nodes.HashToken(cred)); n != 1 {
			t.Errorf("the credential is not stored hashed")
		}
		if n := e.Count(`SELECT count(*) FROM nodes_join_tokens WHERE uses_left = 0 AND ip = '127.0.0.1'`); n != 1 {
			t.Errorf("the join token is not used up")
		}

		// No credentials, from outside the allowed networks.
		code, body = e.Call(a, "POST", nodeapi.PathRegister, "", nodetest.WithNode("10.1.0.2"))
		refused("register without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		code, body = e.Call(b, "POST", nodeapi.StatusPath("127.0.0.1"), "", status)
		refused("status without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		code, body = e.Call(a, "GET", nodeapi.NodesPrefix, "", nil)
		refused("list without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		code, body = e.Call(a, "PUT", nodeapi.NodesPrefix+"/127.0.0.1/isolation", "", nil)
		refused("isolation without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		// Wrong tokens.
		code, body = e.Call(a, "POST", nodeapi.PathRegister, "cfj_not-a-real-token", nodetest.WithNode("10.1.0.2"))
		refused("register with a wrong join token", code, body, 401, "unknown join token")
		code, body = e.Call(a, "POST", nodeapi.StatusPath("127.0.0.1"), "cfn_not-a-real-credential", status)
		refused("status with a wrong credential", code, body, 401, "unknown or revoked node credential")
		code, body = e.Call(a, "POST", nodeapi.StatusPath("127.0.0.1"), "something-else", status)
		refused("status with a token of no known kind", code, body, 401, "unknown kind of token")
		code, body = e.Call(a, "POST", nodeapi.StatusPath("127.0.0.1"), join, status)
		refused("status with a join token", code, body, 401, "node credential")
		// A used join token.
		code, body = e.Call(a, "POST", nodeapi.PathRegister, join, nodetest.WithNode("10.1.0.2"))
		refused("register with a used join token", code, body, 401, "already used")
		// An expired join token.
		expiring := e.JoinToken(nodes.JoinTokenInput{TTL: time.Minute, AnyIP: true})
		e.Clock.Add(2 * time.Minute)
		code, body = e.Call(a, "POST", nodeapi.PathRegister, expiring, nodetest.WithNode("10.1.0.2"))
		refused("register with an expired join token", code, body, 401, "expired")
		// A join token from the wrong address: bound by --ip, and bound by its first use.
		elsewhere := e.JoinToken(nodes.JoinTokenInput{IP: "10.9.9.9"})
		code, body = e.Call(a, "POST", nodeapi.PathRegister, elsewhere, nodetest.WithNode("10.1.0.2"))
		refused("register from an address the token is not bound to", code, body, 401, "bound to another address")
		twice := e.JoinToken(nodes.JoinTokenInput{Uses: 2})
		if code, body := e.Call(c3, "POST", nodeapi.PathRegister, twice, nodetest.WithNode("127.0.0.3")); code != 200 {
			t.Fatalf("first use of an unbound token: %d %s", code, body)
		}
		code, body = e.Call(b, "POST", nodeapi.PathRegister, twice, nodetest.WithNode("10.1.0.4"))
		refused("second use from another address", code, body, 401, "bound to another address")
		// A stolen join token cannot take over a registered node.
		stolen := e.JoinToken(nodes.JoinTokenInput{AnyIP: true})
		code, body = e.Call(b, "POST", nodeapi.PathRegister, stolen, nodetest.WithNode("127.0.0.1"))
		refused("a join token naming a registered node", code, body, 409, "cannot take over")
		// Another node's credential.
		var third nodeapi.RegisterResponse
		_, body = e.Call(c5, "POST", nodeapi.PathRegister, e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.5"}), nodetest.WithNode("127.0.0.5"))
		json.Unmarshal(body, &third)
		code, body = e.Call(a, "POST", nodeapi.StatusPath("127.0.0.1"), third.NodeCredential, status)
		refused("status with another node's credential", code, body, 401, "belongs to another node")
		code, body = e.Call(a, "POST", nodeapi.PathRegister, third.NodeCredential, nodetest.WithNode("127.0.0.1"))
		refused("register with another node's credential", code, body, 401, "belongs to another node")
		// An allowed network cannot report for a node that has a credential.
		code, body = e.Call(stock, "POST", nodeapi.StatusPath("127.0.0.1"), "", status)
		refused("unauthenticated status for a credentialed node", code, body, 401, "authenticates with its node credential")
		code, body = e.Call(stock, "POST", nodeapi.PathRegister, "", nodetest.WithNode("127.0.0.1"))
		refused("unauthenticated register of a credentialed node", code, body, 401, "authenticates with its node credential")
		// API keys on the internal routes need the permission; a node credential reads and
		// isolates only its own node and never deletes.
		if code, body := e.Call(a, "GET", nodeapi.NodesPrefix, nodetest.ReaderKey, nil); code != 200 || !bytes.Contains(body, []byte(`"IP":"127.0.0.1"`)) {
			t.Errorf("list with nodes:list: %d %s", code, body)
		}
		code, body = e.Call(a, "PUT", nodeapi.NodesPrefix+"/127.0.0.1/isolation", nodetest.ReaderKey, nil)
		refused("isolation without nodes:cordon", code, body, 403, "lacks nodes:cordon")
		code, body = e.Call(a, "GET", nodeapi.NodesPrefix+"/127.0.0.5", cred, nil)
		refused("a node reading another node", code, body, 401, "belongs to another node")
		if code, body := e.Call(a, "GET", nodeapi.NodesPrefix+"/127.0.0.1", cred, nil); code != 200 || !bytes.Contains(body, []byte(`"IP":"127.0.0.1"`)) {
			t.Errorf("a node reading itself: %d %s", code, body)
		}
		if code, body := e.Call(a, "PUT", nodeapi.NodesPrefix+"/127.0.0.1/isolation", cred, []byte(`{"detail":"draining myself"}`)); code != 200 {
			t.Errorf("a node cordoning itself: %d %s", code, body)
		}
		code, body = e.Call(a, "DELETE", nodeapi.NodesPrefix+"/127.0.0.1?force=true", cred, nil)
		refused("a node deleting itself", code, body, 403, "cannot delete")
		// The admin key deletes it; its credential is refused from then on, and the agent
		// cannot come back without a new join token.
		if code, body := e.Call(a, "DELETE", nodeapi.NodesPrefix+"/127.0.0.1?force=true", nodetest.AdminKey, nil); code != 200 {
			t.Fatalf("delete: %d %s", code, body)
		}
		code, body = e.Call(a, "POST", nodeapi.StatusPath("127.0.0.1"), cred, status)
		refused("status with a deleted node's credential", code, body, 401, "unknown or revoked")
		code, body = e.Call(a, "POST", nodeapi.PathRegister, cred, nodetest.WithNode("127.0.0.1"))
		refused("register with a deleted node's credential", code, body, 401, "unknown or revoked")
		rejoin := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1"})
		if code, body := e.Call(a, "POST", nodeapi.PathRegister, rejoin, nodetest.WithNode("127.0.0.1")); code != 200 {
			t.Errorf("rejoin with a new token: %d %s", code, body)
		}
		// Stock Cubelets from the allowed network work, and never see a credential.
		if code, body := e.Call(stock, "POST", nodeapi.PathRegister, "", nodetest.WithNode("10.1.0.9")); code != 200 || bytes.Contains(body, []byte("node_credential")) {
			t.Errorf("stock register: %d %s", code, body)
		}
		if code, body := e.Call(stock, "POST", nodeapi.StatusPath("10.1.0.9"), "", status); code != 200 {
			t.Errorf("stock status: %d %s", code, body)
		}
		v, _ = e.Reg.Get(ctx, "10.1.0.9")
		if v.Agent != nodes.AgentCubelet || !v.RegistryOnly || v.Schedulable || v.Pool != nodetest.Pool.Name {
			t.Errorf("stock node: %+v", v)
		}
		// The audit rows carry what was refused and from where, never a secret.
		e.Flush()
		rows, err := e.DB.Query(`SELECT method, principal_id, outcome, target, message FROM audit_log`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var method, principal, outcome, target, msg string
			rows.Scan(&method, &principal, &outcome, &target, &msg)
			for _, secret := range []string{cred, join, third.NodeCredential, stolen, twice} {
				if strings.Contains(msg, secret) || strings.Contains(principal, secret) {
					t.Errorf("audit row %s %s holds a secret", method, msg)
				}
			}
			if outcome != "ok" && !strings.Contains(msg, "from 127.0.0.") {
				t.Errorf("audit row %s %q does not say where the call came from", method, msg)
			}
		}
	})
}

// TestHeartbeatStormFromDeletedNode: a deleted stock node that keeps reporting gets 404 from
// memory, and a deleted agent's credential 401, summarized into one audit row however many
// times it calls.
func TestHeartbeatStormFromDeletedNode(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		client := &http.Client{Timeout: 2 * time.Second}
		join := e.JoinToken(nodes.JoinTokenInput{AnyIP: true})
		_, body := e.Call(client, "POST", nodeapi.PathRegister, join, nodetest.WithNode("10.2.0.1"))
		var joined nodeapi.RegisterResponse
		json.Unmarshal(body, &joined)
		if code, _ := e.Call(client, "POST", nodeapi.PathRegister, "", nodetest.WithNode("10.2.0.2")); code != 200 {
			t.Fatal("stock register")
		}
		for _, id := range []string{"10.2.0.1", "10.2.0.2"} {
			if _, err := e.Reg.Cordon(ctx, id, "", "test"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Reg.Delete(ctx, id, true, "test"); err != nil {
				t.Fatal(err)
			}
		}
		e.Flush()
		before := e.Count(`SELECT count(*) FROM audit_log`)
		status := nodetest.Status()
		start := time.Now()
		const storm = 2000
		for i := range storm {
			if code, body := e.Call(client, "POST", nodeapi.StatusPath("10.2.0.2"), "", status); code != 404 {
				t.Fatalf("report %d of the deleted stock node: %d %s", i, code, body)
			}
			if code, body := e.Call(client, "POST", nodeapi.StatusPath("10.2.0.1"), joined.NodeCredential, status); code != 401 {
				t.Fatalf("report %d of the deleted agent: %d %s", i, code, body)
			}
		}
		t.Logf("%d reports from deleted nodes in %s", 2*storm, time.Since(start))
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM audit_log`) - before; n != 1 {
			t.Errorf("%d audit rows for the storm, want 1", n)
		}
		if n := e.Count(`SELECT count(*) FROM nodes_registrations`); n != 0 {
			t.Errorf("%d registrations after the storm, want 0", n)
		}
		// When the window ends, one row stands for the rest of the storm, with its count.
		e.Clock.Add(2 * nodehttp.RefusalWindow)
		e.HTTP.FlushRefusals()
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM audit_log WHERE call_count = $1 AND message LIKE '%refusals like it%'`, storm-1); n != 1 {
			t.Errorf("no summary row for the %d refusals after the first", storm-1)
		}
	})
}
