package events

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cubefleet/cubefleet/internal/store"
)

// WebhookMetrics are the webhook dispatcher's Prometheus collectors (issue "Drift events", item
// 6): attempts by outcome, their duration, the delay from an event to its delivery, and the
// outbox's depth and oldest age, read from the database at each scrape (the same on every
// replica).
type WebhookMetrics struct {
	outcomes    *prometheus.CounterVec
	attemptTime prometheus.Histogram
	latency     prometheus.Histogram
	outbox      *outboxCollector
}

// NewWebhookMetrics returns the collectors; db is read at each scrape for the outbox gauges,
// with now as the clock (nil: time.Now).
func NewWebhookMetrics(db *store.DB, now func() time.Time) *WebhookMetrics {
	if now == nil {
		now = time.Now
	}
	return &WebhookMetrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_webhook_deliveries_total",
			Help: "Webhook delivery attempts by this replica, by outcome: delivered (a 2xx answer), retry (failed, retried later), dead_lettered (failed past the retry horizon).",
		}, []string{"outcome"}),
		attemptTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubefleet_webhook_attempt_duration_seconds",
			Help:    "Duration of one webhook delivery attempt, connection to answer, in seconds.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubefleet_webhook_delivery_latency_seconds",
			Help:    "Time from an event to its successful delivery, retries included, in seconds.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 86400},
		}),
		outbox: &outboxCollector{db: db, now: now,
			depth: prometheus.NewDesc("cubefleet_webhook_outbox_pending", "Webhook deliveries waiting to be delivered (retries included).", nil, nil),
			age:   prometheus.NewDesc("cubefleet_webhook_outbox_oldest_age_seconds", "Age of the oldest pending webhook delivery, in seconds (0 when none is pending).", nil, nil),
		},
	}
}

// Collectors returns the collectors to register.
func (m *WebhookMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.outcomes, m.attemptTime, m.latency, m.outbox}
}

type outboxCollector struct {
	db         *store.DB
	now        func() time.Time
	depth, age *prometheus.Desc
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.depth; ch <- c.age }

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Outbox(ctx, c.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		return
	}
	age := 0.0
	if s.Pending > 0 {
		age = max(0, float64(c.now().UnixMilli()-s.OldestMillis)/1000)
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(s.Pending))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age)
}
