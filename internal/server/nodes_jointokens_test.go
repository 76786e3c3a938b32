package server

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestJoinTokenCreateRules: nodes.joinTokens.create takes uses 1 to 10,000 (absent means 1; an
// explicit 0 is refused, not turned into 1), a ttlSeconds of at most 7 days, and an ip a node
// can have; every refusal is INVALID_INPUT naming the field.
func TestJoinTokenCreateRules(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, allowLoopback)
		e.makePool("fra-cubes")
		for _, c := range []struct {
			in   map[string]any
			path string
			msg  string
		}{
			{map[string]any{"uses": 0}, "uses", "uses must be 1 to 10000 (got 0)"},
			{map[string]any{"uses": -1}, "uses", "uses must be 1 to 10000"},
			{map[string]any{"uses": 10001}, "uses", "uses must be 1 to 10000"},
			{map[string]any{"ttlSeconds": 604801}, "ttlSeconds", "ttlSeconds is 1 to 604800"},
			{map[string]any{"ip": "0.0.0.0"}, "ip", "the unspecified address"},
			{map[string]any{"ip": "224.0.0.1"}, "ip", "a multicast address"},
			{map[string]any{"ip": "255.255.255.255"}, "ip", "the broadcast address"},
		} {
			c.in["pool"] = "fra-cubes"
			ce := e.mustFail(e.admin, "nodes.joinTokens.create", c.in, cubefleet.CodeInvalidInput)
			if ce.Details["path"] != c.path || !strings.Contains(ce.Message, c.msg) {
				t.Errorf("%v: %s at %v, want %q at %s", c.in, ce.Message, ce.Details["path"], c.msg, c.path)
			}
		}
		var jt contract.JoinTokenCreated
		e.must(e.admin, "nodes.joinTokens.create", map[string]any{"pool": "fra-cubes"}, &jt)
		if jt.JoinToken.Uses != 1 {
			t.Errorf("uses absent: %d, want 1", jt.JoinToken.Uses)
		}
	})
}

// TestJoinTokensListRevoke drives nodes.joinTokens.list and nodes.joinTokens.revoke: a key
// without nodes:join-token (even one holding every other nodes permission) is refused FORBIDDEN
// and audited; the list never holds a token or its hash; revoke is audited like create, and a
// join with the revoked token is then refused 401 with its own message; a key holding only
// nodes:join-token lists and revokes.
func TestJoinTokensListRevoke(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, allowLoopback)
		e.makePool("fra-cubes")
		var jt contract.JoinTokenCreated
		e.must(e.admin, "nodes.joinTokens.create", map[string]any{"pool": "fra-cubes", "ip": "127.0.0.1"}, &jt)

		other, otherID := e.key("root", "operator", "nodes:list@tenant/root", "nodes:get@tenant/root", "nodes:cordon@tenant/root",
			"nodes:delete@tenant/root", "nodes:drain@tenant/root")
		for method, in := range map[string]any{"nodes.joinTokens.list": map[string]any{}, "nodes.joinTokens.revoke": map[string]any{"id": jt.JoinToken.ID}} {
			ce := e.mustFail(other, method, in, cubefleet.CodeForbidden)
			if !strings.Contains(ce.Message, "nodes:join-token") {
				t.Errorf("%s without the grant: %s", method, ce.Message)
			}
			var n int
			db.QueryRow(`SELECT count(*) FROM audit_log WHERE method = $1 AND outcome = 'forbidden' AND principal_id = $2 AND permission = 'nodes:join-token'`,
				method, otherID).Scan(&n)
			if n != 1 {
				t.Errorf("%d forbidden audit rows for %s, want 1", n, method)
			}
		}

		tokens, _ := e.key("root", "tokens", "nodes:join-token@tenant/root")
		code, raw := e.post(tokens, "nodes.joinTokens.list", map[string]any{})
		if code != 200 || !strings.Contains(string(raw), jt.JoinToken.ID) || !strings.Contains(string(raw), `"prefix":"`+jt.JoinToken.Prefix+`"`) ||
			!strings.Contains(string(raw), `"usesLeft":1`) || !strings.Contains(string(raw), `"state":"usable"`) {
			t.Fatalf("list: %d %s", code, raw)
		}
		sum := sha256.Sum256([]byte(jt.Token))
		if strings.Contains(string(raw), jt.Token) || strings.Contains(string(raw), hex.EncodeToString(sum[:])) {
			t.Errorf("the list holds the token or its hash: %s", raw)
		}

		var rev contract.JoinTokenOutput
		e.must(tokens, "nodes.joinTokens.revoke", map[string]any{"id": jt.JoinToken.ID}, &rev)
		if rev.JoinToken.State != "revoked" || rev.JoinToken.RevokedAt == 0 || rev.JoinToken.RevokedBy == "" {
			t.Errorf("revoke: %+v", rev.JoinToken)
		}
		e.must(tokens, "nodes.joinTokens.revoke", map[string]any{"id": jt.JoinToken.ID}, nil) // idempotent
		e.mustFail(tokens, "nodes.joinTokens.revoke", map[string]any{"id": "jtk_01NOSUCHTOKEN0000000000000"}, cubefleet.CodeNotFound)
		var n int
		db.QueryRow(`SELECT count(*) FROM audit_log WHERE method = 'nodes.joinTokens.revoke' AND outcome = 'ok' AND target = $1`, jt.JoinToken.ID).Scan(&n)
		if n != 2 {
			t.Errorf("%d ok audit rows for the revocations, want 2", n)
		}

		code, _, out := nodeCall(t, "POST", e.srv.InternalURL()+nodeapi.PathRegister, jt.Token, registerBody(t, "127.0.0.1", "x"))
		if code != 401 || !strings.Contains(string(out), "was revoked") {
			t.Errorf("join with the revoked token: %d %s", code, out)
		}
		var list contract.JoinTokenList
		e.must(tokens, "nodes.joinTokens.list", map[string]any{}, &list)
		if len(list.Items) != 0 {
			t.Errorf("the default list shows a revoked token: %+v", list.Items)
		}
		e.must(tokens, "nodes.joinTokens.list", map[string]any{"all": true}, &list)
		if len(list.Items) != 1 || list.Items[0].State != "revoked" || list.Now == 0 {
			t.Errorf("list all: %+v", list)
		}
		if strings.Contains(e.log.String(), jt.Token) {
			t.Error("the token reached the log")
		}
	})
}
