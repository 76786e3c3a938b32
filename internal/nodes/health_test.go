package nodes

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestHealth(t *testing.T) {
	base := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	timeout, lost := 15*time.Second, 5*time.Minute
	for _, c := range []struct {
		age   time.Duration
		ready bool
		want  State
	}{
		{0, true, StateReady},
		{-time.Hour, true, StateReady}, // a report "from the future" is fresh
		{15 * time.Second, true, StateReady},
		{15*time.Second + time.Millisecond, true, StateSuspect},
		{0, false, StateNotReady},
		{15 * time.Second, false, StateNotReady},
		{16 * time.Second, false, StateSuspect},
		{30 * time.Second, true, StateSuspect},
		{30*time.Second + time.Millisecond, true, StateDown},
		{5*time.Minute - time.Millisecond, true, StateDown},
		{5 * time.Minute, true, StateLost},
		{50 * time.Hour, false, StateLost},
	} {
		t.Run(fmt.Sprintf("%s/%v", c.age, c.ready), func(t *testing.T) {
			if got := Health(base.Add(c.age), base, c.ready, timeout, lost); got != c.want {
				t.Errorf("Health(age %s, ready %v) = %s, want %s", c.age, c.ready, got, c.want)
			}
		})
	}
}

func counterValue(t *testing.T, r *Registry, typ string) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.m.events.WithLabelValues(typ).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func gaugeValue(t *testing.T, r *Registry, s State) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.m.nodes.WithLabelValues(string(s)).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestHealthTransitions walks a node that stops reporting through Ready -> Suspect -> Down ->
// Lost with the injected clock, brings it back (recovered), and checks the events, the
// metrics and what every reader sees.
func TestHealthTransitions(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		c := newCubelet(t, e.url)
		if err := c.register(testdata(t, "register.json")); err != nil {
			t.Fatal(err)
		}
		if err := c.status("10.0.0.7", testdata(t, "status.json")); err != nil {
			t.Fatal(err)
		}
		check := func(want State, healthy bool, reason string) {
			t.Helper()
			e.reg.CheckHealth(ctx)
			v, err := e.reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			if v.State != want || v.Healthy != healthy || v.UnhealthyReason != reason {
				t.Errorf("view: %s healthy=%v %q, want %s %v %q", v.State, v.Healthy, v.UnhealthyReason, want, healthy, reason)
			}
			_, body := e.do(http.MethodGet, NodesPrefix+"/10.0.0.7", "", nil)
			n := decodeObject(t, body)
			if n["Healthy"] != healthy || (reason != "" && n["UnhealthyReason"] != reason) {
				t.Errorf("wire: Healthy %v %v, want %v %q", n["Healthy"], n["UnhealthyReason"], healthy, reason)
			}
			if gaugeValue(t, e.reg, want) != 1 {
				t.Errorf("cubefleet_nodes{state=%q} = %v, want 1", want, gaugeValue(t, e.reg, want))
			}
		}
		check(StateReady, true, "")
		e.clock.Add(15 * time.Second)
		check(StateReady, true, "")
		e.clock.Add(time.Second)
		check(StateSuspect, false, ReasonHeartbeatExpired)
		e.clock.Add(15 * time.Second)
		check(StateDown, false, ReasonHeartbeatExpired)
		e.clock.Add(5 * time.Minute)
		check(StateLost, false, ReasonHeartbeatExpired)
		// Cordoning does not change health, and Lost nodes are not schedulable.
		if v, _ := e.reg.Cordon(ctx, "10.0.0.7", "", "test"); v.State != StateLost || v.Schedulable {
			t.Errorf("cordon: %+v", v)
		}
		e.reg.Uncordon(ctx, "10.0.0.7", "test")
		if err := c.status("10.0.0.7", testdata(t, "status.json")); err != nil {
			t.Fatal(err)
		}
		check(StateReady, true, "")
		e.clock.Add(time.Second)
		if err := c.status("10.0.0.7", []byte(`{"conditions":[{"type":"Ready","status":"False"}]}`)); err != nil {
			t.Fatal(err)
		}
		check(StateNotReady, false, ReasonReportedNotReady)
		want := []string{EventJoined, EventSuspect, EventDown, EventLost, EventCordoned, EventUncordoned, EventRecovered, EventNotReady}
		if got := e.eventTypes("10.0.0.7"); !slices.Equal(got, want) {
			t.Errorf("events = %v, want %v", got, want)
		}
		for _, typ := range want[1:] {
			if v := counterValue(t, e.reg, typ); v != 1 {
				t.Errorf("cubefleet_node_events_total{type=%q} = %v, want 1", typ, v)
			}
		}
	})
}

