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
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
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
	}
	m.reg.MustRegister(m.requests, m.duration,
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
