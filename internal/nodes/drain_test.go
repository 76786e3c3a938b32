package nodes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/store"
	"github.com/cubefleet/cubefleet/internal/store/storetest"
)

func TestDrainStatus(t *testing.T) {
	for _, c := range []struct {
		name        string
		requestedAt int64
		reported    bool
		mvm         int64
		unacked     int64
		want        nodes.DrainState
	}{
		{"not draining", 0, true, 3, 0, ""},
		{"not draining, idle", 0, true, 0, 0, ""},
		{"not draining, never reported", 0, false, 0, 0, ""},
		{"not draining, one placed", 0, true, 0, 1, ""},
		{"runs sandboxes", 1, true, 3, 0, nodes.DrainDraining},
		{"runs one", 1, true, 1, 0, nodes.DrainDraining},
		{"runs none", 1, true, 0, 0, nodes.DrainDrained},
		{"runs none, one placed and unacknowledged", 1, true, 0, 1, nodes.DrainDraining},
		{"never reported allocated", 1, false, 0, 0, nodes.DrainDrained},
		{"never reported allocated, one placed", 1, false, 0, 1, nodes.DrainDraining},
		{"never reported allocated, stale count ignored", 1, false, 5, 0, nodes.DrainDrained},
		{"negative count is none", 1, true, -1, 0, nodes.DrainDrained},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nodes.DrainStatus(c.requestedAt, c.reported, c.mvm, c.unacked); got != c.want {
				t.Errorf("DrainStatus(%d, %v, %d, %d) = %q, want %q", c.requestedAt, c.reported, c.mvm, c.unacked, got, c.want)
			}
		})
	}
}

// statusWith is the Cubelet status body reporting mvm sandboxes (allocated.mvm_num).
func statusWith(t testing.TB, mvm int) []byte {
	t.Helper()
	body := nodetest.Status()
	out := bytes.Replace(body, []byte(`"mvm_num": 4`), []byte(fmt.Sprintf(`"mvm_num": %d`, mvm)), 1)
	if bytes.Equal(out, body) && mvm != 4 {
		t.Fatal("status.json has no \"mvm_num\": 4 to replace")
	}
	return out
}

// eventsOf returns the events of node id in e, oldest first.
func eventsOf(e *nodetest.Env, id string) []events.Event {
	e.T.Helper()
	e.Flush()
	evs, _, err := events.List(context.Background(), e.DB, events.Filter{TenantID: "root", Subject: id, Limit: 1000})
	if err != nil {
		e.T.Fatal(err)
	}
	return evs
}

