package nodes_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

func TestHealth(t *testing.T) {
	start := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	p := nodes.HealthPolicy{Timeout: 15 * time.Second, LostAfter: 5 * time.Minute, Started: start.Add(-time.Hour)}
	for _, c := range []struct {
		age      time.Duration
		ready    bool
		interval time.Duration
		want     nodes.State
	}{
		{0, true, time.Second, nodes.StateReady},
		{-time.Hour, true, time.Second, nodes.StateReady}, // a report "from the future" is fresh
		{15 * time.Second, true, time.Second, nodes.StateReady},
		{15*time.Second + time.Millisecond, true, time.Second, nodes.StateSuspect},
		{0, false, time.Second, nodes.StateNotReady},
		{15 * time.Second, false, time.Second, nodes.StateNotReady},
		{16 * time.Second, false, time.Second, nodes.StateSuspect},
		{30 * time.Second, true, time.Second, nodes.StateSuspect},
		{30*time.Second + time.Millisecond, true, time.Second, nodes.StateDown},
		{5*time.Minute - time.Millisecond, true, time.Second, nodes.StateDown},
		{5 * time.Minute, true, time.Second, nodes.StateLost},
		{50 * time.Hour, false, time.Second, nodes.StateLost},
		// The window is twice the observed interval when that is longer than the timeout.
		{20 * time.Second, true, 10 * time.Second, nodes.StateReady},
		{20*time.Second + time.Millisecond, true, 10 * time.Second, nodes.StateSuspect},
		{40*time.Second + time.Millisecond, true, 10 * time.Second, nodes.StateDown},
		// Until the interval is observed, the window is the timeout itself.
		{15 * time.Second, true, 0, nodes.StateReady},
		{15*time.Second + time.Millisecond, true, 0, nodes.StateSuspect},
		{30*time.Second + time.Millisecond, true, 0, nodes.StateDown},
		// At most a third of lost-after: Down before Lost.
		{100 * time.Second, true, 4 * time.Minute, nodes.StateReady},
		{100*time.Second + time.Millisecond, true, 4 * time.Minute, nodes.StateSuspect},
		{200*time.Second + time.Millisecond, true, 4 * time.Minute, nodes.StateDown},
	} {
		t.Run(fmt.Sprintf("%s/%v/%s", c.age, c.ready, c.interval), func(t *testing.T) {
			h := nodes.Heartbeats{Last: start, Ready: c.ready, Interval: c.interval}
			if got := nodes.Health(start.Add(c.age), h, p); got != c.want {
				t.Errorf("Health(age %s, ready %v, interval %s) = %s, want %s", c.age, c.ready, c.interval, got, c.want)
			}
		})
	}
}

