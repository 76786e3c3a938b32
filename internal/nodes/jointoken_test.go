package nodes

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
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
		if code, out := e.call(b, "POST", registerPath, token, patch(t, patch(t, withNode(t, "127.0.0.2"), "node_id", "cube-b"), "labels.bad key", "x")); code != http.StatusBadRequest {
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
