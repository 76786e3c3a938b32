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
		if want := now.Add(e.Reg.HeartbeatTimeout()); !st.ReadyUntil.Equal(want) {
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
// Health stops calling it Ready.
func TestReadyUntilIsHealth(t *testing.T) {
	nodetest.Each(t, nil, func(t *testing.T, e *nodetest.Env) {
		c := nodetest.NewCubelet(e.URL)
		if err := c.Register(nodetest.WithNode("10.0.0.9")); err != nil {
			t.Fatal(err)
		}
		if err := c.Status("10.0.0.9", nodetest.Status()); err != nil {
			t.Fatal(err)
		}
		all, _ := e.Reg.Nodes(context.Background())
		until := all[0].ReadyUntil
		v, _ := e.Reg.Get(context.Background(), "10.0.0.9")
		last := time.UnixMilli(v.LastReportAt)
		timeout, lost := e.Reg.HeartbeatTimeout(), e.Reg.LostAfter()
		if got := nodes.Health(until, last, true, timeout, lost); got != nodes.StateReady {
			t.Errorf("Health at ReadyUntil: %s", got)
		}
		if got := nodes.Health(until.Add(time.Millisecond), last, true, timeout, lost); got == nodes.StateReady {
			t.Errorf("Health a millisecond after ReadyUntil: %s", got)
		}
		if all[0].Cubefleet {
			t.Error("a stock Cubelet counted as cubefleet's agent")
		}
	})
}
