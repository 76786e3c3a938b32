package nodes

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registry's Prometheus collectors; the server registers them on its own
// registry (Registry.Collectors). The per-report counters are resolved once, so the hot path
// only increments.
type metrics struct {
	nodes       *prometheus.GaugeVec
	events      *prometheus.CounterVec
	reports     *prometheus.CounterVec
	registers   *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	flushes     *prometheus.CounterVec
	flushRows   prometheus.Counter
	flushTime   prometheus.Histogram
	pending     prometheus.Gauge
	listTime    prometheus.Histogram
	reportTime  prometheus.Histogram
	reportOK    prometheus.Counter
	reportBad   prometheus.Counter
	reportGone  prometheus.Counter
	reportAuth  prometheus.Counter
	reportLarge prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cubefleet_nodes",
			Help: "Registered nodes by health state (Ready, NotReady, Suspect, Down, Lost), as of the last health check.",
		}, []string{"state"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_node_events_total",
			Help: "Node lifecycle events by type (node.joined, node.suspect, node.down, node.lost, node.recovered, node.cordoned, node.uncordoned, node.draining, node.drained, node.deleted, node.notReady).",
		}, []string{"type"}),
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
			Help: "Refused node-agent and internal-route calls by reason (each is audited; repeats are summarized).",
		}, []string{"reason"}),
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_node_flushes_total",
			Help: "Writes of coalesced node state to the database, by result (ok, error).",
		}, []string{"result"}),
		flushRows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cubefleet_node_flush_rows_total",
			Help: "Node status rows written by the flusher.",
		}),
		flushTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubefleet_node_flush_duration_seconds",
			Help:    "Duration of one flush of coalesced node state, in seconds.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
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
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cubefleet_node_pending_writes",
			Help: "Registration rows, deletions, events and audit rows waiting for the next flush.",
		}),
	}
	m.reportOK = m.reports.WithLabelValues("ok")
	m.reportBad = m.reports.WithLabelValues("invalid")
	m.reportGone = m.reports.WithLabelValues("unknown")
	m.reportAuth = m.reports.WithLabelValues("unauthenticated")
	m.reportLarge = m.reports.WithLabelValues("too_large")
	for _, s := range States {
		m.nodes.WithLabelValues(string(s))
	}
	for _, t := range EventTypes {
		m.events.WithLabelValues(t)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.nodes, m.events, m.reports, m.registers, m.refusals, m.flushes, m.flushRows, m.flushTime, m.pending, m.listTime, m.reportTime}
}

// Collectors returns the registry's Prometheus collectors, for the server's registry:
// cubefleet_nodes{state}, cubefleet_node_events_total{type},
// cubefleet_node_reports_total{result}, cubefleet_node_registrations_total{result},
// cubefleet_node_agent_refusals_total{reason}, cubefleet_node_flushes_total{result},
// cubefleet_node_flush_rows_total, cubefleet_node_flush_duration_seconds,
// cubefleet_node_report_duration_seconds, cubefleet_node_list_duration_seconds and
// cubefleet_node_pending_writes.
func (r *Registry) Collectors() []prometheus.Collector { return r.m.collectors() }
