package nodes_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
	"github.com/cubefleet/cubefleet/internal/scheduler"
)

// states collects what a registry tells a subscriber, by node id.
type states struct {
	mu   sync.Mutex
	last map[string]scheduler.NodeState
	gone map[string]bool
}

func (s *states) get(id string) (scheduler.NodeState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.last[id]
	return st, ok
}

// TestSchedulerFeed: the registry tells the scheduler every change of a node as it happens,
// with its health as ReadyUntil from the one health function, and the scheduler places only on
// a node that reported since this server started.
func TestSchedulerFeed(t *testing.T) {
	nodetest.Each(t, func(c *nodetest.Config) { c.HTTP.Authenticate = nodetest.FakeKeys }, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		got := &states{last: map[string]scheduler.NodeState{}, gone: map[string]bool{}}
		cancel := e.Reg.Subscribe(func(st scheduler.NodeState, deleted bool) {
			got.mu.Lock()
			defer got.mu.Unlock()
			got.last[st.ID], got.gone[st.ID] = st, deleted
		})
		defer cancel()
		a := nodetest.From("127.0.0.1")
		join := e.JoinToken(nodes.JoinTokenInput{IP: "127.0.0.1"})
		code, body := e.Call(a, "POST", nodeapi.PathRegister, join, nodetest.WithNode("127.0.0.1"))
		if code != 200 {
			t.Fatalf("join: %d %s", code, body)
		}
		var joined nodeapi.RegisterResponse
		json.Unmarshal(body, &joined)
		report := func() {
			t.Helper()
			if code, body := e.Call(a, "POST", nodeapi.AgentPrefix+"/nodes/127.0.0.1/status", joined.NodeCredential, nodetest.Status()); code != 200 {
				t.Fatalf("report: %d %s", code, body)
			}
		}
		report()
		st, ok := got.get("127.0.0.1")
		if !ok || !st.Cubefleet || st.Pool != nodetest.Pool.ID || !st.Ready || !st.HasMetrics || st.MvmNum != 4 {
			t.Fatalf("state after a report: %+v", st)
		}
		now := e.Clock.Now()
		if want := now.Add(e.Reg.HealthPolicy().Window(0)); !st.ReadyUntil.Equal(want) { // one report: its interval is not observed yet
			t.Errorf("ReadyUntil %s, want %s", st.ReadyUntil, want)
		}
		e.Clock.Add(time.Second)
		report()
		if st, _ := got.get("127.0.0.1"); st.ReportPeriod != time.Second || len(st.Templates) == 0 {
			t.Errorf("period %s templates %v", st.ReportPeriod, st.Templates)
		}

		s, err := scheduler.New(scheduler.Options{Now: e.Clock.Now, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		all, _ := e.Reg.Nodes(ctx)
		for _, st := range all {
			s.Update(st)
		}
		req := scheduler.Request{SandboxID: "sbx_1", Pool: nodetest.Pool.ID, CPU: 100, MemoryMiB: 128}
		if _, err := s.Decide(ctx, req); err != nil {
			t.Fatalf("a Ready node that just reported: %v", err)
		}

		if _, err := e.Reg.Cordon(ctx, "127.0.0.1", "disk", nodes.Actor("svc_admin")); err != nil {
			t.Fatal(err)
		}
		if st, _ := got.get("127.0.0.1"); !st.Cordoned {
			t.Error("the cordon did not reach the subscriber")
		}

		// A restart: the node is known from the database only until it reports again.
		e.Clock.Add(time.Second)
		e2 := e.Restart()
		all, _ = e2.Reg.Nodes(ctx)
		if len(all) != 1 || all[0].ReportedSinceStart {
			t.Fatalf("after a restart: %+v", all)
		}
		e2.Clock.Add(time.Second)
		if code, body := e2.Call(a, "POST", nodeapi.AgentPrefix+"/nodes/127.0.0.1/status", joined.NodeCredential, nodetest.Status()); code != 200 {
			t.Fatalf("report after the restart: %d %s", code, body)
		}
		if all, _ = e2.Reg.Nodes(ctx); !all[0].ReportedSinceStart {
			t.Error("a report after the restart does not count")
		}
		cancel2 := e2.Reg.Subscribe(func(st scheduler.NodeState, deleted bool) {
			got.mu.Lock()
			defer got.mu.Unlock()
			got.last[st.ID], got.gone[st.ID] = st, deleted
		})
		defer cancel2()
		if _, err := e2.Reg.Delete(ctx, "127.0.0.1", true, nodes.Actor("svc_admin")); err != nil {
			t.Fatal(err)
		}
		got.mu.Lock()
		if !got.gone["127.0.0.1"] {
			t.Error("the deletion did not reach the subscriber")
		}
		got.mu.Unlock()
	})
}

// TestReadyUntilIsHealth: the instant the scheduler stops placing on a node is the instant
// Health stops calling it Ready: after one report (its interval not observed), after reports
// 10 s apart (its window is then 20 s), after a slower one (the scheduler's report period is the
// same smoothed interval), and never for a node with no report since a restart.
func TestReadyUntilIsHealth(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		ctx := context.Background()
		c := nodetest.NewCubelet(e.URL)
		if err := c.Register(nodetest.WithNode("10.0.0.9")); err != nil {
			t.Fatal(err)
		}
		check := func(when string, e *nodetest.Env) {
			t.Helper()
			all, _ := e.Reg.Nodes(ctx)
			until := all[0].ReadyUntil
			v, _ := e.Reg.Get(ctx, "10.0.0.9")
			h := nodes.Heartbeats{Last: time.UnixMilli(v.LastReportAt), Ready: true, Interval: time.Duration(v.ReportIntervalMs) * time.Millisecond}
			p := e.Reg.HealthPolicy()
			if until.IsZero() {
				if v.State == nodes.StateReady || v.ReportedSinceStart {
					t.Errorf("%s: no ReadyUntil for a node that is %s (reported since the start: %v)", when, v.State, v.ReportedSinceStart)
				}
				return
			}
			if got := nodes.Health(until, h, p); got != nodes.StateReady {
				t.Errorf("%s: Health at ReadyUntil: %s", when, got)
			}
			if got := nodes.Health(until.Add(time.Millisecond), h, p); got == nodes.StateReady {
				t.Errorf("%s: Health a millisecond after ReadyUntil: %s", when, got)
			}
			if want := h.Last.Add(time.Duration(v.HeartbeatWindowMs) * time.Millisecond); !until.Equal(want) {
				t.Errorf("%s: ReadyUntil %s, want the last report plus the window, %s", when, until, want)
			}
		}
		if err := c.Status("10.0.0.9", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		check("one report", e)
		for range 2 {
			e.Clock.Add(10 * time.Second)
			if err := c.Status("10.0.0.9", nodetest.Status()); err != nil {
				t.Fatal(err)
			}
		}
		check("reports 10 s apart", e)
		if all, _ := e.Reg.Nodes(ctx); all[0].Cubefleet || all[0].ReportPeriod != 10*time.Second {
			t.Errorf("a stock Cubelet reporting every 10 s: cubefleet %v, report period %s", all[0].Cubefleet, all[0].ReportPeriod)
		}
		// A slower report: the period behind the metrics' freshness is the smoothed interval the
		// window is twice of (10 s moved half way to 20 s), not the last gap.
		e.Clock.Add(20 * time.Second)
		if err := c.Status("10.0.0.9", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		check("a gap of 20 s", e)
		v, _ := e.Reg.Get(ctx, "10.0.0.9")
		if all, _ := e.Reg.Nodes(ctx); all[0].ReportPeriod != 15*time.Second || v.ReportIntervalMs != 15000 || v.HeartbeatWindowMs != 30000 {
			t.Errorf("after a gap of 20 s: report period %s, observed interval %d ms, window %d ms; want 15 s, 15000, 30000", all[0].ReportPeriod, v.ReportIntervalMs, v.HeartbeatWindowMs)
		}
		e.Clock.Add(time.Second)
		e = e.Restart()
		check("after a restart", e)
		if all, _ := e.Reg.Nodes(ctx); !all[0].ReadyUntil.IsZero() || all[0].ReportedSinceStart {
			t.Errorf("after a restart: %+v", all[0])
		}
	})
}
