package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/iam"
)

// from returns an HTTP client whose connections come from the loopback address src, so tests
// can play nodes on different addresses (127.0.0.0/8 is all loopback on Linux).
func from(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 5 * time.Second}
}

// call sends a request from client with a bearer token ("" for none).
func (e *env) call(client *http.Client, method, path, token string, body []byte) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

const (
	registerPath = "/internal/v1/node-agent/nodes/register"
	adminKey     = "cfk_admin-of-the-test"
	readerKey    = "cfk_reader-of-the-test"
)

func statusPath(id string) string { return "/internal/v1/node-agent/nodes/" + id + "/status" }

// fakeKeys resolves the two API keys of the auth test.
func fakeKeys(_ context.Context, token string) (*iam.Principal, error) {
	root := iam.TenantScope(iam.RootTenant)
	switch token {
	case adminKey:
		return &iam.Principal{ID: "svc_admin", TenantID: "root", Grants: []iam.Grant{{Permission: "nodes:*", Scope: root}}}, nil
	case readerKey:
		return &iam.Principal{ID: "svc_reader", TenantID: "root", Grants: []iam.Grant{{Permission: "nodes:list", Scope: root}}}, nil
	}
	return nil, cubefleet.Errorf(cubefleet.CodeUnauthenticated, "unknown API key")
}