// TestDrain drains a stock Cubelet running 4 sandboxes: it is cordoned (SchedulingDisabled on
// the wire, Healthy unchanged) and Draining; a second drain changes nothing; a report of 2
// keeps it Draining, a restart keeps the mark, a report of 0 drains it (one node.drained
// event, even after more reports of 0 and another restart); uncordon ends the drain for good.
// A node that runs nothing, or never reported, is drained at once.
func TestDrain(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		e.Reg.CheckHealth(ctx)
		asked := e.Clock.Now().UnixMilli()
		get := func() nodes.View {
			t.Helper()
			v, err := e.Reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		wantDrain := func(v nodes.View, state nodes.DrainState, left, drainedAt int64) {
			t.Helper()
			d := v.Drain
			if d == nil {
				t.Fatalf("no drain in %+v", v)
			}
			want := nodes.DrainView{State: state, Reason: "kernel update", RequestedBy: "ops", RequestedAt: asked, SandboxesLeft: left, DrainedAt: drainedAt}
			if *d != want {
				t.Errorf("drain = %+v, want %+v", *d, want)
			}
			if !v.Cordoned || v.Schedulable || v.State != nodes.StateReady || !v.Healthy {
				t.Errorf("a draining node: cordoned %v, schedulable %v, state %s, healthy %v; want cordoned, not schedulable, Ready and healthy",
					v.Cordoned, v.Schedulable, v.State, v.Healthy)
			}
		}

		v, err := e.Reg.Drain(ctx, "10.0.0.7", "kernel update", "ops")
		if err != nil {
			t.Fatal(err)
		}
		wantDrain(v, nodes.DrainDraining, 4, 0)
		if v.CordonDetail != "kernel update" {
			t.Errorf("cordon detail %q, want the drain's reason", v.CordonDetail)
		}
		_, body := e.Do(http.MethodGet, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if n := nodetest.DecodeObject(t, body); n["SchedulingDisabled"] != true || n["Healthy"] != true {
			t.Errorf("wire: SchedulingDisabled %v, Healthy %v; want true, true", n["SchedulingDisabled"], n["Healthy"])
		}

		// Draining again changes nothing: the first request's reason and time stand.
		e.Clock.Add(time.Second)
		v, err = e.Reg.Drain(ctx, "10.0.0.7", "another reason", "someone-else")
		if err != nil {
			t.Fatal(err)
		}
		wantDrain(v, nodes.DrainDraining, 4, 0)

		// A report of 2 sandboxes: still draining.
		if err := c.Status("10.0.0.7", statusWith(t, 2)); err != nil {
			t.Fatal(err)
		}
		wantDrain(get(), nodes.DrainDraining, 2, 0)

		// A restart keeps the mark.
		e = e.Restart()
		c = nodetest.NewCubelet(e.URL)
		wantDrain(get(), nodes.DrainDraining, 2, 0)

		// A report of 0: drained, once.
		e.Clock.Add(time.Second)
		drained := e.Clock.Now().UnixMilli()
		if err := c.Status("10.0.0.7", statusWith(t, 0)); err != nil {
			t.Fatal(err)
		}
		wantDrain(get(), nodes.DrainDrained, 0, drained)
		e.Clock.Add(time.Second)
		if err := c.Status("10.0.0.7", statusWith(t, 0)); err != nil {
			t.Fatal(err)
		}
		wantDrain(get(), nodes.DrainDrained, 0, drained)
		e = e.Restart()
		c = nodetest.NewCubelet(e.URL)
		wantDrain(get(), nodes.DrainDrained, 0, drained)
		if err := c.Status("10.0.0.7", statusWith(t, 0)); err != nil {
			t.Fatal(err)
		}
		want := []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventDraining, nodes.EventDrained}
		evs := eventsOf(e, "10.0.0.7")
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		if !slices.Equal(types, want) {
			t.Fatalf("events = %v, want %v", types, want)
		}
		var data nodes.EventData
		json.Unmarshal(evs[2].Data, &data)
		if data.Sandboxes != 4 || data.Detail != "kernel update" || data.By != "ops" {
			t.Errorf("node.draining data %s", evs[2].Data)
		}
		if evs[3].At != drained {
			t.Errorf("node.drained at %d, want %d", evs[3].At, drained)
		}

		// Uncordon ends the drain, also across a restart.
		v, err = e.Reg.Uncordon(ctx, "10.0.0.7", "ops")
		if err != nil {
			t.Fatal(err)
		}
		if v.Drain != nil || v.Cordoned {
			t.Errorf("after uncordon: drain %+v, cordoned %v", v.Drain, v.Cordoned)
		}
		e = e.Restart()
		c = nodetest.NewCubelet(e.URL)
		if v := get(); v.Drain != nil || v.Cordoned {
			t.Errorf("after uncordon and a restart: drain %+v, cordoned %v", v.Drain, v.Cordoned)
		}
		if n := e.Count(`SELECT count(*) FROM nodes_registrations WHERE drain_requested_at <> 0 OR drained_at <> 0 OR drain_reason <> '' OR drain_by <> ''`); n != 0 {
			t.Errorf("%d registration rows keep a drain after uncordon", n)
		}

		// Draining a node that runs nothing: drained at once (cordoned, draining, drained).
		e.Clock.Add(time.Second)
		asked = e.Clock.Now().UnixMilli()
		v, err = e.Reg.Drain(ctx, "10.0.0.7", "kernel update", "ops")
		if err != nil {
			t.Fatal(err)
		}
		wantDrain(v, nodes.DrainDrained, 0, asked)
		types = types[:0]
		for _, ev := range eventsOf(e, "10.0.0.7") {
			types = append(types, ev.Type)
		}
		want = append(want, nodes.EventUncordoned, nodes.EventCordoned, nodes.EventDraining, nodes.EventDrained)
		if !slices.Equal(types, want) {
			t.Errorf("events = %v, want %v", types, want)
		}
		for typ, n := range map[string]float64{nodes.EventDraining: 1, nodes.EventDrained: 1} {
			if got := counterValue(t, e.Reg, typ); got != n {
				t.Errorf("cubefleet_node_events_total{type=%q} = %v, want %v", typ, got, n)
			}
		}

		// A node that never reported allocated resources is drained at once; a cordoned node
		// keeps its cordon's detail.
		if err := c.Register(nodetest.WithNode("10.0.0.8")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reg.Cordon(ctx, "10.0.0.8", "rack move", "ops"); err != nil {
			t.Fatal(err)
		}
		v, err = e.Reg.Drain(ctx, "10.0.0.8", "", "ops")
		if err != nil {
			t.Fatal(err)
		}
		if v.Drain == nil || v.Drain.State != nodes.DrainDrained || v.Drain.Reason != "" || v.CordonDetail != "rack move" {
			t.Errorf("drain of a node that never reported: %+v, cordon detail %q", v.Drain, v.CordonDetail)
		}
		types = types[:0]
		for _, ev := range eventsOf(e, "10.0.0.8") {
			types = append(types, ev.Type)
		}
		if want := []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventDraining, nodes.EventDrained}; !slices.Equal(types, want) {
			t.Errorf("events of 10.0.0.8 = %v, want %v", types, want)
		}

		// Refusals.
		if _, err := e.Reg.Drain(ctx, "10.9.9.9", "", "ops"); !cubefleet.IsCode(err, cubefleet.CodeNotFound) {
			t.Errorf("drain of an unknown node: %v, want NOT_FOUND", err)
		}
		if _, err := e.Reg.Drain(ctx, "10.0.0.8", strings.Repeat("x", nodeapi.MaxDetailRunes+1), "ops"); !cubefleet.IsCode(err, cubefleet.CodeInvalidInput) {
			t.Errorf("drain with a long reason: %v, want INVALID_INPUT", err)
		}
	})
}

