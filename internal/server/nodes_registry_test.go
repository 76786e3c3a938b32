package server

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// TestNodesDeleteNotReady: deleting a cordoned node that is not Ready (it registered and never
// reported Ready) without force is 409 CONFLICT on the public API, saying --force, and 502
// SANDBOX_CHECK_FAILED on the internal route (upstream's ErrSandboxCheckFailed), saying
// force=true; with force both delete.
func TestNodesDeleteNotReady(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		e := mustStart(t, db, allowLoopback)
		agent := e.srv.InternalURL()
		for _, id := range []string{"10.0.0.7", "10.0.0.8"} {
			if code, _, out := nodeCall(t, "POST", agent+nodeapi.PathRegister, "", registerBody(t, id, "x")); code != 200 {
				t.Fatalf("register %s: %d %s", id, code, out)
			}
			e.must(e.admin, "nodes.cordon", map[string]any{"nodeId": id}, nil)
		}
		code, body := e.post(e.admin, "nodes.delete", map[string]any{"nodeId": "10.0.0.7"})
		if code != 409 || !strings.Contains(string(body), `"CONFLICT"`) ||
			!strings.Contains(string(body), "node 10.0.0.7 is NotReady, so its sandbox count is unknown: to delete it anyway, use --force (cubefleet nodes delete 10.0.0.7 --force)") {
			t.Errorf("nodes.delete of a NotReady node: %d %s", code, body)
		}
		url := e.srv.InternalURL() + nodeapi.NodePath("10.0.0.8")
		code, _, body = nodeCall(t, "DELETE", url, e.admin, nil)
		if code != 502 || !strings.Contains(string(body), `"code":"SANDBOX_CHECK_FAILED"`) || !strings.Contains(string(body), "add force=true") ||
			strings.Contains(string(body), "CONFLICT") {
			t.Errorf("DELETE of a NotReady node: %d %s", code, body)
		}
		e.must(e.admin, "nodes.delete", map[string]any{"nodeId": "10.0.0.7", "force": true}, nil)
		if code, _, body := nodeCall(t, "DELETE", url+"?force=true", e.admin, nil); code != 200 {
			t.Errorf("DELETE ?force=true: %d %s", code, body)
		}
	})
}

// TestAllowlistAtStart: the "control plane ready" line names the networks of
// --node-agent-allow-unauthenticated ("none" without), and a network wider than a /8 is a WARN
// at start saying what anyone there can do.
func TestAllowlistAtStart(t *testing.T) {
	t.Run("wide", func(t *testing.T) { testAllowlistWide(t) })
	t.Run("none", func(t *testing.T) { testAllowlistNone(t) })
}

func testAllowlistWide(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		wide := mustStart(t, db, func(c *Config) {
			c.NodeAgentAllowUnauthenticated = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("0.0.0.0/0")}
		})
		log := wide.log.String()
		if !strings.Contains(log, `"msg":"control plane ready"`) || !strings.Contains(log, `"node_agent_allow_unauthenticated":"10.0.0.0/24,0.0.0.0/0"`) {
			t.Errorf("the ready line does not name the allowlist:\n%s", log)
		}
		if !strings.Contains(log, `"level":"WARN","msg":"--node-agent-allow-unauthenticated allows calls without credentials`) ||
			!strings.Contains(log, `"networks":"0.0.0.0/0"`) {
			t.Errorf("no WARN for 0.0.0.0/0:\n%s", log)
		}
	})
}

func testAllowlistNone(t *testing.T) {
	storetest.Each(t, nil, func(t *testing.T, db *store.DB) {
		log := mustStart(t, db, nil).log.String()
		if !strings.Contains(log, `"node_agent_allow_unauthenticated":"none"`) || strings.Contains(log, "allows calls without credentials") {
			t.Errorf("without an allowlist:\n%s", log)
		}
	})
}
