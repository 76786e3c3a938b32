package nodes

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
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestParseJoinTokenIP: a join token's --ip is an address a node can have.
func TestParseJoinTokenIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.5": "10.0.0.5", "127.0.0.1": "127.0.0.1", "fd00::5": "fd00::5", "::ffff:10.0.0.5": "10.0.0.5",
		"0.0.0.0":         `"0.0.0.0" is the unspecified address, not a node's`,
		"::":              `"::" is the unspecified address, not a node's`,
		"224.0.0.1":       `"224.0.0.1" is a multicast address, not a node's`,
		"239.255.0.9":     "a multicast address",
		"ff02::1":         "a multicast address",
		"255.255.255.255": "the broadcast address",
		"fe80::1%eth0":    "an address with a zone",
		"not-an-ip":       `"not-an-ip" is not an IP address`,
		"10.0.0.0/24":     "is not an IP address",
		"":                "is not an IP address",
	} {
		a, err := ParseJoinTokenIP(in)
		got := a.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) || err == nil && got != want {
			t.Errorf("ParseJoinTokenIP(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCreateJoinTokenRules: nodes.joinTokens.create refuses an --ip no node can have
// (unspecified, multicast, broadcast), naming the field, and stores none.
func TestCreateJoinTokenRules(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		for _, ip := range []string{"0.0.0.0", "224.0.0.1", "::", "255.255.255.255", "not an ip"} {
			_, _, err := e.reg.CreateJoinToken(context.Background(), e.db, JoinTokenInput{Pool: testPool.Name, IP: ip}, "test")
			var ce *cubefleet.Error
			if !errors.As(err, &ce) || ce.Code != cubefleet.CodeInvalidInput || ce.Details["path"] != "ip" {
				t.Errorf("ip %q: %v, want INVALID_INPUT at ip", ip, err)
			}
		}
		if n := e.count(`SELECT count(*) FROM nodes_join_tokens`); n != 0 {
			t.Errorf("%d join tokens stored", n)
		}
	})
}

// TestJoinTokenBindsOnlyOnSuccess: a token without --ip binds itself to the address of its
// first registration that succeeds: a first attempt refused with 409 (it names a registered
// node) or 400 (a label rule) leaves it unbound and unused, and the node at another address
// then joins with it; that one binds it, in memory and in the database.
func TestJoinTokenBindsOnlyOnSuccess(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		b, c := from("127.0.0.2"), from("127.0.0.3")
		if code, out := e.call(b, "POST", registerPath, "", withNode(t, "127.0.0.2")); code != 200 { // a stock Cubelet
			t.Fatalf("stock register: %d %s", code, out)
		}
		token := e.joinToken(JoinTokenInput{})
		if code, out := e.call(b, "POST", registerPath, token, withNode(t, "127.0.0.2")); code != http.StatusConflict {
			t.Fatalf("join naming a registered node: %d %s, want 409", code, out)
		}
		if code, out := e.call(from("127.0.0.5"), "POST", registerPath, token, patch(t, withNode(t, "127.0.0.5"), "labels.bad key", "x")); code != http.StatusBadRequest {
			t.Fatalf("join breaking a label rule: %d %s, want 400", code, out)
		}
		e.flush()
		if n := e.count(`SELECT count(*) FROM nodes_join_tokens WHERE ip = '' AND uses_left = 1`); n != 1 {
			t.Errorf("refused first attempts bound or used the token")
		}
		if code, out := e.call(c, "POST", registerPath, token, withNode(t, "127.0.0.3")); code != 200 {
			t.Fatalf("join from another address after refused attempts: %d %s, want 200", code, out)
		}
		e.flush()
		if n := e.count(`SELECT count(*) FROM nodes_join_tokens WHERE ip = '127.0.0.3' AND uses_left = 0`); n != 1 {
			t.Errorf("the successful join did not bind and use the token")
		}
	})
}

