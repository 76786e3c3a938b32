package nodehttp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// regBody is the golden register body for node_id id and host_ip host ("" leaves it out).
func regBody(t *testing.T, id, host string) []byte {
	t.Helper()
	b := nodetest.Patch(t, nodetest.Register(), "node_id", id)
	if host == "" {
		return nodetest.Patch(t, b, "host_ip", nil)
	}
	return nodetest.Patch(t, b, "host_ip", host)
}

// TestJoinIdentity: a join token bound to an address (by --ip, or by its first use) registers
// that address only: a registration naming another host_ip, or a node_id that is not that
// address (another address, or a name), is 403 and audited, and takes no use of the token; a token accepted from any
// address registers any; a node credential cannot move its node to another host_ip; host_ip
// must be an IP address on every registration, stock Cubelets included.
func TestJoinIdentity(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		a, d := nodetest.From("127.0.0.1"), nodetest.From("127.0.0.4")
		forbidden := 0
		refused := func(what string, code int, body []byte, want string) {
			t.Helper()
			if code != http.StatusForbidden || !strings.Contains(string(body), want) || !strings.Contains(string(body), `"code":"FORBIDDEN"`) {
				t.Errorf("%s: %d %s, want 403 saying %q", what, code, body, want)
			}
			e.Flush()
			if n := e.Count(`SELECT count(*) FROM audit_log WHERE outcome = 'forbidden' AND method = 'node-agent.register'`); n != forbidden+1 {
				t.Errorf("%s: %d forbidden audit rows, want %d", what, n, forbidden+1)
			} else {
				forbidden = n
			}
			e.Clock.Add(2 * nodehttp.RefusalWindow) // identical refusals within a window are one audit row
		}

		// The user's report: a token for 127.0.0.1 registered node 10.9.9.9 at 8.8.8.8.
		bound := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1", Uses: 2})
		code, body := e.Call(a, "POST", nodeapi.PathRegister, bound, regBody(t, "10.9.9.9", "8.8.8.8"))
		refused("another node_id and host_ip", code, body, "is bound to 127.0.0.1, so it registers only that address, not host_ip 8.8.8.8")
		code, body = e.Call(a, "POST", nodeapi.PathRegister, bound, regBody(t, "10.9.9.9", "127.0.0.1"))
		refused("another node_id", code, body, "not node_id 10.9.9.9")
		code, body = e.Call(a, "POST", nodeapi.PathRegister, bound, regBody(t, "127.0.0.1", "8.8.8.8"))
		refused("another host_ip", code, body, "not host_ip 8.8.8.8")
		code, body = e.Call(a, "POST", nodeapi.PathRegister, bound, regBody(t, "10.9.9.9", "not an ip"))
		if code != http.StatusBadRequest || !strings.Contains(string(body), `host_ip must be an IP address`) {
			t.Errorf("host_ip not an IP: %d %s", code, body)
		}
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM nodes_registrations`); n != 0 {
			t.Fatalf("refused joins registered %d nodes", n)
		}
		// None of that took a use: both are left for the node's own address (node_id
		// 127.0.0.1, host_ip absent or the same).
		code, body = e.Call(a, "POST", nodeapi.PathRegister, bound, regBody(t, "127.0.0.1", ""))
		if code != 200 {
			t.Fatalf("join with the bound address: %d %s", code, body)
		}
		var joined nodeapi.RegisterResponse
		json.Unmarshal(body, &joined)
		// A name as node_id at the bound address would be a second node at one address.
		code, body = e.Call(a, "POST", nodeapi.PathRegister, bound, regBody(t, "cube-a", "127.0.0.1"))
		refused("a name as node_id at the bound address", code, body, "not node_id cube-a")

		// A token bound by its first use: the first use must name the address it comes from,
		// and a refused one leaves it unbound.
		first := e.JoinToken(nodes.JoinTokenInput{})
		code, body = e.Call(d, "POST", nodeapi.PathRegister, first, regBody(t, "10.9.9.9", "10.9.9.9"))
		refused("first use naming another address", code, body, "binds itself to the address of its first use, 127.0.0.4")
		if code, body := e.Call(d, "POST", nodeapi.PathRegister, first, regBody(t, "127.0.0.4", "127.0.0.4")); code != 200 {
			t.Errorf("first use naming its own address: %d %s", code, body)
		}

		// --any-ip: any address, from anywhere.
		anyIP := e.JoinToken(nodes.JoinTokenInput{AnyIP: true})
		if code, body := e.Call(a, "POST", nodeapi.PathRegister, anyIP, regBody(t, "10.9.9.9", "10.9.9.9")); code != 200 {
			t.Errorf("any-ip token: %d %s", code, body)
		}

		// The node credential keeps its node's address.
		code, body = e.Call(a, "POST", nodeapi.PathRegister, joined.NodeCredential, regBody(t, "127.0.0.1", "8.8.8.8"))
		if code != http.StatusForbidden || !strings.Contains(string(body), "cannot register it with host_ip 8.8.8.8") {
			t.Errorf("credential moving its node: %d %s", code, body)
		}
		if code, body := e.Call(a, "POST", nodeapi.PathRegister, joined.NodeCredential, regBody(t, "127.0.0.1", "127.0.0.1")); code != 200 {
			t.Errorf("credential registering again at its address: %d %s", code, body)
		}
		if v, _ := e.Reg.Get(t.Context(), "127.0.0.1"); v.IP != "127.0.0.1" {
			t.Errorf("node 127.0.0.1 has IP %s", v.IP)
		}

		// Stock Cubelets: host_ip must be an IP address (it defaults to node_id).
		for _, c := range []struct{ id, host, want string }{
			{"10.0.0.7", "not an ip", `host_ip must be an IP address: host_ip is \"not an ip\"`},
			{"cube-7", "", `node_id (host_ip defaults to it) is \"cube-7\"`},
			{"10.0.0.7", "0.0.0.0", "not the unspecified address"},
			{"10.0.0.7", "224.0.0.1", "not a multicast address"},
		} {
			code, body := e.Call(a, "POST", nodeapi.PathRegister, "", regBody(t, c.id, c.host))
			if code != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
				t.Errorf("stock register node_id %q host_ip %q: %d %s, want 400 saying %s", c.id, c.host, code, body, c.want)
			}
		}
		if code, body := e.Call(a, "POST", nodeapi.PathRegister, "", regBody(t, "10.0.0.7", "")); code != 200 {
			t.Errorf("stock register without host_ip: %d %s", code, body)
		}
	})
}
