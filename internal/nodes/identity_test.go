package nodes

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRegisterAddr: a registration's address is host_ip or, when that is empty, node_id; it
// must be an IP address a node can have, else 400 naming host_ip.
func TestRegisterAddr(t *testing.T) {
	for _, c := range []struct {
		nodeID, hostIP string
		want           string // the address, or the refusal's message
		ok             bool
	}{
		{"10.0.0.7", "10.0.0.7", "10.0.0.7", true},
		{"10.0.0.7", "", "10.0.0.7", true},
		{"cube-7", "10.0.0.7", "10.0.0.7", true},
		{"fd00::7", "", "fd00::7", true},
		{"10.0.0.7", "::ffff:10.0.0.8", "10.0.0.8", true},
		{"10.0.0.7", "127.0.0.1", "127.0.0.1", true},
		{"10.0.0.7", "not an ip", `host_ip must be an IP address: host_ip is "not an ip"`, false},
		{"cube-7", "", `host_ip must be an IP address: node_id (host_ip defaults to it) is "cube-7"`, false},
		{"10.0.0.7", "10.0.0.300", "host_ip must be an IP address", false},
		{"10.0.0.7", "10.0.0.0/24", "host_ip must be an IP address", false},
		{"10.0.0.7", "0.0.0.0", "not the unspecified address", false},
		{"10.0.0.7", "::", "not the unspecified address", false},
		{"10.0.0.7", "224.0.0.1", "not a multicast address", false},
		{"10.0.0.7", "ff02::1", "not a multicast address", false},
		{"10.0.0.7", "255.255.255.255", "not the broadcast address", false},
		{"10.0.0.7", "fe80::1%eth0", "not an address with a zone", false},
	} {
		a, err := registerAddr(&RegisterRequest{NodeID: c.nodeID, HostIP: c.hostIP})
		switch {
		case c.ok && (err != nil || a.String() != c.want):
			t.Errorf("node_id %q host_ip %q: %v %v, want %s", c.nodeID, c.hostIP, a, err, c.want)
		case !c.ok && (err == nil || !strings.Contains(errMessage(err), c.want)):
			t.Errorf("node_id %q host_ip %q: %v %v, want a refusal saying %q", c.nodeID, c.hostIP, a, err, c.want)
		}
		if !c.ok {
			if _, err := DecodeRegister(patch(t, patch(t, testdata(t, "register.json"), "node_id", c.nodeID), "host_ip", c.hostIP)); err == nil {
				t.Errorf("DecodeRegister accepted node_id %q host_ip %q", c.nodeID, c.hostIP)
			}
		}
	}
}

// regBody is the golden register body for node_id id and host_ip host ("" leaves it out).
func regBody(t *testing.T, id, host string) []byte {
	t.Helper()
	b := patch(t, testdata(t, "register.json"), "node_id", id)
	if host == "" {
		return patch(t, b, "host_ip", nil)
	}
	return patch(t, b, "host_ip", host)
}

