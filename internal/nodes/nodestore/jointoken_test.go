package nodestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestCreateJoinTokenRules: nodes.joinTokens.create refuses an --ip no node can have
// (unspecified, multicast, broadcast), naming the field, and stores none.
func TestCreateJoinTokenRules(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		for _, ip := range []string{"0.0.0.0", "224.0.0.1", "::", "255.255.255.255", "not an ip"} {
			_, _, err := e.Store.CreateJoinToken(context.Background(), e.DB, nodes.JoinTokenInput{Pool: nodetest.Pool.Name, IP: ip}, "test")
			var ce *cubefleet.Error
			if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput || ce.Details["path"] != "ip" {
				t.Errorf("ip %q: %v, want INVALID_INPUT at ip", ip, err)
			}
		}
		if n := e.Count(`SELECT count(*) FROM nodes_join_tokens`); n != 0 {
			t.Errorf("%d join tokens stored", n)
		}
	})
}

// TestJoinTokenBindsOnlyOnSuccess: a token without --ip binds itself to the address of its
// first registration that succeeds: a first attempt refused with 409 (it names a registered
// node) or 400 (a label rule) leaves it unbound and unused, and the node at another address
// then joins with it; that one binds it, in memory and in the database.
func TestJoinTokenBindsOnlyOnSuccess(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		b, c := nodetest.From("127.0.0.2"), nodetest.From("127.0.0.3")
		if code, out := e.Call(b, "POST", nodeapi.PathRegister, "", nodetest.WithNode("127.0.0.2")); code != 200 { // a stock Cubelet
			t.Fatalf("stock register: %d %s", code, out)
		}
		token := e.JoinToken(nodes.JoinTokenInput{})
		if code, out := e.Call(b, "POST", nodeapi.PathRegister, token, nodetest.WithNode("127.0.0.2")); code != http.StatusConflict {
			t.Fatalf("join naming a registered node: %d %s, want 409", code, out)
		}
		if code, out := e.Call(nodetest.From("127.0.0.5"), "POST", nodeapi.PathRegister, token, nodetest.Patch(t, nodetest.WithNode("127.0.0.5"), "labels.bad key", "x")); code != http.StatusBadRequest {
			t.Fatalf("join breaking a label rule: %d %s, want 400", code, out)
		}
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM nodes_join_tokens WHERE ip = '' AND uses_left = 1`); n != 1 {
			t.Errorf("refused first attempts bound or used the token")
		}
		if code, out := e.Call(c, "POST", nodeapi.PathRegister, token, nodetest.WithNode("127.0.0.3")); code != 200 {
			t.Fatalf("join from another address after refused attempts: %d %s, want 200", code, out)
		}
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM nodes_join_tokens WHERE ip = '127.0.0.3' AND uses_left = 0`); n != 1 {
			t.Errorf("the successful join did not bind and use the token")
		}
	})
}