// TestDrainKeepsDeleteRefusal: a draining node still running sandboxes cannot be deleted
// without force, and the refusal says how to drain it; once drained it can.
func TestDrainKeepsDeleteRefusal(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reg.Drain(ctx, "10.0.0.7", "", "ops"); err != nil {
			t.Fatal(err)
		}
		_, err := e.Reg.Delete(ctx, "10.0.0.7", false, "ops")
		if !cubefleet.IsCode(err, cubefleet.CodeConflict) || !strings.Contains(err.Error(), "still runs 4 sandboxes") ||
			!strings.Contains(err.Error(), "cubefleet nodes drain 10.0.0.7 --wait") {
			t.Fatalf("delete of a draining node with sandboxes: %v", err)
		}
		code, body := e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if code != http.StatusConflict || !bytes.Contains(body, []byte("cubefleet nodes drain 10.0.0.7 --wait")) {
			t.Errorf("DELETE of a draining node with sandboxes: %d %s", code, body)
		}
		if err := c.Status("10.0.0.7", statusWith(t, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reg.Delete(ctx, "10.0.0.7", false, "ops"); err != nil {
			t.Errorf("delete of a drained node: %v", err)
		}
	})
}

// TestDrainAcrossReplicas drains a node on one replica while it reports to the other: both
// see the drain and who cordoned the node, the drained event is written once, and uncordon on either ends it for both.
func TestDrainAcrossReplicas(t *testing.T) {
	storetest.Each(t, nodetest.Modules, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a := nodetest.MustEnv(t, db, func(c *nodetest.Config) { c.Store.Holder = "replica-a" })
		b := nodetest.Start(t, db, a.Clock, func() nodetest.Config { c := a.Cfg; c.Store.Holder = "replica-b"; return c }())
		a.Store.Announce(ctx)
		sync := func() {
			t.Helper()
			for _, e := range []*nodetest.Env{a, b} {
				e.Flush()
			}
			for _, e := range []*nodetest.Env{a, b} {
				if err := e.Store.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		drainOf := func(e *nodetest.Env) *nodes.DrainView {
			t.Helper()
			v, err := e.Reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			return v.Drain
		}
		cb := nodetest.NewCubelet(b.URL)
		if err := cb.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		if err := cb.Status("10.0.0.7", statusWith(t, 3)); err != nil {
			t.Fatal(err)
		}
		sync()
		a.Clock.Add(time.Second)
		if _, err := a.Reg.Drain(ctx, "10.0.0.7", "retire", "ops"); err != nil {
			t.Fatal(err)
		}
		sync()
		if d := drainOf(b); d == nil || d.State != nodes.DrainDraining || d.SandboxesLeft != 3 || d.Reason != "retire" {
			t.Fatalf("b after the drain on a: %+v", d)
		}
		if v, _ := b.Reg.Get(ctx, "10.0.0.7"); v.CordonedBy != "ops" {
			t.Errorf("b after the drain on a: cordoned by %q, want ops", v.CordonedBy)
		}
		a.Clock.Add(time.Second)
		for range 3 {
			if err := cb.Status("10.0.0.7", statusWith(t, 0)); err != nil {
				t.Fatal(err)
			}
			sync()
		}
		for _, e := range []*nodetest.Env{a, b} {
			if d := drainOf(e); d == nil || d.State != nodes.DrainDrained || d.DrainedAt == 0 {
				t.Errorf("%s after reports of 0: %+v", e.Store.Holder(), d)
			}
		}
		var types []string
		for _, ev := range eventsOf(a, "10.0.0.7") {
			types = append(types, ev.Type)
		}
		if want := []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventDraining, nodes.EventDrained}; !slices.Equal(types, want) {
			t.Errorf("events = %v, want %v", types, want)
		}
		a.Clock.Add(time.Second)
		if _, err := b.Reg.Uncordon(ctx, "10.0.0.7", "ops"); err != nil {
			t.Fatal(err)
		}
		sync()
		if d := drainOf(a); d != nil {
			t.Errorf("a after the uncordon on b: %+v", d)
		}
	})
}

