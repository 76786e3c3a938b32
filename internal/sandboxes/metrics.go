package sandboxes

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sandboxes' Prometheus collectors; the server registers them (Collectors).
type metrics struct {
	createdN *prometheus.CounterVec
	endedN   *prometheus.CounterVec
	lostBy   *prometheus.CounterVec
	toRun    *prometheus.HistogramVec
	sweeps   prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		createdN: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_sandboxes_created_total",
			Help: "Sandboxes created, by how: placed at once, waiting for room, claimed from a warm pool, or warm (a warm pool's own).",
		}, []string{"path"}),
		endedN: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_sandboxes_ended_total",
			Help: "Sandboxes that ended, by final state (exited, failed, killed, lost).",
		}, []string{"state"}),
		lostBy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_sandboxes_lost_total",
			Help: "Sandboxes the control plane found lost, by reason (node_down, node_deleted, not_listed, start_timeout).",
		}, []string{"reason"}),
		toRun: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cubefleet_sandbox_start_seconds",
			Help:    "Seconds from a create (or a warm pool's start) to the sandbox running, as seen by this replica, by path (cold, warm).",
			Buckets: []float64{.005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60},
		}, []string{"path"}),
		sweeps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cubefleet_sandboxes_swept_total",
			Help: "Ended sandboxes removed after --result-retention (or after a delete), with their results.",
		}),
	}
	for _, p := range []string{"placed", "waiting", "claimed", "warm"} {
		m.createdN.WithLabelValues(p)
	}
	for _, s := range []State{StateExited, StateFailed, StateKilled, StateLost} {
		m.endedN.WithLabelValues(string(s))
	}
	return m
}

// Collectors returns the sandboxes' Prometheus collectors: cubefleet_sandboxes_created_total{path},
// cubefleet_sandboxes_ended_total{state}, cubefleet_sandboxes_lost_total{reason},
// cubefleet_sandbox_start_seconds{path} and cubefleet_sandboxes_swept_total.
func (s *Service) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.m.createdN, s.m.endedN, s.m.lostBy, s.m.toRun, s.m.sweeps}
}

func (m *metrics) created(r *record, placed bool) {
	switch {
	case r.Warm:
		m.createdN.WithLabelValues("warm").Inc()
	case placed:
		m.createdN.WithLabelValues("placed").Inc()
	default:
		m.createdN.WithLabelValues("waiting").Inc()
	}
}

func (m *metrics) claimed() { m.createdN.WithLabelValues("claimed").Inc() }

func (m *metrics) running(r *record, now int64) {
	path := "cold"
	if r.Warm && r.ClaimedAt != 0 {
		path = "warm"
	}
	if r.CreatedAt > 0 && now >= r.CreatedAt {
		m.toRun.WithLabelValues(path).Observe(float64(now-r.CreatedAt) / 1000)
	}
}

func (m *metrics) placedLate(*record, int64) {}

func (m *metrics) ended(_ *record, s State) { m.endedN.WithLabelValues(string(s)).Inc() }

func (m *metrics) lost(reason string) { m.lostBy.WithLabelValues(reason).Inc() }

func (m *metrics) swept(n int) { m.sweeps.Add(float64(n)) }
