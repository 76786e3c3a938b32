package scheduler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Decision outcomes, the label of cubefleet_scheduler_decisions_total.
const (
	outcomePlaced    = "placed"    // a node was chosen and its room reserved
	outcomeExhausted = "exhausted" // no node fits: RESOURCE_EXHAUSTED
	outcomeInvalid   = "invalid"   // the request was refused: INVALID_INPUT
)

// Metrics are the scheduler's Prometheus collectors. Create them with NewMetrics, pass them
// in Options.Metrics, and register Collectors on the server's registry. A nil *Metrics
// records nothing.
type Metrics struct {
	decisions   *prometheus.CounterVec
	placed      prometheus.Counter
	exhausted   prometheus.Counter
	invalid     prometheus.Counter
	latency     prometheus.Histogram
	rejections  [numReasons]prometheus.Counter
	rejectVec   *prometheus.CounterVec
	releases    *prometheus.CounterVec
	reservation prometheus.Gauge
	// LeaseHolder is 1 while this replica holds the scheduler lease (it decides), else 0.
	LeaseHolder prometheus.Gauge
	reloads     *prometheus.CounterVec
	failing     prometheus.Gauge
}

// NewMetrics returns the scheduler's collectors, unregistered.
func NewMetrics() *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_scheduler_decisions_total",
			Help: "Placement decisions by outcome (placed, exhausted, invalid).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubefleet_scheduler_decision_seconds",
			Help:    "Time of one placement decision (scan, filters, score, pick and reservation), in seconds.",
			Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2},
		}),
		rejectVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_scheduler_rejections_total",
			Help: "For decisions that placed nothing: the nodes of the pool by the first check they failed (not_ready, cordoned, cpu, mem, template_locality, realtime_create_num, ...).",
		}, []string{"reason"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_scheduler_reservations_released_total",
			Help: "Reservations released, by how: reported (the node lists the sandbox), released (the create failed or was abandoned), expired (older than the reservation TTL), removed (the node was deleted).",
		}, []string{"how"}),
		reservation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cubefleet_scheduler_reservations",
			Help: "Reservations outstanding: sandboxes placed and not yet listed in their node's report.",
		}),
		LeaseHolder: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cubefleet_scheduler_lease_holder",
			Help: "1 while this replica holds the scheduler lease and makes the placement decisions, else 0.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_scheduler_config_reloads_total",
			Help: "Reloads of --scheduler-config (SIGHUP) by result: ok, or failed (the previous configuration stays in force).",
		}, []string{"result"}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cubefleet_scheduler_config_reload_failing",
			Help: "1 while the last reload of --scheduler-config failed (the file on disk is not the configuration in force), else 0.",
		}),
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	m.placed = m.decisions.WithLabelValues(outcomePlaced)
	m.exhausted = m.decisions.WithLabelValues(outcomeExhausted)
	m.invalid = m.decisions.WithLabelValues(outcomeInvalid)
	for r := reasonStockCubelet; r < numReasons; r++ {
		m.rejections[r] = m.rejectVec.WithLabelValues(reasons[r].label)
	}
	return m
}

// Collectors returns every collector, for registering.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.latency, m.rejectVec, m.releases, m.reservation, m.LeaseHolder, m.reloads, m.failing}
}

// reloaded counts a reload of the configuration file.
func (m *Metrics) reloaded(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("ok").Inc()
		m.failing.Set(0)
		return
	}
	m.reloads.WithLabelValues("failed").Inc()
	m.failing.Set(1)
}

func (m *Metrics) decided(outcome string, start time.Time, rejected *tally) {
	if m == nil {
		return
	}
	switch outcome {
	case outcomePlaced:
		m.placed.Inc()
	case outcomeExhausted:
		m.exhausted.Inc()
	default:
		m.invalid.Inc()
	}
	m.latency.Observe(time.Since(start).Seconds())
	if rejected != nil {
		for r := reasonStockCubelet; r < numReasons; r++ {
			if rejected[r] > 0 {
				m.rejections[r].Add(float64(rejected[r]))
			}
		}
	}
}

func (m *Metrics) outstanding(n int) {
	if m != nil {
		m.reservation.Set(float64(n))
	}
}

// release records n reservations released how (reported, released, expired).
func (m *Metrics) release(how string, n, outstanding int) {
	if m != nil {
		if n > 0 {
			m.releases.WithLabelValues(how).Add(float64(n))
		}
		m.reservation.Set(float64(outstanding))
	}
}
