package nodes_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

func TestHealth(t *testing.T) {
	base := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	timeout, lost := 15*time.Second, 5*time.Minute
	for _, c := range []struct {
		age   time.Duration
		ready bool
		want  nodes.State
	}{
		{0, true, nodes.StateReady},
		{-time.Hour, true, nodes.StateReady}, // a report "from the future" is fresh
		{15 * time.Second, true, nodes.StateReady},
		{15*time.Second + time.Millisecond, true, nodes.StateSuspect},
		{0, false, nodes.StateNotReady},
		{15 * time.Second, false, nodes.StateNotReady},
		{16 * time.Second, false, nodes.StateSuspect},
		{30 * time.Second, true, nodes.StateSuspect},
		{30*time.Second + time.Millisecond, true, nodes.StateDown},
		{5*time.Minute - time.Millisecond, true, nodes.StateDown},
		{5 * time.Minute, true, nodes.StateLost},
		{50 * time.Hour, false, nodes.StateLost},
	} {
		t.Run(fmt.Sprintf("%s/%v", c.age, c.ready), func(t *testing.T) {
			if got := nodes.Health(base.Add(c.age), base, c.ready, timeout, lost); got != c.want {
				t.Errorf("Health(age %s, ready %v) = %s, want %s", c.age, c.ready, got, c.want)
			}
		})
	}
}

func counterValue(t *testing.T, r *nodes.Registry, typ string) float64 {
	t.Helper()
	v, err := nodes.EventCount(r, typ)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gaugeValue(t *testing.T, r *nodes.Registry, s nodes.State) float64 {
	t.Helper()
	v, err := nodes.StateCount(r, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHealthTransitions walks a node that stops reporting through Ready -> Suspect -> Down ->
// Lost with the injected clock, brings it back (recovered), and checks the events, the
// metrics and what every reader sees.
func TestHealthTransitions(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		check := func(want nodes.State, healthy bool, reason string) {
			t.Helper()
			e.Reg.CheckHealth(ctx)
			v, err := e.Reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			if v.State != want || v.Healthy != healthy || v.UnhealthyReason != reason {
				t.Errorf("view: %s healthy=%v %q, want %s %v %q", v.State, v.Healthy, v.UnhealthyReason, want, healthy, reason)
			}
			_, body := e.Do(http.MethodGet, nodeapi.NodesPrefix+"/10.0.0.7", "", nil)
			n := nodetest.DecodeObject(t, body)
			if n["Healthy"] != healthy || (reason != "" && n["UnhealthyReason"] != reason) {
				t.Errorf("wire: Healthy %v %v, want %v %q", n["Healthy"], n["UnhealthyReason"], healthy, reason)
			}
			if gaugeValue(t, e.Reg, want) != 1 {
				t.Errorf("cubefleet_nodes{state=%q} = %v, want 1", want, gaugeValue(t, e.Reg, want))
			}
		}
		check(nodes.StateReady, true, "")
		e.Clock.Add(15 * time.Second)
		check(nodes.StateReady, true, "")
		e.Clock.Add(time.Second)
		check(nodes.StateSuspect, false, nodeapi.ReasonHeartbeatExpired)
		e.Clock.Add(15 * time.Second)
		check(nodes.StateDown, false, nodeapi.ReasonHeartbeatExpired)
		e.Clock.Add(5 * time.Minute)
		check(nodes.StateLost, false, nodeapi.ReasonHeartbeatExpired)
		// Cordoning does not change health, and Lost nodes are not schedulable.
		if v, _ := e.Reg.Cordon(ctx, "10.0.0.7", "", "test"); v.State != nodes.StateLost || v.Schedulable {
			t.Errorf("cordon: %+v", v)
		}
		e.Reg.Uncordon(ctx, "10.0.0.7", "test")
		if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		check(nodes.StateReady, true, "")
		e.Clock.Add(time.Second)
		if err := c.Status("10.0.0.7", []byte(`{"conditions":[{"type":"Ready","status":"False"}]}`)); err != nil {
			t.Fatal(err)
		}
		check(nodes.StateNotReady, false, nodeapi.ReasonReportedNotReady)
		want := []string{nodes.EventJoined, nodes.EventSuspect, nodes.EventDown, nodes.EventLost, nodes.EventCordoned, nodes.EventUncordoned, nodes.EventRecovered, nodes.EventNotReady}
		if got := e.EventTypes("10.0.0.7"); !slices.Equal(got, want) {
			t.Errorf("events = %v, want %v", got, want)
		}
		for _, typ := range want[1:] {
			if v := counterValue(t, e.Reg, typ); v != 1 {
				t.Errorf("cubefleet_node_events_total{type=%q} = %v, want 1", typ, v)
			}
		}
	})
}

// TestReportAfterAnUnobservedLoss reports from a node readers see as Lost before the health
// loop has noticed: the loss still gets its event, before the recovery.
func TestReportAfterAnUnobservedLoss(t *testing.T) {
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
		e.Clock.Add(31 * time.Second)
		e.Reg.CheckHealth(ctx) // Down
		e.Clock.Add(5 * time.Minute)
		if v, _ := e.Reg.Get(ctx, "10.0.0.7"); v.State != nodes.StateLost {
			t.Fatalf("state after 5 min of silence = %s, want Lost", v.State)
		}
		if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		e.Reg.CheckHealth(ctx)
		want := []string{nodes.EventJoined, nodes.EventDown, nodes.EventLost, nodes.EventRecovered}
		if got := e.EventTypes("10.0.0.7"); !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
	})
}