// TestAuth: our agent joins with a join token and reports with its node credential; every
// other way in (no token, a wrong token, a used or expired join token, a token from the wrong
// address, another node's credential, a deleted node's credential, unauthenticated calls from
// outside the allowed networks, a stolen join token naming a registered node) is refused and
// audited.
func TestAuth(t *testing.T) {
	allowed := netip.MustParsePrefix("127.0.0.9/32") // stock Cubelets: only from 127.0.0.9
	eachEnv(t, func(c *Config) {
		c.AllowUnauthenticated = []netip.Prefix{allowed}
		c.Authenticate = fakeKeys
	}, func(t *testing.T, e *env) {
		ctx := context.Background()
		a, b, c3, c5, stock := from("127.0.0.1"), from("127.0.0.2"), from("127.0.0.3"), from("127.0.0.5"), from("127.0.0.9")
		status := testdata(t, "status.json")
		audited := 0
		refused := func(what string, gotStatus int, body []byte, wantStatus int, reason string) {
			t.Helper()
			if gotStatus != wantStatus || !bytes.Contains(body, []byte(reason)) {
				t.Errorf("%s: %d %s, want %d with %q", what, gotStatus, body, wantStatus, reason)
			}
			e.flush()
			n := e.count(`SELECT count(*) FROM audit_log WHERE outcome <> 'ok'`)
			if n != audited+1 {
				t.Errorf("%s: %d refusal audit rows, want %d", what, n, audited+1)
			}
			audited = n
		}

		// The join: a single-use token bound to 127.0.0.1.
		join := e.joinToken(JoinTokenInput{IP: "127.0.0.1"})
		code, body := e.call(a, "POST", registerPath, join, withNode(t, "127.0.0.1"))
		if code != 200 {
			t.Fatalf("join: %d %s", code, body)
		}
		var joined struct {
			NodeID     string `json:"node_id"`
			Credential string `json:"node_credential"`
		}
		json.Unmarshal(body, &joined)
		cred := joined.Credential
		if !strings.HasPrefix(cred, CredentialPrefix) || joined.NodeID != "127.0.0.1" {
			t.Fatalf("join answer: %s", body)
		}
		if code, body := e.call(a, "POST", statusPath("127.0.0.1"), cred, status); code != 200 {
			t.Fatalf("status with the credential: %d %s", code, body)
		}
		if code, body := e.call(a, "POST", registerPath, cred, withNode(t, "127.0.0.1")); code != 200 || bytes.Contains(body, []byte("node_credential")) {
			t.Fatalf("register again with the credential: %d %s", code, body)
		}
		v, _ := e.reg.Get(ctx, "127.0.0.1")
		if v.Agent != AgentCubefleet || v.PoolID != testPool.ID || v.Pool != testPool.Name || !v.Schedulable {
			t.Errorf("joined node: %+v", v)
		}
		e.flush()
		if n := e.count(`SELECT count(*) FROM nodes_registrations WHERE credential_hash = $1`, hashSecret(cred)); n != 1 {
			t.Errorf("the credential is not stored hashed")
		}
		if n := e.count(`SELECT count(*) FROM nodes_join_tokens WHERE uses_left = 0 AND ip = '127.0.0.1'`); n != 1 {
			t.Errorf("the join token is not used up")
		}

		// No credentials, from outside the allowed networks.
		code, body = e.call(a, "POST", registerPath, "", withNode(t, "10.1.0.2"))
		refused("register without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		code, body = e.call(b, "POST", statusPath("127.0.0.1"), "", status)
		refused("status without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		code, body = e.call(a, "GET", NodesPrefix, "", nil)
		refused("list without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		code, body = e.call(a, "PUT", NodesPrefix+"/127.0.0.1/isolation", "", nil)
		refused("isolation without a token", code, body, 401, "--node-agent-allow-unauthenticated")
		// Wrong tokens.
		code, body = e.call(a, "POST", registerPath, "cfj_not-a-real-token", withNode(t, "10.1.0.2"))
		refused("register with a wrong join token", code, body, 401, "unknown join token")
		code, body = e.call(a, "POST", statusPath("127.0.0.1"), "cfn_not-a-real-credential", status)
		refused("status with a wrong credential", code, body, 401, "unknown or revoked node credential")
		code, body = e.call(a, "POST", statusPath("127.0.0.1"), "something-else", status)
		refused("status with a token of no known kind", code, body, 401, "unknown kind of token")
		code, body = e.call(a, "POST", statusPath("127.0.0.1"), join, status)
		refused("status with a join token", code, body, 401, "node credential")
		// A used join token.
		code, body = e.call(a, "POST", registerPath, join, withNode(t, "10.1.0.2"))
		refused("register with a used join token", code, body, 401, "already used")
		// An expired join token.
		expiring := e.joinToken(JoinTokenInput{TTL: time.Minute, AnyIP: true})
		e.clock.Add(2 * time.Minute)
		code, body = e.call(a, "POST", registerPath, expiring, withNode(t, "10.1.0.2"))
		refused("register with an expired join token", code, body, 401, "expired")
		// A join token from the wrong address: bound by --ip, and bound by its first use.
		elsewhere := e.joinToken(JoinTokenInput{IP: "10.9.9.9"})
		code, body = e.call(a, "POST", registerPath, elsewhere, withNode(t, "10.1.0.2"))
		refused("register from an address the token is not bound to", code, body, 401, "bound to another address")
		twice := e.joinToken(JoinTokenInput{Uses: 2})
		if code, body := e.call(c3, "POST", registerPath, twice, withNode(t, "127.0.0.3")); code != 200 {
			t.Fatalf("first use of an unbound token: %d %s", code, body)
		}
		code, body = e.call(b, "POST", registerPath, twice, withNode(t, "10.1.0.4"))
		refused("second use from another address", code, body, 401, "bound to another address")
		// A stolen join token cannot take over a registered node.
		stolen := e.joinToken(JoinTokenInput{AnyIP: true})
		code, body = e.call(b, "POST", registerPath, stolen, withNode(t, "127.0.0.1"))
		refused("a join token naming a registered node", code, body, 409, "cannot take over")
		// Another node's credential.
		var third struct {
			Credential string `json:"node_credential"`
		}
		_, body = e.call(c5, "POST", registerPath, e.joinToken(JoinTokenInput{IP: "127.0.0.5"}), withNode(t, "127.0.0.5"))
		json.Unmarshal(body, &third)
		code, body = e.call(a, "POST", statusPath("127.0.0.1"), third.Credential, status)
		refused("status with another node's credential", code, body, 401, "belongs to another node")
		code, body = e.call(a, "POST", registerPath, third.Credential, withNode(t, "127.0.0.1"))
		refused("register with another node's credential", code, body, 401, "belongs to another node")
		// An allowed network cannot report for a node that has a credential.
		code, body = e.call(stock, "POST", statusPath("127.0.0.1"), "", status)
		refused("unauthenticated status for a credentialed node", code, body, 401, "authenticates with its node credential")
		code, body = e.call(stock, "POST", registerPath, "", withNode(t, "127.0.0.1"))
		refused("unauthenticated register of a credentialed node", code, body, 401, "authenticates with its node credential")
		// API keys on the internal routes need the permission; a node credential reads and
		// isolates only its own node and never deletes.
		if code, body := e.call(a, "GET", NodesPrefix, readerKey, nil); code != 200 || !bytes.Contains(body, []byte(`"IP":"127.0.0.1"`)) {
			t.Errorf("list with nodes:list: %d %s", code, body)
		}
		code, body = e.call(a, "PUT", NodesPrefix+"/127.0.0.1/isolation", readerKey, nil)
		refused("isolation without nodes:cordon", code, body, 403, "lacks nodes:cordon")
		code, body = e.call(a, "GET", NodesPrefix+"/127.0.0.5", cred, nil)
		refused("a node reading another node", code, body, 401, "belongs to another node")
		if code, body := e.call(a, "GET", NodesPrefix+"/127.0.0.1", cred, nil); code != 200 || !bytes.Contains(body, []byte(`"IP":"127.0.0.1"`)) {
			t.Errorf("a node reading itself: %d %s", code, body)
		}
		if code, body := e.call(a, "PUT", NodesPrefix+"/127.0.0.1/isolation", cred, []byte(`{"detail":"draining myself"}`)); code != 200 {
			t.Errorf("a node cordoning itself: %d %s", code, body)
		}
		code, body = e.call(a, "DELETE", NodesPrefix+"/127.0.0.1?force=true", cred, nil)
		refused("a node deleting itself", code, body, 403, "cannot delete")
		// The admin key deletes it; its credential is refused from then on, and the agent
		// cannot come back without a new join token.
		if code, body := e.call(a, "DELETE", NodesPrefix+"/127.0.0.1?force=true", adminKey, nil); code != 200 {
			t.Fatalf("delete: %d %s", code, body)
		}
		code, body = e.call(a, "POST", statusPath("127.0.0.1"), cred, status)
		refused("status with a deleted node's credential", code, body, 401, "unknown or revoked")
		code, body = e.call(a, "POST", registerPath, cred, withNode(t, "127.0.0.1"))
		refused("register with a deleted node's credential", code, body, 401, "unknown or revoked")
		rejoin := e.joinToken(JoinTokenInput{IP: "127.0.0.1"})
		if code, body := e.call(a, "POST", registerPath, rejoin, withNode(t, "127.0.0.1")); code != 200 {
			t.Errorf("rejoin with a new token: %d %s", code, body)
		}
		// Stock Cubelets from the allowed network work, and never see a credential.
		if code, body := e.call(stock, "POST", registerPath, "", withNode(t, "10.1.0.9")); code != 200 || bytes.Contains(body, []byte("node_credential")) {
			t.Errorf("stock register: %d %s", code, body)
		}
		if code, body := e.call(stock, "POST", statusPath("10.1.0.9"), "", status); code != 200 {
			t.Errorf("stock status: %d %s", code, body)
		}
		v, _ = e.reg.Get(ctx, "10.1.0.9")
		if v.Agent != AgentCubelet || !v.RegistryOnly || v.Schedulable || v.Pool != testPool.Name {
			t.Errorf("stock node: %+v", v)
		}
		// The audit rows carry what was refused and from where, never a secret.
		e.flush()
		rows, err := e.db.Query(`SELECT method, principal_id, outcome, target, message FROM audit_log`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var method, principal, outcome, target, msg string
			rows.Scan(&method, &principal, &outcome, &target, &msg)
			for _, secret := range []string{cred, join, third.Credential, stolen, twice} {
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
	eachEnv(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		client := &http.Client{Timeout: 2 * time.Second}
		join := e.joinToken(JoinTokenInput{AnyIP: true})
		_, body := e.call(client, "POST", registerPath, join, withNode(t, "10.2.0.1"))
		var joined struct {
			Credential string `json:"node_credential"`
		}
		json.Unmarshal(body, &joined)
		if code, _ := e.call(client, "POST", registerPath, "", withNode(t, "10.2.0.2")); code != 200 {
			t.Fatal("stock register")
		}
		for _, id := range []string{"10.2.0.1", "10.2.0.2"} {
			if _, err := e.reg.Cordon(ctx, id, "", "test"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.reg.Delete(ctx, id, true, "test"); err != nil {
				t.Fatal(err)
			}
		}
		e.flush()
		before := e.count(`SELECT count(*) FROM audit_log`)
		status := testdata(t, "status.json")
		start := time.Now()
		const storm = 2000
		for i := range storm {
			if code, body := e.call(client, "POST", statusPath("10.2.0.2"), "", status); code != 404 {
				t.Fatalf("report %d of the deleted stock node: %d %s", i, code, body)
			}
			if code, body := e.call(client, "POST", statusPath("10.2.0.1"), joined.Credential, status); code != 401 {
				t.Fatalf("report %d of the deleted agent: %d %s", i, code, body)
			}
		}
		t.Logf("%d reports from deleted nodes in %s", 2*storm, time.Since(start))
		e.flush()
		if n := e.count(`SELECT count(*) FROM audit_log`) - before; n != 1 {
			t.Errorf("%d audit rows for the storm, want 1", n)
		}
		if n := e.count(`SELECT count(*) FROM nodes_registrations`); n != 0 {
			t.Errorf("%d registrations after the storm, want 0", n)
		}
		// The next window summarizes what the previous one suppressed.
		e.clock.Add(2 * refusalWindow)
		e.call(client, "POST", statusPath("10.2.0.1"), joined.Credential, status)
		e.flush()
		if n := e.count(`SELECT count(*) FROM audit_log WHERE message LIKE '%identical refusals%'`); n != 1 {
			t.Errorf("no summary row for the suppressed refusals")
		}
	})
}
