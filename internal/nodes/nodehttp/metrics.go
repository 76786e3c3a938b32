package nodehttp

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the routes' Prometheus collectors (Handler.Collectors). The per-report counters
// are resolved once, so the hot path only increments.
type metrics struct {
	reports     *prometheus.CounterVec
	registers   *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	listTime    prometheus.Histogram
	reportTime  prometheus.Histogram
	reportOK    prometheus.Counter
	reportBad   prometheus.Counter
	reportGone  prometheus.Counter
	reportAuth  prometheus.Counter
	reportLarge prometheus.Counter
	work        *prometheus.CounterVec
	events      *prometheus.CounterVec
	assignments prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_node_reports_total",
			Help: "Node status reports by result: ok, invalid (400), unknown (404), unauthenticated (401), too_large (413).",
		}, []string{"result"}),
		registers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_node_registrations_total",
			Help: "Node registrations by result: ok, ok_journaled (answered once journaled to disk while the database was busy), refused, invalid.",
		}, []string{"result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_node_agent_refusals_total",
			Help: "Refused node-agent and internal-route calls by reason (audited summarized per peer address and reason: the first at once, then one row a minute with the count).",
		}, []string{"reason"}),
		reportTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubefleet_node_report_duration_seconds",
			Help:    "Time the server spends on one status report, from its arrival to its answer, in seconds.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		listTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubefleet_node_list_duration_seconds",
			Help:    "Time to build the answer of GET /internal/v1/nodes, in seconds.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
	}
	m.work = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cubefleet_node_work_requests_total",
		Help: "Work requests (the agents' long polls) by result: ok, refused (401/403/404), invalid (400/413), error.",
	}, []string{"result"})
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cubefleet_node_sandbox_events_total",
		Help: "Sandbox events from agents by result: ok, refused_or_invalid, or the error code (NOT_FOUND: no such sandbox on the node).",
	}, []string{"result"})
	m.assignments = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cubefleet_node_assignments_offered_total",
		Help: "Assignments offered to agents in work answers (an assignment is offered again until the agent reports it done).",
	})
	m.reportOK = m.reports.WithLabelValues("ok")
	m.reportBad = m.reports.WithLabelValues("invalid")
	m.reportGone = m.reports.WithLabelValues("unknown")
	m.reportAuth = m.reports.WithLabelValues("unauthenticated")
	m.reportLarge = m.reports.WithLabelValues("too_large")
	return m
}

// Collectors returns the routes' Prometheus collectors, for the server's registry:
// cubefleet_node_reports_total{result}, cubefleet_node_registrations_total{result},
// cubefleet_node_agent_refusals_total{reason}, cubefleet_node_report_duration_seconds,
// cubefleet_node_list_duration_seconds, cubefleet_node_work_requests_total{result},
// cubefleet_node_sandbox_events_total{result} and cubefleet_node_assignments_offered_total.
func (h *Handler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{h.m.reports, h.m.registers, h.m.refusals, h.m.listTime, h.m.reportTime, h.m.work, h.m.events, h.m.assignments}
}