// TestReportAfterAnUnobservedLoss reports from a node readers see as Lost before the health
// loop has noticed: the loss still gets its event, before the recovery.
func TestReportAfterAnUnobservedLoss(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		c := newCubelet(t, e.url)
		if err := c.register(testdata(t, "register.json")); err != nil {
			t.Fatal(err)
		}
		if err := c.status("10.0.0.7", testdata(t, "status.json")); err != nil {
			t.Fatal(err)
		}
		e.reg.CheckHealth(ctx)
		e.clock.Add(31 * time.Second)
		e.reg.CheckHealth(ctx) // Down
		e.clock.Add(5 * time.Minute)
		if v, _ := e.reg.Get(ctx, "10.0.0.7"); v.State != StateLost {
			t.Fatalf("state after 5 min of silence = %s, want Lost", v.State)
		}
		if err := c.status("10.0.0.7", testdata(t, "status.json")); err != nil {
			t.Fatal(err)
		}
		e.reg.CheckHealth(ctx)
		want := []string{EventJoined, EventDown, EventLost, EventRecovered}
		if got := e.eventTypes("10.0.0.7"); !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
	})
}

// TestRestartGrace restarts the registry an hour after its nodes last reported: none is
// marked Suspect for a full heartbeat timeout, and a node that was Lost before stays Lost. No
// events come from the restart itself.
func TestRestartGrace(t *testing.T) {
	eachEnv(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		c := newCubelet(t, e.url)
		for _, id := range []string{"10.0.0.7", "10.0.0.8"} {
			if err := c.register(withNode(t, id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.status("10.0.0.8", testdata(t, "status.json")); err != nil {
			t.Fatal(err)
		}
		e.reg.CheckHealth(ctx)
		e.clock.Add(6 * time.Minute) // 10.0.0.8 goes silent and is Lost
		if err := c.status("10.0.0.7", testdata(t, "status.json")); err != nil {
			t.Fatal(err)
		}
		e.reg.CheckHealth(ctx)
		before := e.eventTypes("10.0.0.8")
		e.clock.Add(time.Hour) // the server is down for an hour
		e = e.restart()
		state := func(id string) State {
			t.Helper()
			v, err := e.reg.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return v.State
		}
		e.reg.CheckHealth(ctx)
		if s7, s8 := state("10.0.0.7"), state("10.0.0.8"); s7 != StateReady || s8 != StateLost {
			t.Fatalf("after the restart: %s %s, want Ready Lost", s7, s8)
		}
		e.clock.Add(15 * time.Second)
		e.reg.CheckHealth(ctx)
		if s := state("10.0.0.7"); s != StateReady {
			t.Errorf("one timeout after the restart: %s, want Ready", s)
		}
		e.clock.Add(time.Second)
		e.reg.CheckHealth(ctx)
		if s := state("10.0.0.7"); s != StateSuspect {
			t.Errorf("past one timeout after the restart: %s, want Suspect", s)
		}
		if got := e.eventTypes("10.0.0.8"); !slices.Equal(got, before) {
			t.Errorf("the restart made events for the lost node: %v, before %v", got, before)
		}
		if got := e.eventTypes("10.0.0.7"); !slices.Equal(got, []string{EventJoined, EventSuspect}) {
			t.Errorf("events of 10.0.0.7 = %v", got)
		}
		// The restored node kept its registration and inventory.
		_, body := e.do(http.MethodGet, NodesPrefix+"/10.0.0.8", "", nil)
		n := decodeObject(t, body)
		if n["MaxMvmLimit"] != 312.0 || len(n["LocalTemplates"].([]any)) != 2 || n["mvm_num"] != 4.0 {
			t.Errorf("restored node: %v", n)
		}
	})
}