// TestDrainReopens: a drained node that reports sandboxes again (something placed work on it
// despite the cordon) is Draining again, and node.drained follows when it is empty again.
func TestDrainReopens(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		if err := c.Status("10.0.0.7", statusWith(t, 0)); err != nil {
			t.Fatal(err)
		}
		state := func() *nodes.DrainView {
			t.Helper()
			v, err := e.Reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			return v.Drain
		}
		if _, err := e.Reg.Drain(ctx, "10.0.0.7", "", "ops"); err != nil {
			t.Fatal(err)
		}
		if d := state(); d == nil || d.State != nodes.DrainDrained {
			t.Fatalf("drain of an idle node: %+v", d)
		}
		e.Clock.Add(time.Second)
		if err := c.Status("10.0.0.7", statusWith(t, 1)); err != nil {
			t.Fatal(err)
		}
		if d := state(); d == nil || d.State != nodes.DrainDraining || d.DrainedAt != 0 || d.SandboxesLeft != 1 {
			t.Fatalf("after a report of 1: %+v", d)
		}
		e.Clock.Add(time.Second)
		if err := c.Status("10.0.0.7", statusWith(t, 0)); err != nil {
			t.Fatal(err)
		}
		if d := state(); d == nil || d.State != nodes.DrainDrained || d.DrainedAt != e.Clock.Now().UnixMilli() {
			t.Fatalf("after a report of 0: %+v", d)
		}
		var types []string
		for _, ev := range eventsOf(e, "10.0.0.7") {
			types = append(types, ev.Type)
		}
		if want := []string{nodes.EventJoined, nodes.EventCordoned, nodes.EventDraining, nodes.EventDrained, nodes.EventDrained}; !slices.Equal(types, want) {
			t.Errorf("events = %v, want %v", types, want)
		}
	})
}

