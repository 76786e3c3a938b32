package server

import (
	"strings"
	"testing"

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
		agentURL := e.srv.InternalURL() + "/internal/v1/node-agent/nodes/"
		for _, id := range []string{"10.0.0.7", "10.0.0.8"} {
			if code, _, out := nodeCall(t, "POST", agentURL+"register", "", registerBody(t, id, "x")); code != 200 {
				t.Fatalf("register %s: %d %s", id, code, out)
			}
			e.must(e.admin, "nodes.cordon", map[string]any{"nodeId": id}, nil)
		}
		code, body := e.post(e.admin, "nodes.delete", map[string]any{"nodeId": "10.0.0.7"})
		if code != 409 || !strings.Contains(string(body), `"CONFLICT"`) ||
			!strings.Contains(string(body), "node 10.0.0.7 is NotReady, so its sandbox count is unknown: to delete it anyway, use --force (cubefleet nodes delete 10.0.0.7 --force)") {
			t.Errorf("nodes.delete of a NotReady node: %d %s", code, body)
		}
		url := e.srv.InternalURL() + "/internal/v1/nodes/10.0.0.8"
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
