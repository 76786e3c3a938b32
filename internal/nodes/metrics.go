package nodes

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registry's Prometheus collectors; the server registers them on its own
// registry (Registry.Collectors).
type metrics struct {
	nodes  *prometheus.GaugeVec
	events *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cubefleet_nodes",
			Help: "Registered nodes by health state (Ready, NotReady, Suspect, Down, Lost, Unknown: no report since the server started), as of the last health check.",
		}, []string{"state"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubefleet_node_events_total",
			Help: "Node lifecycle events by type (node.joined, node.suspect, node.down, node.lost, node.recovered, node.cordoned, node.uncordoned, node.draining, node.drained, node.deleted, node.notReady).",
		}, []string{"type"}),
	}
	for _, s := range States {
		m.nodes.WithLabelValues(string(s))
	}
	for _, t := range EventTypes {
		m.events.WithLabelValues(t)
	}
	return m
}

// Collectors returns the registry's Prometheus collectors, for the server's registry:
// cubefleet_nodes{state} (nodes by health state as of the last check) and
// cubefleet_node_events_total{type} (node lifecycle events). nodestore and nodehttp have
// their own.
func (r *Registry) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.m.nodes, r.m.events}
}
