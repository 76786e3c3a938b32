package nodestore

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's Prometheus collectors (Store.Collectors).
type metrics struct {
	flushes   *prometheus.CounterVec
	flushRows prometheus.Counter
	flushTime prometheus.Histogram
	pending   prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
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
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cubefleet_node_pending_writes",
			Help: "Registration rows, deletions, events and audit rows waiting for the next flush.",
		}),
	}
}

// Collectors returns the store's Prometheus collectors, for the server's registry:
// cubefleet_node_flushes_total{result}, cubefleet_node_flush_rows_total,
// cubefleet_node_flush_duration_seconds and cubefleet_node_pending_writes.
func (s *Store) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.m.flushes, s.m.flushRows, s.m.flushTime, s.m.pending}
}
