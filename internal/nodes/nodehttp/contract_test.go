package nodehttp_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

// sameAsContract checks that body, written by hand by the registry, decodes into T (nodeapi's
// type of that answer) with no member left over, and that encoding/json writes T back as the
// same bytes: the nodeapi types are the contract the registry's encoder follows.
func sameAsContract[T any](t *testing.T, what string, body []byte) {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s does not decode into %T: %v\n%s", what, v, err, body)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, body) {
		t.Errorf("%s is not %T as encoding/json writes it:\n--- written\n%s\n--- %T\n%s", what, v, body, v, out)
	}
}

// TestAnswersAreTheContract: the register answer (with a node credential), a status answer,
// the node list, one node and the score-only list are exactly nodeapi.RegisterResponse,
// NodeSnapshot, SchedulerNode and SchedulerScore; so is a node that never reported and is
// cordoned and not Ready (no LocalTemplates, an UnhealthyReason).
func TestAnswersAreTheContract(t *testing.T) {
	e := nodetest.MustEnv(t, storetest.SQLite(t, nodetest.Modules...), nil)
	join := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1"})
	code, reg := e.Call(nodetest.From("127.0.0.1"), "POST", nodeapi.PathRegister, join, nodetest.WithNode("127.0.0.1"))
	if code != http.StatusOK || !bytes.Contains(reg, []byte(`"node_credential":"cfn_`)) {
		t.Fatalf("join: %d %s", code, reg)
	}
	sameAsContract[nodeapi.RegisterResponse](t, "the register answer", reg)
	if code, out := e.Do("POST", nodeapi.PathRegister, "", nodetest.Register()); code != http.StatusOK {
		t.Fatalf("register: %d %s", code, out)
	} else {
		sameAsContract[nodeapi.RegisterResponse](t, "a stock register answer", out)
	}
	code, st := e.Do("POST", nodeapi.StatusPath("10.0.0.7"), "", nodetest.Status())
	if code != http.StatusOK {
		t.Fatalf("status: %d %s", code, st)
	}
	sameAsContract[nodeapi.NodeSnapshot](t, "a status answer", st)
	code, iso := e.Call(http.DefaultClient, "PUT", nodeapi.IsolationPath("127.0.0.1"), "", []byte(`{"detail":"disk <sdb> & more"}`))
	if code != http.StatusOK {
		t.Fatalf("isolate: %d %s", code, iso)
	}
	e.Clock.Add(nodes.DefaultHeartbeatTimeout + 1)
	for path, what := range map[string]string{
		nodeapi.NodesPrefix:                               "the list",
		nodeapi.NodesPrefix + "?ids=127.0.0.1":            "a selected list",
		nodeapi.NodesPrefix + "?score_only=true":          "the score-only list",
		nodeapi.NodePath("10.0.0.7"):                      "one node",
		nodeapi.NodePath("127.0.0.1"):                     "a cordoned node that never reported",
		nodeapi.NodePath("10.0.0.7") + "?score_only=true": "one node's score",
	} {
		code, out := e.Do("GET", path, "", nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, out)
		}
		switch {
		case bytes.Contains([]byte(path), []byte("score_only")) && out[0] == '[':
			sameAsContract[[]nodeapi.SchedulerScore](t, what, out)
		case bytes.Contains([]byte(path), []byte("score_only")):
			sameAsContract[nodeapi.SchedulerScore](t, what, out)
		case out[0] == '[':
			sameAsContract[[]nodeapi.SchedulerNode](t, what, out)
		default:
			sameAsContract[nodeapi.SchedulerNode](t, what, out)
		}
	}
	code, del := e.Do("DELETE", nodeapi.NodePath("127.0.0.1")+"?force=true", "", nil)
	if code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, del)
	}
	sameAsContract[nodeapi.NodeSnapshot](t, "the delete answer", del)
	code, bad := e.Do("GET", nodeapi.NodePath("10.9.9.9"), "", nil)
	if code != http.StatusNotFound {
		t.Fatalf("unknown node: %d %s", code, bad)
	}
	sameAsContract[nodeapi.ErrorBody](t, "an error", bad)
}
