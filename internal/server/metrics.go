package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cubefleet/cubefleet/internal/buildinfo"
	"github.com/cubefleet/cubefleet/internal/store"
)

// metrics is one server's Prometheus registry (never the global default one), so several
// servers in one process (tests) keep separate counts.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	bodyRefusals *prometheus.CounterVec
	authFailures *prometheus.CounterVec
}

func newMetrics(db *store.DB) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_api_requests_total",
			Help: "API calls by method (\"unknown\" for names the server does not serve) and result code (OK or an error code).",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cubefleet_api_request_duration_seconds",
			Help:    "API call latency in seconds, by method and result code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "code"}),
		bodyRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_api_body_refusals_total",
			Help: "API request bodies refused by reason: too_large (over the method's cap, 413), budget (the buffered body budget is full, 429), too_slow (under the minimum rate; the connection is closed).",
		}, []string{"reason"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_api_auth_failures_total",
			Help: "Refused API key authentications (the API and the internal nodes routes) by reason: no_credentials, bad_header, malformed_key, unknown_key, revoked_key, expired_key (the last two are also audited, summarized per key).",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.bodyRefusals, m.authFailures,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(db.DB, string(db.Dialect())),
		buildinfo.Read().Collector(),
	)
	return m
}

func (m *metrics) observe(method, code string, d time.Duration) {
	m.requests.WithLabelValues(method, code).Inc()
	m.duration.WithLabelValues(method, code).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
