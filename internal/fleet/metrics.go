package fleet

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cubefleet/cubefleet/internal/store"
)

// DriftMetrics are the drift reconciler's Prometheus collectors (issue "Drift events", item 6).
// The server registers Collectors on its own registry. The per-tenant gauge is read from the
// database at each scrape, so every replica reports the same drift, whichever ran the check.
type DriftMetrics struct {
	checks   *prometheus.CounterVec
	duration prometheus.Histogram
	events   *prometheus.CounterVec
	drifted  *driftedCollector
}

// NewDriftMetrics returns the collectors; db is read at each scrape for the per-tenant gauge.
func NewDriftMetrics(db *store.DB) *DriftMetrics {
	return &DriftMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_fleet_drift_checks_total",
			Help: "Drift checks of one tenant's applied document, by result (ok, failed).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubefleet_fleet_drift_check_duration_seconds",
			Help:    "Duration of one tenant's drift check (re-plan and record), in seconds.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_fleet_drift_events_total",
			Help: "fleet.drifted and fleet.converged events published by this replica's drift checks, by type.",
		}, []string{"type"}),
		drifted: &driftedCollector{db: db, desc: prometheus.NewDesc("cubefleet_fleet_drifted",
			"1 while the tenant's recorded drift is set, 0 when its applied document matched at the last check; one series per tenant with an applied document.",
			[]string{"tenant"}, nil)},
	}
}

// Collectors returns the collectors to register.
func (m *DriftMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.checks, m.duration, m.events, m.drifted}
}

func (m *DriftMetrics) observe(d time.Duration, err error, c *driftCheck) {
	if err != nil {
		m.checks.WithLabelValues("failed").Inc()
		return
	}
	m.checks.WithLabelValues("ok").Inc()
	m.duration.Observe(d.Seconds())
	if c.Event != "" {
		m.events.WithLabelValues(c.Event).Inc()
	}
}

// driftedCollector reads cubefleet_fleet_drifted from fleet_applied at each scrape.
type driftedCollector struct {
	db   *store.DB
	desc *prometheus.Desc
}

func (c *driftedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *driftedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := c.db.QueryContext(ctx, `SELECT tenant_id, CASE WHEN drift IS NULL THEN 0 ELSE 1 END FROM fleet_applied`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var tenant string
		var v int
		if err := rows.Scan(&tenant, &v); err != nil {
			ch <- prometheus.NewInvalidMetric(c.desc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), tenant)
	}
	if err := rows.Err(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
	}
}