// TestJoinTokenRevoke: a revoked join token is refused on every replica, also on one whose
// ledger cached the token by an earlier use (401 "was revoked", its own reason); revoking is
// idempotent; the list shows usable tokens by default and every one with all, with their
// states, and never a token or its hash.
func TestJoinTokenRevoke(t *testing.T) {
	storetest.Each(t, modules, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a := mustEnv(t, db, func(c *Config) { c.Holder = "replica-a" })
		b := start(t, db, a.clock, func() Config { c := a.cfg; c.Holder = "replica-b"; return c }())
		a.t, b.t = t, t
		secret := a.joinToken(JoinTokenInput{Uses: 3, AnyIP: true})
		if code, out := a.call(from("127.0.0.1"), "POST", registerPath, secret, withNode(t, "127.0.0.1")); code != 200 {
			t.Fatalf("join on a: %d %s", code, out)
		}
		list, err := a.reg.ListJoinTokens(ctx, db, false)
		if err != nil || len(list) != 1 || list[0].UsesLeft != 2 || list[0].Uses != 3 || list[0].State != JoinTokenUsable || !list[0].AnyIP ||
			list[0].Pool != testPool.Name || !strings.HasPrefix(secret, list[0].Prefix) {
			t.Fatalf("list: %+v %v", list, err)
		}
		id := list[0].ID
		raw, _ := json.Marshal(list)
		if strings.Contains(string(raw), secret) || strings.Contains(string(raw), hashSecret(secret)) || strings.Contains(string(raw), `"hash"`) {
			t.Errorf("the list holds a secret: %s", raw)
		}

		// Revoked on b; a's ledger holds the token from the join above.
		rev, err := b.reg.RevokeJoinToken(ctx, db, id, "svc_revoker")
		if err != nil || rev.State != JoinTokenRevoked || rev.RevokedBy != "svc_revoker" || rev.RevokedAt == 0 {
			t.Fatalf("revoke: %+v %v", rev, err)
		}
		for name, e := range map[string]*env{"a (stale ledger)": a, "b": b} {
			code, out := e.call(from("127.0.0.2"), "POST", registerPath, secret, withNode(t, "127.0.0.2"))
			if code != http.StatusUnauthorized || !strings.Contains(string(out), "join token "+id+" was revoked") {
				t.Errorf("join on %s with the revoked token: %d %s, want 401 was revoked", name, code, out)
			}
		}
		a.flush()
		if n := a.count(`SELECT count(*) FROM audit_log WHERE outcome = 'unauthenticated' AND message LIKE '%was revoked%'`); n != 1 {
			t.Errorf("%d audit rows for the refused join on a, want 1", n)
		}
		// Idempotent: the first revocation stands.
		a.clock.Add(time.Minute)
		again, err := a.reg.RevokeJoinToken(ctx, db, id, "svc_other")
		if err != nil || again.RevokedAt != rev.RevokedAt || again.RevokedBy != "svc_revoker" {
			t.Errorf("revoke again: %+v %v", again, err)
		}
		if _, err := a.reg.RevokeJoinToken(ctx, db, "jtk_01NOSUCHTOKEN0000000000000", "x"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("revoke unknown: %v", err)
		}
		if _, err := a.reg.RevokeJoinToken(ctx, db, "", "x"); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Errorf("revoke without id: %v", err)
		}

		// Used and expired tokens; the default list shows only the usable one.
		once := a.joinToken(JoinTokenInput{IP: "127.0.0.3"})
		if code, out := a.call(from("127.0.0.3"), "POST", registerPath, once, withNode(t, "127.0.0.3")); code != 200 {
			t.Fatalf("join: %d %s", code, out)
		}
		a.joinToken(JoinTokenInput{TTL: time.Minute, AnyIP: true})
		a.clock.Add(2 * time.Minute)
		a.joinToken(JoinTokenInput{})
		states := func(all bool) []JoinTokenState {
			t.Helper()
			list, err := a.reg.ListJoinTokens(ctx, db, all)
			if err != nil {
				t.Fatal(err)
			}
			var out []JoinTokenState
			for _, tok := range list {
				out = append(out, tok.State)
			}
			return out
		}
		if got, want := states(false), []JoinTokenState{JoinTokenUsable}; !slices.Equal(got, want) {
			t.Errorf("list: %v, want %v", got, want)
		}
		if got, want := states(true), []JoinTokenState{JoinTokenRevoked, JoinTokenUsed, JoinTokenExpired, JoinTokenUsable}; !slices.Equal(got, want) {
			t.Errorf("list all: %v, want %v", got, want)
		}
	})
}

// TestJoinTokenStatus is the state rule: revoked wins, then expired, then used.
func TestJoinTokenStatus(t *testing.T) {
	for _, c := range []struct {
		now, expires, revoked int64
		left                  int
		want                  JoinTokenState
	}{
		{10, 20, 0, 1, JoinTokenUsable},
		{10, 20, 0, 0, JoinTokenUsed},
		{20, 20, 0, 1, JoinTokenExpired},
		{30, 20, 0, 0, JoinTokenExpired},
		{10, 20, 5, 1, JoinTokenRevoked},
		{30, 20, 5, 0, JoinTokenRevoked},
	} {
		if got := JoinTokenStatus(c.now, c.expires, c.revoked, c.left); got != c.want {
			t.Errorf("JoinTokenStatus(%d, %d, %d, %d) = %s, want %s", c.now, c.expires, c.revoked, c.left, got, c.want)
		}
	}
}