// TestJoinIdentity: a join token bound to an address (by --ip, or by its first use) registers
// that address only: a registration naming another host_ip, or a node_id that is not that
// address (another address, or a name), is 403 and audited, and takes no use of the token; a token accepted from any
// address registers any; a node credential cannot move its node to another host_ip; host_ip
// must be an IP address on every registration, stock Cubelets included.
func TestJoinIdentity(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		a, d := from("127.0.0.1"), from("127.0.0.4")
		forbidden := 0
		refused := func(what string, code int, body []byte, want string) {
			t.Helper()
			if code != http.StatusForbidden || !strings.Contains(string(body), want) || !strings.Contains(string(body), `"code":"FORBIDDEN"`) {
				t.Errorf("%s: %d %s, want 403 saying %q", what, code, body, want)
			}
			e.flush()
			if n := e.count(`SELECT count(*) FROM audit_log WHERE outcome = 'forbidden' AND method = 'node-agent.register'`); n != forbidden+1 {
				t.Errorf("%s: %d forbidden audit rows, want %d", what, n, forbidden+1)
			} else {
				forbidden = n
			}
			e.clock.Add(2 * refusalWindow) // identical refusals within a window are one audit row
		}

		// The user's report: a token for 127.0.0.1 registered node 10.9.9.9 at 8.8.8.8.
		bound := e.joinToken(JoinTokenInput{IP: "127.0.0.1", Uses: 2})
		code, body := e.call(a, "POST", registerPath, bound, regBody(t, "10.9.9.9", "8.8.8.8"))
		refused("another node_id and host_ip", code, body, "is bound to 127.0.0.1, so it registers only that address, not host_ip 8.8.8.8")
		code, body = e.call(a, "POST", registerPath, bound, regBody(t, "10.9.9.9", "127.0.0.1"))
		refused("another node_id", code, body, "not node_id 10.9.9.9")
		code, body = e.call(a, "POST", registerPath, bound, regBody(t, "127.0.0.1", "8.8.8.8"))
		refused("another host_ip", code, body, "not host_ip 8.8.8.8")
		code, body = e.call(a, "POST", registerPath, bound, regBody(t, "10.9.9.9", "not an ip"))
		if code != http.StatusBadRequest || !strings.Contains(string(body), `host_ip must be an IP address`) {
			t.Errorf("host_ip not an IP: %d %s", code, body)
		}
		e.flush()
		if n := e.count(`SELECT count(*) FROM nodes_registrations`); n != 0 {
			t.Fatalf("refused joins registered %d nodes", n)
		}
		// None of that took a use: both are left for the node's own address (node_id
		// 127.0.0.1, host_ip absent or the same).
		code, body = e.call(a, "POST", registerPath, bound, regBody(t, "127.0.0.1", ""))
		if code != 200 {
			t.Fatalf("join with the bound address: %d %s", code, body)
		}
		var joined struct {
			Credential string `json:"node_credential"`
		}
		json.Unmarshal(body, &joined)
		// A name as node_id at the bound address would be a second node at one address.
		code, body = e.call(a, "POST", registerPath, bound, regBody(t, "cube-a", "127.0.0.1"))
		refused("a name as node_id at the bound address", code, body, "not node_id cube-a")

		// A token bound by its first use: the first use must name the address it comes from,
		// and a refused one leaves it unbound.
		first := e.joinToken(JoinTokenInput{})
		code, body = e.call(d, "POST", registerPath, first, regBody(t, "10.9.9.9", "10.9.9.9"))
		refused("first use naming another address", code, body, "binds itself to the address of its first use, 127.0.0.4")
		if code, body := e.call(d, "POST", registerPath, first, regBody(t, "127.0.0.4", "127.0.0.4")); code != 200 {
			t.Errorf("first use naming its own address: %d %s", code, body)
		}

		// --any-ip: any address, from anywhere.
		anyIP := e.joinToken(JoinTokenInput{AnyIP: true})
		if code, body := e.call(a, "POST", registerPath, anyIP, regBody(t, "10.9.9.9", "10.9.9.9")); code != 200 {
			t.Errorf("any-ip token: %d %s", code, body)
		}

		// The node credential keeps its node's address.
		code, body = e.call(a, "POST", registerPath, joined.Credential, regBody(t, "127.0.0.1", "8.8.8.8"))
		if code != http.StatusForbidden || !strings.Contains(string(body), "cannot register it with host_ip 8.8.8.8") {
			t.Errorf("credential moving its node: %d %s", code, body)
		}
		if code, body := e.call(a, "POST", registerPath, joined.Credential, regBody(t, "127.0.0.1", "127.0.0.1")); code != 200 {
			t.Errorf("credential registering again at its address: %d %s", code, body)
		}
		if v, _ := e.reg.Get(t.Context(), "127.0.0.1"); v.IP != "127.0.0.1" {
			t.Errorf("node 127.0.0.1 has IP %s", v.IP)
		}

		// Stock Cubelets: host_ip must be an IP address (it defaults to node_id).
		for _, c := range []struct{ id, host, want string }{
			{"10.0.0.7", "not an ip", `host_ip must be an IP address: host_ip is \"not an ip\"`},
			{"cube-7", "", `node_id (host_ip defaults to it) is \"cube-7\"`},
			{"10.0.0.7", "0.0.0.0", "not the unspecified address"},
			{"10.0.0.7", "224.0.0.1", "not a multicast address"},
		} {
			code, body := e.call(a, "POST", registerPath, "", regBody(t, c.id, c.host))
			if code != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
				t.Errorf("stock register node_id %q host_ip %q: %d %s, want 400 saying %s", c.id, c.host, code, body, c.want)
			}
		}
		if code, body := e.call(a, "POST", registerPath, "", regBody(t, "10.0.0.7", "")); code != 200 {
			t.Errorf("stock register without host_ip: %d %s", code, body)
		}
	})
}
