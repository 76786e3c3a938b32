package nodehttp_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes/nodehttp"
	"github.com/cubefleet/cubefleet/internal/nodes/nodetest"
)

// TestRefusalsSummarizedPerPeer: a client without credentials that names another node in the
// path on every call (once 6,700 audit rows a second from 8 connections) writes O(1) rows a
// minute: refusals are summarized per peer address and reason, one row a minute with the
// count, and every refusal is counted in cubefleet_node_agent_refusals_total.
func TestRefusalsSummarizedPerPeer(t *testing.T) {
	nodetest.Each(t, func(c *nodetest.Config) { c.HTTP.AllowUnauthenticated = nil }, func(t *testing.T, e *nodetest.Env) {
		from := nodetest.From("127.0.0.7")
		status := nodetest.Status()
		const minutes, perMinute = 3, 200
		for m := range minutes {
			for i := range perMinute {
				if code, body := e.Call(from, "POST", nodeapi.StatusPath(fmt.Sprintf("10.%d.%d.%d", m, i/256, i%256)), "", status); code != 401 {
					t.Fatalf("a call without credentials: %d %s", code, body)
				}
			}
			e.Clock.Add(time.Minute)
		}
		e.Clock.Add(2 * time.Minute)
		e.HTTP.FlushRefusals()
		e.Flush()
		rows := e.Count(`SELECT count(*) FROM audit_log WHERE outcome <> 'ok'`)
		if rows > minutes+1 {
			t.Errorf("%d calls with %d node ids in %d minutes wrote %d audit rows, want at most %d", minutes*perMinute, minutes*perMinute, minutes, rows, minutes+1)
		}
		if n := e.Count(`SELECT coalesce(sum(call_count), 0) FROM audit_log WHERE outcome <> 'ok'`); n != minutes*perMinute {
			t.Errorf("the audit rows count %d refusals, want %d", n, minutes*perMinute)
		}
		if n := counterSum(t, e.HTTP, "cubefleet_node_agent_refusals_total"); n != minutes*perMinute {
			t.Errorf("cubefleet_node_agent_refusals_total = %v, want %d", n, minutes*perMinute)
		}
	})
}

// counterSum returns the sum of the samples of the counter named name among h's collectors.
func counterSum(t *testing.T, h *nodehttp.Handler, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