// TestHealthAfterStart: a node with no report since the server started is Unknown for one
// window after the start, then what its last report makes it; a report since the start counts
// at once.
func TestHealthAfterStart(t *testing.T) {
	start := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	p := nodes.HealthPolicy{Timeout: 15 * time.Second, LostAfter: 5 * time.Minute, Started: start}
	for _, c := range []struct {
		last, now time.Duration // since the start
		interval  time.Duration
		want      nodes.State
	}{
		{-time.Second, 0, time.Second, nodes.StateUnknown},
		{-55 * time.Second, 0, time.Second, nodes.StateUnknown},
		{-time.Hour, 0, time.Second, nodes.StateUnknown},
		{-time.Second, 15 * time.Second, time.Second, nodes.StateUnknown},
		{-time.Second, 15*time.Second + time.Millisecond, time.Second, nodes.StateSuspect},
		{-55 * time.Second, 15*time.Second + time.Millisecond, time.Second, nodes.StateDown},
		{-time.Hour, 15*time.Second + time.Millisecond, time.Second, nodes.StateLost},
		{-time.Second, 20 * time.Second, 10 * time.Second, nodes.StateUnknown}, // its window is 20 s
		{-time.Second, 15 * time.Second, 0, nodes.StateUnknown},                // and the timeout unobserved
		{-time.Second, 15*time.Second + time.Millisecond, 0, nodes.StateSuspect},
		{0, 0, time.Second, nodes.StateReady}, // a report at the start counts
		{time.Second, 2 * time.Second, time.Second, nodes.StateReady},
	} {
		t.Run(fmt.Sprintf("%s/%s", c.last, c.now), func(t *testing.T) {
			h := nodes.Heartbeats{Last: start.Add(c.last), Ready: true, Interval: c.interval}
			if got := nodes.Health(start.Add(c.now), h, p); got != c.want {
				t.Errorf("Health(last %s, now %s after the start) = %s, want %s", c.last, c.now, got, c.want)
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

// reportEverySecond sends two status reports of node id a second apart: the registry observes
// an interval of 1 s, so the node's heartbeat window is the timeout.
func reportEverySecond(t *testing.T, e *nodetest.Env, c *nodetest.Cubelet, id string) {
	t.Helper()
	for i := range 2 {
		if i > 0 {
			e.Clock.Add(time.Second)
		}
		if err := c.Status(id, nodetest.Status()); err != nil {
			t.Fatal(err)
		}
	}
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
		reportEverySecond(t, e, c, "10.0.0.7")
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
		reportEverySecond(t, e, c, "10.0.0.7")
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

// TestUnknownAfterRestart: after a restart no node is Ready until it reports. Nodes that were
// Lost, Down and Ready are Unknown (not Ready, not schedulable, Healthy false on the wire,
// counted as Unknown) and make no events, until they report or one heartbeat window has passed
// since the start; then they are what their last report makes them, without an event they had
// already had.
func TestUnknownAfterRestart(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		const lost, down, ready, silent = "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8"
		ids := []string{lost, down, ready, silent}
		report := func(id string) {
			t.Helper()
			if err := c.Status(id, nodetest.Status()); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids {
			if err := c.Register(nodetest.WithNode(id)); err != nil {
				t.Fatal(err)
			}
			report(id)
		}
		// Every node reports every 5 s; lost stops after its second report, down 55 s before
		// the restart.
		for step := range 80 {
			e.Clock.Add(5 * time.Second)
			for _, id := range ids {
				if (id != lost || step == 0) && (id != down || step < 69) {
					report(id)
				}
			}
			e.Reg.CheckHealth(ctx)
		}
		before := map[string][]string{}
		for _, id := range ids {
			before[id] = e.EventTypes(id)
		}
		if want := []string{nodes.EventJoined, nodes.EventSuspect, nodes.EventDown}; !slices.Equal(before[down], want) {
			t.Fatalf("events of %s before the restart: %v, want %v", down, before[down], want)
		}
		if want := []string{nodes.EventJoined, nodes.EventSuspect, nodes.EventDown, nodes.EventLost}; !slices.Equal(before[lost], want) {
			t.Fatalf("events of %s before the restart: %v, want %v", lost, before[lost], want)
		}

		e.Clock.Add(5 * time.Second) // the server is down for 5 s
		e = e.Restart()
		c = nodetest.NewCubelet(e.URL)
		get := func(id string) nodes.View {
			t.Helper()
			v, err := e.Reg.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		unknown := nodes.StateUnknown
		wantState := func(when string, want map[string]nodes.State) {
			t.Helper()
			e.Reg.CheckHealth(ctx)
			for id, s := range want {
				v := get(id)
				if v.State != s {
					t.Errorf("%s: %s is %s, want %s", when, id, v.State, s)
				}
				if v.State != nodes.StateReady && (v.Healthy || v.Schedulable) {
					t.Errorf("%s: %s is %s, healthy %v, schedulable %v", when, id, v.State, v.Healthy, v.Schedulable)
				}
				if s == nodes.StateUnknown && (v.ReportedSinceStart || v.UnhealthyReason != nodeapi.ReasonNoReportSinceStart || v.StateSince == 0 ||
					!slices.Contains(v.UnschedulableReasons, "not ready: Unknown (no report since this server started)")) {
					t.Errorf("%s: %s: %+v", when, id, v)
				}
				if v.State == nodes.StateReady && !v.ReportedSinceStart {
					t.Errorf("%s: %s is Ready without a report since the start", when, id)
				}
				_, body := e.Do(http.MethodGet, nodeapi.NodesPrefix+"/"+id, "", nil)
				if n := nodetest.DecodeObject(t, body); n["Healthy"] != (s == nodes.StateReady) ||
					s == nodes.StateUnknown && n["UnhealthyReason"] != nodeapi.ReasonNoReportSinceStart {
					t.Errorf("%s: %s on the wire: Healthy %v %v", when, id, n["Healthy"], n["UnhealthyReason"])
				}
			}
		}
		wantState("after the restart", map[string]nodes.State{lost: unknown, down: unknown, ready: unknown, silent: unknown})
		if n := gaugeValue(t, e.Reg, unknown); n != 4 {
			t.Errorf("cubefleet_nodes{state=\"Unknown\"} = %v, want 4", n)
		}
		// The restored node kept its registration and inventory.
		_, body := e.Do(http.MethodGet, nodeapi.NodesPrefix+"/"+lost, "", nil)
		if n := nodetest.DecodeObject(t, body); n["MaxMvmLimit"] != 312.0 || len(n["LocalTemplates"].([]any)) != 2 || n["mvm_num"] != 4.0 {
			t.Errorf("restored node: %v", n)
		}
		report(ready)
		wantState("after a report", map[string]nodes.State{ready: nodes.StateReady, down: unknown})
		e.Clock.Add(5 * time.Second)
		report(ready)
		e.Clock.Add(10 * time.Second) // one window (15 s) after the start
		report(ready)
		wantState("one window after the start", map[string]nodes.State{lost: unknown, down: unknown, ready: nodes.StateReady, silent: unknown})
		e.Clock.Add(time.Second)
		report(ready)
		wantState("past one window", map[string]nodes.State{lost: nodes.StateLost, down: nodes.StateDown, ready: nodes.StateReady, silent: nodes.StateSuspect})
		if gaugeValue(t, e.Reg, unknown) != 0 || gaugeValue(t, e.Reg, nodes.StateLost) != 1 || gaugeValue(t, e.Reg, nodes.StateDown) != 1 {
			t.Errorf("gauges past one window: Unknown %v, Lost %v, Down %v", gaugeValue(t, e.Reg, unknown), gaugeValue(t, e.Reg, nodes.StateLost), gaugeValue(t, e.Reg, nodes.StateDown))
		}
		for _, id := range []string{lost, down, ready} {
			if got := e.EventTypes(id); !slices.Equal(got, before[id]) {
				t.Errorf("events of %s after the restart: %v, before it %v", id, got, before[id])
			}
		}
		if got, want := e.EventTypes(silent), append(before[silent], nodes.EventSuspect); !slices.Equal(got, want) {
			t.Errorf("events of %s, Ready before the restart and silent since: %v, want %v", silent, got, want)
		}
		report(down)
		wantState("the Down node reports", map[string]nodes.State{down: nodes.StateReady})
		if got, want := e.EventTypes(down), append(before[down], nodes.EventRecovered); !slices.Equal(got, want) {
			t.Errorf("events of %s after it reported: %v, want %v", down, got, want)
		}
	})
}

// TestNoFlappingNearTheReportInterval: with a heartbeat timeout of 10 s, a node reporting every
// 10 s (+-4% jitter, up to 500 ms on the way) stays Ready for 30 simulated minutes with no
// event, the health loop running every second; once it stops it is Suspect within its window
// (twice its observed interval) and Down after two.
func TestNoFlappingNearTheReportInterval(t *testing.T) {
	nodetest.Each(t, func(c *nodetest.Config) { c.Registry.HeartbeatTimeout = 10 * time.Second }, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		rng := rand.New(rand.NewPCG(11, 8))
		start := e.Clock.Now()
		var arrivals []time.Duration // since start
		for sent := time.Duration(0); sent < 30*time.Minute; sent += time.Duration(float64(10*time.Second) * (0.96 + 0.08*rng.Float64())) {
			arrivals = append(arrivals, sent+time.Duration(rng.Int64N(int64(500*time.Millisecond))))
		}
		if err := c.Register(nodetest.Register()); err != nil {
			t.Fatal(err)
		}
		setClock := func(at time.Duration) { e.Clock.Add(start.Add(at).Sub(e.Clock.Now())) }
		states := map[nodes.State]int{}
		check := func() {
			t.Helper()
			e.Reg.CheckHealth(ctx)
			v, err := e.Reg.Get(ctx, "10.0.0.7")
			if err != nil {
				t.Fatal(err)
			}
			states[v.State]++
		}
		tick := time.Second // the health loop's
		for i, at := range arrivals {
			for ; tick < at; tick += time.Second {
				setClock(tick)
				if i > 0 {
					check()
				}
			}
			setClock(at)
			if err := c.Status("10.0.0.7", nodetest.Status()); err != nil {
				t.Fatal(err)
			}
			check()
		}
		if got := e.EventTypes("10.0.0.7"); !slices.Equal(got, []string{nodes.EventJoined}) || len(states) != 1 {
			t.Errorf("30 minutes of reports every 10 s +-4%%: events %v, states seen %v", got, states)
		}

		// It stops: Suspect once its window (twice the observed interval) has passed, Down after
		// two.
		v, err := e.Reg.Get(ctx, "10.0.0.7")
		if err != nil {
			t.Fatal(err)
		}
		interval, window := time.Duration(v.ReportIntervalMs)*time.Millisecond, time.Duration(v.HeartbeatWindowMs)*time.Millisecond
		if interval < 9600*time.Millisecond || interval > 10900*time.Millisecond || window != 2*interval {
			t.Fatalf("observed interval %s, window %s: want about 10 s and twice that", interval, window)
		}
		last := arrivals[len(arrivals)-1]
		for _, c := range []struct {
			after time.Duration
			want  nodes.State
		}{{window, nodes.StateReady}, {window + time.Millisecond, nodes.StateSuspect}, {2 * window, nodes.StateSuspect}, {2*window + time.Millisecond, nodes.StateDown}} {
			setClock(last + c.after)
			e.Reg.CheckHealth(ctx)
			if v, _ := e.Reg.Get(ctx, "10.0.0.7"); v.State != c.want {
				t.Errorf("%s after the last report: %s, want %s", c.after, v.State, c.want)
			}
		}
		if got, want := e.EventTypes("10.0.0.7"), []string{nodes.EventJoined, nodes.EventSuspect, nodes.EventDown}; !slices.Equal(got, want) {
			t.Errorf("events once it stopped: %v, want %v", got, want)
		}
	})
}
