package nodehttp_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// TestMetaRoutesAnswerInTheRetEnvelope: every answer of CubeMaster's node routes, refusals and
// errors included, is CubeMaster's `ret` envelope with ret_code the HTTP status, never the
// node API's {"error","code"}.
func TestMetaRoutesAnswerInTheRetEnvelope(t *testing.T) {
	nodetest.Each(t, func(c *nodetest.Config) {
		c.HTTP.AllowUnauthenticated = []netip.Prefix{netip.MustParsePrefix("127.0.0.9/32")}
		c.HTTP.Authenticate = nodetest.FakeKeys
	}, func(t *testing.T, e *nodetest.Env) {
		outside, allowed := nodetest.From("127.0.0.1"), nodetest.From("127.0.0.9")
		for _, c := range []struct {
			name, path, token string
			from              string // "allowed": from --node-agent-allow-unauthenticated
			status            int
			msg               string
		}{
			{"list without a credential", nodeapi.MetaNodesPath, "", "", 401, "--node-agent-allow-unauthenticated"},
			{"node without a credential", nodeapi.MetaNodesPath + "/10.9.9.9", "", "", 401, "--node-agent-allow-unauthenticated"},
			{"list with an unknown key", nodeapi.MetaNodesPath, "cfk_nope", "", 401, "unknown API key"},
			{"node without nodes:get", nodeapi.MetaNodesPath + "/10.9.9.9", nodetest.ReaderKey, "", 403, "nodes:get"},
			{"unknown node", nodeapi.MetaNodesPath + "/10.9.9.9", nodetest.AdminKey, "", 404, "10.9.9.9"},
			{"unknown node, no credentials from an allowed network", nodeapi.MetaNodesPath + "/10.9.9.9", "", "allowed", 404, "10.9.9.9"},
			{"list", nodeapi.MetaNodesPath, nodetest.AdminKey, "", 200, "ok"},
		} {
			t.Run(c.name, func(t *testing.T) {
				client := outside
				if c.from == "allowed" {
					client = allowed
				}
				code, body := e.Call(client, "GET", c.path, c.token, nil)
				var reply nodeapi.RetReply
				if err := json.Unmarshal(body, &reply); err != nil || code != c.status || reply.Ret.RetCode == nil ||
					*reply.Ret.RetCode != c.status || !bytes.Contains([]byte(reply.Ret.RetMsg), []byte(c.msg)) || bytes.Contains(body, []byte(`"code"`)) {
					t.Errorf("GET %s: %d %s, want %d in the ret envelope naming %q", c.path, code, body, c.status, c.msg)
				}
			})
		}
	})
}