// TestRestartGrace restarts the registry an hour after its nodes last reported: none is
// marked Suspect for a full heartbeat timeout, and a node that was Lost before stays Lost. No
// events come from the restart itself.
func TestRestartGrace(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		for _, id := range []string{"10.0.0.7", "10.0.0.8"} {
			if err := c.Register(nodetest.WithNode(id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Status("10.0.0.8", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		e.Reg.CheckHealth(ctx)
		e.Clock.Add(6 * time.Minute) // 10.0.0.8 goes silent and is Lost
		if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		e.Reg.CheckHealth(ctx)
		before := e.EventTypes("10.0.0.8")
		e.Clock.Add(time.Hour) // the server is down for an hour
		e = e.Restart()
		state := func(id string) nodes.State {
			t.Helper()
			v, err := e.Reg.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return v.State
		}
		e.Reg.CheckHealth(ctx)
		if s7, s8 := state("10.0.0.7"), state("10.0.0.8"); s7 != nodes.StateReady || s8 != nodes.StateLost {
			t.Fatalf("after the restart: %s %s, want Ready Lost", s7, s8)
		}
		e.Clock.Add(15 * time.Second)
		e.Reg.CheckHealth(ctx)
		if s := state("10.0.0.7"); s != nodes.StateReady {
			t.Errorf("one timeout after the restart: %s, want Ready", s)
		}
		e.Clock.Add(time.Second)
		e.Reg.CheckHealth(ctx)
		if s := state("10.0.0.7"); s != nodes.StateSuspect {
			t.Errorf("past one timeout after the restart: %s, want Suspect", s)
		}
		if got := e.EventTypes("10.0.0.8"); !slices.Equal(got, before) {
			t.Errorf("the restart made events for the lost node: %v, before %v", got, before)
		}
		if got := e.EventTypes("10.0.0.7"); !slices.Equal(got, []string{nodes.EventJoined, nodes.EventSuspect}) {
			t.Errorf("events of 10.0.0.7 = %v", got)
		}
		// The restored node kept its registration and inventory.
		_, body := e.Do(http.MethodGet, nodeapi.NodesPrefix+"/10.0.0.8", "", nil)
		n := nodetest.DecodeObject(t, body)
		if n["MaxMvmLimit"] != 312.0 || len(n["LocalTemplates"].([]any)) != 2 || n["mvm_num"] != 4.0 {
			t.Errorf("restored node: %v", n)
		}
	})
}