// TestJoinTokenRevoke: a revoked join token is refused on every replica, also on one whose
// ledger cached the token by an earlier use (401 "was revoked", its own reason); revoking is
// idempotent; the list shows usable tokens by default and every one with all, with their
// states, and never a token or its hash.
func TestJoinTokenRevoke(t *testing.T) {
	storetest.Each(t, nodetest.Modules, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a := nodetest.MustEnv(t, db, func(c *nodetest.Config) { c.Store.Holder = "replica-a" })
		b := nodetest.Start(t, db, a.Clock, func() nodetest.Config { c := a.Cfg; c.Store.Holder = "replica-b"; return c }())
		a.T, b.T = t, t
		secret := a.JoinToken(nodes.JoinTokenInput{Uses: 3, AnyIP: true})
		if code, out := a.Call(nodetest.From("127.0.0.1"), "POST", nodeapi.PathRegister, secret, nodetest.WithNode("127.0.0.1")); code != 200 {
			t.Fatalf("join on a: %d %s", code, out)
		}
		list, err := a.Store.ListJoinTokens(ctx, db, false)
		if err != nil || len(list) != 1 || list[0].UsesLeft != 2 || list[0].Uses != 3 || list[0].State != nodes.JoinTokenUsable || !list[0].AnyIP ||
			list[0].Pool != nodetest.Pool.Name || !strings.HasPrefix(secret, list[0].Prefix) {
			t.Fatalf("list: %+v %v", list, err)
		}
		id := list[0].ID
		raw, _ := json.Marshal(list)
		if strings.Contains(string(raw), secret) || strings.Contains(string(raw), nodes.HashToken(secret)) || strings.Contains(string(raw), `"hash"`) {
			t.Errorf("the list holds a secret: %s", raw)
		}

		// Revoked on b; a's ledger holds the token from the join above.
		rev, err := b.Store.RevokeJoinToken(ctx, db, id, "svc_revoker")
		if err != nil || rev.State != nodes.JoinTokenRevoked || rev.RevokedBy != "svc_revoker" || rev.RevokedAt == 0 {
			t.Fatalf("revoke: %+v %v", rev, err)
		}
		for name, e := range map[string]*nodetest.Env{"a (stale ledger)": a, "b": b} {
			code, out := e.Call(nodetest.From("127.0.0.2"), "POST", nodeapi.PathRegister, secret, nodetest.WithNode("127.0.0.2"))
			if code != http.StatusUnauthorized || !strings.Contains(string(out), "join token "+id+" was revoked") {
				t.Errorf("join on %s with the revoked token: %d %s, want 401 was revoked", name, code, out)
			}
		}
		a.Flush()
		if n := a.Count(`SELECT count(*) FROM audit_log WHERE outcome = 'unauthenticated' AND message LIKE '%was revoked%'`); n != 1 {
			t.Errorf("%d audit rows for the refused join on a, want 1", n)
		}
		// Idempotent: the first revocation stands.
		a.Clock.Add(time.Minute)
		again, err := a.Store.RevokeJoinToken(ctx, db, id, "svc_other")
		if err != nil || again.RevokedAt != rev.RevokedAt || again.RevokedBy != "svc_revoker" {
			t.Errorf("revoke again: %+v %v", again, err)
		}
		if _, err := a.Store.RevokeJoinToken(ctx, db, "jtk_01NOSUCHTOKEN0000000000000", "x"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("revoke unknown: %v", err)
		}
		if _, err := a.Store.RevokeJoinToken(ctx, db, "", "x"); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Errorf("revoke without id: %v", err)
		}

		// Used and expired tokens; the default list shows only the usable one.
		once := a.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.3"})
		if code, out := a.Call(nodetest.From("127.0.0.3"), "POST", nodeapi.PathRegister, once, nodetest.WithNode("127.0.0.3")); code != 200 {
			t.Fatalf("join: %d %s", code, out)
		}
		a.JoinToken(nodes.JoinTokenInput{TTL: time.Minute, AnyIP: true})
		a.Clock.Add(2 * time.Minute)
		a.JoinToken(nodes.JoinTokenInput{})
		states := func(all bool) []nodes.JoinTokenState {
			t.Helper()
			list, err := a.Store.ListJoinTokens(ctx, db, all)
			if err != nil {
				t.Fatal(err)
			}
			var out []nodes.JoinTokenState
			for _, tok := range list {
				out = append(out, tok.State)
			}
			return out
		}
		if got, want := states(false), []nodes.JoinTokenState{nodes.JoinTokenUsable}; !slices.Equal(got, want) {
			t.Errorf("list: %v, want %v", got, want)
		}
		if got, want := states(true), []nodes.JoinTokenState{nodes.JoinTokenRevoked, nodes.JoinTokenUsed, nodes.JoinTokenExpired, nodes.JoinTokenUsable}; !slices.Equal(got, want) {
			t.Errorf("list all: %v, want %v", got, want)
		}
	})
}
