package nodes_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// TestCordonOwner: a node may cordon itself and lift its own cordon, but not one an operator
// set (an API key, the public API, an allowed unauthenticated caller) nor the cordon of a
// drain: 403 naming who set it, audited, and the node stays cordoned. An operator cordoning a
// self-cordoned node takes the cordon over. Who set it is shown (cordonedBy), written with the
// registration row, and survives a restart.
func TestCordonOwner(t *testing.T) {
	nodetest.Each(t, func(c *nodetest.Config) { c.HTTP.Authenticate = nodetest.FakeKeys }, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		a := nodetest.From("127.0.0.1")
		join := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1"})
		code, body := e.Call(a, "POST", nodeapi.PathRegister, join, nodetest.WithNode("127.0.0.1"))
		if code != 200 {
			t.Fatalf("join: %d %s", code, body)
		}
		var joined nodeapi.RegisterResponse
		json.Unmarshal(body, &joined)
		cred := joined.NodeCredential
		isolation := nodeapi.NodesPrefix + "/127.0.0.1/isolation"
		by := func(want string) {
			t.Helper()
			v, err := e.Reg.Get(ctx, "127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			if v.CordonedBy != want || v.Cordoned != (want != "") {
				t.Errorf("cordoned %v by %q, want by %q", v.Cordoned, v.CordonedBy, want)
			}
		}
		forbidden := func(what string, code int, body []byte, want string) {
			t.Helper()
			if code != http.StatusForbidden || !strings.Contains(string(body), want) {
				t.Errorf("%s: %d %s, want 403 saying %q", what, code, body, want)
			}
		}

		// The node's own cordon: set and lifted by the node.
		if code, body := e.Call(a, "PUT", isolation, cred, []byte(`{"detail":"self-test"}`)); code != 200 {
			t.Fatalf("self-cordon: %d %s", code, body)
		}
		by("node:127.0.0.1")
		if code, body := e.Call(a, "DELETE", isolation, cred, nil); code != 200 {
			t.Fatalf("self-uncordon: %d %s", code, body)
		}
		by("")

		// An operator's cordon (an API key on the internal route): the node cannot lift it.
		if code, body := e.Call(a, "PUT", isolation, nodetest.AdminKey, []byte(`{"detail":"bad disk"}`)); code != 200 {
			t.Fatalf("operator cordon: %d %s", code, body)
		}
		by("svc_admin")
		code, body = e.Call(a, "DELETE", isolation, cred, nil)
		forbidden("node lifting an operator's cordon", code, body, "node 127.0.0.1 was cordoned by svc_admin; a node may lift only a cordon it set itself")
		code, body = e.Call(a, "PUT", isolation, cred, []byte(`{"detail":"all good"}`))
		forbidden("node rewriting an operator's cordon", code, body, "a node may change only a cordon it set itself")
		if code, body := e.Call(a, "PUT", isolation, cred, nil); code != 200 { // cordoning again: no change
			t.Errorf("node cordoning an operator-cordoned node again: %d %s", code, body)
		}
		v, _ := e.Reg.Get(ctx, "127.0.0.1")
		if v.CordonDetail != "bad disk" || v.CordonedBy != "svc_admin" {
			t.Errorf("the node changed the operator's cordon: %q by %q", v.CordonDetail, v.CordonedBy)
		}
		e.Flush()
		if n := e.Count(`SELECT count(*) FROM audit_log WHERE outcome = 'forbidden' AND method = 'internal.nodes.unisolate' AND principal_id = 'node:127.0.0.1'`); n != 1 {
			t.Errorf("%d forbidden audit rows for the node's uncordon, want 1", n)
		}
		// Persisted and restored.
		if n := e.Count(`SELECT count(*) FROM nodes_registrations WHERE node_id = '127.0.0.1' AND cordon_by = 'svc_admin'`); n != 1 {
			t.Errorf("cordon_by is not written")
		}
		e = e.Restart()
		by("svc_admin")
		a = nodetest.From("127.0.0.1")
		code, body = e.Call(a, "DELETE", isolation, cred, nil)
		forbidden("after a restart", code, body, "cordoned by svc_admin")

		// The public API (Uncordon by an operator) lifts it; a self-cordon taken over by an
		// operator is the operator's.
		if _, err := e.Reg.Uncordon(ctx, "127.0.0.1", "svc_ops"); err != nil {
			t.Fatal(err)
		}
		if code, body := e.Call(a, "PUT", isolation, cred, nil); code != 200 {
			t.Fatalf("self-cordon: %d %s", code, body)
		}
		if _, err := e.Reg.Cordon(ctx, "127.0.0.1", "kernel update", "svc_ops"); err != nil {
			t.Fatal(err)
		}
		by("svc_ops")
		code, body = e.Call(a, "DELETE", isolation, cred, nil)
		forbidden("node lifting a cordon an operator took over", code, body, "cordoned by svc_ops")

		// A drain's cordon: the node cannot end the drain.
		if _, err := e.Reg.Uncordon(ctx, "127.0.0.1", "svc_ops"); err != nil {
			t.Fatal(err)
		}
		if code, body := e.Call(a, "PUT", isolation, cred, nil); code != 200 {
			t.Fatalf("self-cordon: %d %s", code, body)
		}
		if _, err := e.Reg.Drain(ctx, "127.0.0.1", "retire", "svc_drainer"); err != nil {
			t.Fatal(err)
		}
		by("svc_drainer")
		code, body = e.Call(a, "DELETE", isolation, cred, nil)
		forbidden("node ending an operator's drain", code, body, "is draining (asked by svc_drainer)")
		if v, _ := e.Reg.Get(ctx, "127.0.0.1"); v.Drain == nil || !v.Cordoned {
			t.Errorf("the node ended its drain: %+v", v.Drain)
		}
		// An unauthenticated caller from an allowed network is an operator too.
		if code, body := e.Call(a, "DELETE", isolation, "", nil); code != 200 {
			t.Errorf("uncordon from the allowed network: %d %s", code, body)
		}
		by("")
		var bys []string
		for _, ev := range eventsOf(e, "127.0.0.1") {
			if ev.Type == nodes.EventUncordoned {
				var d struct{ By string }
				json.Unmarshal(ev.Data, &d)
				bys = append(bys, d.By)
			}
		}
		if want := []string{"node:127.0.0.1", "svc_ops", "svc_ops", "anonymous@127.0.0.1"}; !slices.Equal(bys, want) {
			t.Errorf("node.uncordoned by %v, want %v", bys, want)
		}
	})
}