// TestDeleteRefusals: without force, a node that is not Ready cannot be deleted (its sandbox
// count is unknown): the internal route answers 502 SANDBOX_CHECK_FAILED, as upstream's
// ErrSandboxCheckFailed, saying force=true; the public API (Delete) CONFLICT saying --force. A
// Ready node still running sandboxes is 409 CONFLICT on both, each saying its own way to force.
func TestDeleteRefusals(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		reportEverySecond(t, e, c, "10.0.0.7")
		if _, err := e.Reg.Cordon(ctx, "10.0.0.7", "", "ops"); err != nil {
			t.Fatal(err)
		}
		// Ready, 4 sandboxes: 409 both ways.
		code, body := e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		if code != http.StatusConflict || !bytes.Contains(body, []byte(`"code":"CONFLICT"`)) || !bytes.Contains(body, []byte("add force=true (DELETE /internal/v1/nodes/10.0.0.7?force=true)")) ||
			bytes.Contains(body, []byte("--force")) {
			t.Errorf("route, sandboxes: %d %s", code, body)
		}
		_, err := e.Reg.Delete(ctx, "10.0.0.7", false, "ops")
		if !cubefleet.IsCode(err, cubefleet.CodeConflict) || !strings.Contains(err.Error(), "use --force (cubefleet nodes delete 10.0.0.7 --force)") ||
			strings.Contains(err.Error(), "force=true") {
			t.Errorf("API, sandboxes: %v", err)
		}
		// Down: the sandbox check fails.
		e.Clock.Add(3 * nodes.DefaultHeartbeatTimeout)
		code, body = e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
		want := `{"error":"node 10.0.0.7 is Down, so its sandbox count is unknown: to delete it anyway, add force=true (DELETE /internal/v1/nodes/10.0.0.7?force=true)","code":"SANDBOX_CHECK_FAILED"}`
		if code != http.StatusBadGateway || string(body) != want {
			t.Errorf("route, Down: %d %s\nwant 502 %s", code, body, want)
		}
		_, err = e.Reg.Delete(ctx, "10.0.0.7", false, "ops")
		if !cubefleet.IsCode(err, cubefleet.CodeConflict) || !strings.Contains(err.Error(), "is Down, so its sandbox count is unknown: to delete it anyway, use --force (cubefleet nodes delete 10.0.0.7 --force)") {
			t.Errorf("API, Down: %v", err)
		}
		if code, body := e.Do(http.MethodDelete, nodeapi.NodesPrefix+"/10.0.0.7?force=true", "", nil); code != 200 {
			t.Errorf("route with force=true: %d %s", code, body)
		}
	})
}

// TestDrainReachesTheNode: the answer to a status report says "draining":true while the node
// drains (how cubefleet agent learns it) and decodes into nodeapi.NodeSnapshot as written; it
// is absent before the drain and after the uncordon that ends it, so a stock Cubelet's answers
// are unchanged.
func TestDrainReachesTheNode(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		report := func() nodeapi.NodeSnapshot {
			t.Helper()
			code, body := e.Do(http.MethodPost, nodeapi.StatusPath("10.0.0.7"), "", nodetest.Status())
			if code != http.StatusOK {
				t.Fatalf("status: %d %s", code, body)
			}
			var snap nodeapi.NodeSnapshot
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&snap); err != nil {
				t.Fatalf("the status answer is not a NodeSnapshot: %v\n%s", err, body)
			}
			if again, _ := json.Marshal(snap); !bytes.Equal(again, body) {
				t.Errorf("the status answer is not NodeSnapshot as encoding/json writes it:\n%s\n%s", body, again)
			}
			if bytes.Contains(body, []byte(`"draining"`)) != snap.Draining {
				t.Errorf("draining member present %v, Draining %v", !snap.Draining, snap.Draining)
			}
			return snap
		}
		if code, out := e.Do(http.MethodPost, nodeapi.PathRegister, "", nodetest.Register()); code != http.StatusOK {
			t.Fatalf("register: %d %s", code, out)
		}
		if report().Draining {
			t.Error("a node that does not drain is told it drains")
		}
		if _, err := e.Reg.Drain(ctx, "10.0.0.7", "kernel update", "ops"); err != nil {
			t.Fatal(err)
		}
		if snap := report(); !snap.Draining || !snap.SchedulingDisabled {
			t.Errorf("a draining node: draining %v, scheduling_disabled %v; want both", snap.Draining, snap.SchedulingDisabled)
		}
		if _, err := e.Reg.Uncordon(ctx, "10.0.0.7", "ops"); err != nil {
			t.Fatal(err)
		}
		if report().Draining {
			t.Error("the uncordon did not end the drain on the wire")
		}
	})
}
