package nodeapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
)

// TestRoutes: the routes are the exact strings docs/nodes.md lists ("Node-agent API" and
// "Internal nodes API"), and the patterns give the node id and label key to a ServeMux as the
// registry reads them.
func TestRoutes(t *testing.T) {
	if want := []string{"/internal/v1/node-agent", "/internal/node-agent/v1", "/internal/meta"}; !slices.Equal(nodeapi.AgentPrefixes, want) {
		t.Errorf("AgentPrefixes = %v, want %v", nodeapi.AgentPrefixes, want)
	}
	for got, want := range map[string]string{
		nodeapi.PathReadyz:             "/internal/v1/node-agent/readyz",
		nodeapi.PathRegister:           "/internal/v1/node-agent/nodes/register",
		nodeapi.StatusPath("10.0.0.7"): "/internal/v1/node-agent/nodes/10.0.0.7/status",
		nodeapi.StatusPathUnder(nodeapi.MetaAgentPrefix, "10.0.0.7"): "/internal/meta/nodes/10.0.0.7/status",
		nodeapi.NodesPrefix:                                 "/internal/v1/nodes",
		nodeapi.NodePath("10.0.0.7"):                        "/internal/v1/nodes/10.0.0.7",
		nodeapi.IsolationPath("10.0.0.7"):                   "/internal/v1/nodes/10.0.0.7/isolation",
		nodeapi.LabelsPath("10.0.0.7"):                      "/internal/v1/nodes/10.0.0.7/labels",
		nodeapi.LabelPath("10.0.0.7", "kubernetes.io/arch"): "/internal/v1/nodes/10.0.0.7/labels/kubernetes.io/arch",
	} {
		if got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
	var id, key string
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+nodeapi.LegacyAgentPrefix+nodeapi.RouteStatus, func(w http.ResponseWriter, r *http.Request) { id = r.PathValue("node_id") })
	mux.HandleFunc("DELETE "+nodeapi.NodesPrefix+nodeapi.RouteLabel, func(w http.ResponseWriter, r *http.Request) {
		id, key = r.PathValue("node_id"), r.PathValue("key")
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", nodeapi.StatusPathUnder(nodeapi.LegacyAgentPrefix, "fd00::7"), nil))
	if id != "fd00::7" {
		t.Errorf("status route node_id = %q", id)
	}
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("DELETE", nodeapi.LabelPath("10.0.0.8", "kubernetes.io/arch"), nil))
	if id != "10.0.0.8" || key != "kubernetes.io/arch" {
		t.Errorf("label route node_id %q key %q", id, key)
	}
}

// TestRaw: a Raw keeps what was sent and tells absent and null from a value; RawOf encodes as
// encoding/json does; an absent one is left out of a request, and the agent's always-sent
// local_templates is written as it was set.
func TestRaw(t *testing.T) {
	for body, want := range map[string]struct {
		reported bool
		json     string
	}{
		`{}`:                           {false, ""},
		`{"images":null}`:              {false, "null"},
		`{"images":[]}`:                {true, "[]"},
		`{"images":[{"names":["x"]}]}`: {true, `[{"names":["x"]}]`},
	} {
		req, err := nodeapi.DecodeStatus([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if req.Images.Reported() != want.reported || string(req.Images.JSON()) != want.json {
			t.Errorf("%s: reported %v %q, want %v %q", body, req.Images.Reported(), req.Images.JSON(), want.reported, want.json)
		}
		imgs, err := req.DecodeImages()
		if err != nil || (imgs != nil) != want.reported {
			t.Errorf("%s: DecodeImages = %v %v", body, imgs, err)
		}
	}
	req := nodeapi.StatusRequest{
		LocalTemplates: nodeapi.RawOf([]nodeapi.LocalTemplate{}),
		Versions:       nodeapi.RawOf([]nodeapi.ComponentVersion{{Component: "kernel", Version: "6.6 <b>"}}),
		HeartbeatTime:  nodeapi.WireTime{Time: time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)},
	}
	out, err := json.Marshal(&req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"local_templates":[],"heartbeat_time":"2026-05-04T03:02:01Z","versions":[{"component":"kernel","version":"6.6 \u003cb\u003e"}]}`
	if string(out) != want {
		t.Errorf("encoded %s\nwant     %s", out, want)
	}
	var back nodeapi.StatusRequest
	if err := json.Unmarshal(out, &back); err != nil || string(back.Versions.JSON()) != `[{"component":"kernel","version":"6.6 \u003cb\u003e"}]` {
		t.Errorf("decoded with encoding/json: %q %v", back.Versions.JSON(), err)
	}
	room := cap(back.Versions.JSON())
	back.Reset()
	if back.Versions.Reported() || cap(back.Versions.JSON()) != room {
		t.Errorf("Reset: %q cap %d, want empty with cap %d", back.Versions.JSON(), cap(back.Versions.JSON()), room)
	}
}

// TestWireTime: null, "" and Go's zero time are the zero time; RFC 3339 with or without
// fractions is read; anything else is refused.
func TestWireTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		`null`: {}, `""`: {}, `"0001-01-01T00:00:00Z"`: {},
		`"2026-05-04T10:00:00Z"`:        time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC),
		`"2026-05-04T12:00:00.5+02:00"`: time.Date(2026, 5, 4, 10, 0, 0, 5e8, time.UTC),
	} {
		var wt nodeapi.WireTime
		if err := wt.UnmarshalJSON([]byte(in)); err != nil || !wt.Equal(want) {
			t.Errorf("%s: %v %v, want %v", in, wt.Time, err, want)
		}
	}
	for _, in := range []string{`"yesterday"`, `12`, `"2026-05-04"`} {
		var wt nodeapi.WireTime
		if err := wt.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("%s: accepted", in)
		}
	}
}

// TestDecodeReply is Cubelet's acceptance rule: a JSON object, whose ret (when it has a
// ret_code) says 200.
func TestDecodeReply(t *testing.T) {
	for body, ok := range map[string]bool{
		`{}`: true, `{"node_id":"10.0.0.5","healthy":true}`: true, `{"ret":{"ret_code":200,"ret_msg":"ok"}}`: true,
		`{"ret":{"ret_msg":"no code"}}`: true, `{"ret":{"ret_code":500,"ret_msg":"boom"}}`: false, `{"ret":{"ret_code":0}}`: false,
		``: false, `OK`: false, `[]`: false, `null`: false, `"x"`: false,
	} {
		if _, err := nodeapi.DecodeReply([]byte(body)); (err == nil) != ok {
			t.Errorf("DecodeReply(%q) = %v, want ok=%v", body, err, ok)
		}
	}
	ready, _ := json.Marshal(nodeapi.NewRetReply(200, "ok"))
	if string(ready) != `{"ret":{"ret_code":200,"ret_msg":"ok"}}` {
		t.Errorf("readyz envelope %s", ready)
	}
	body, _ := json.Marshal(nodeapi.ErrorBody{Error: "node 10.0.0.7 not found", Code: cubefleet.CodeNotFound})
	if string(body) != `{"error":"node 10.0.0.7 not found","code":"NOT_FOUND"}` {
		t.Errorf("error body %s", body)
	}
}
