package nodes

import (
	dto "github.com/prometheus/client_model/go"
)

// EventCount is cubefleet_node_events_total{type=typ}, for the tests of package nodes_test.
func EventCount(r *Registry, typ string) (float64, error) {
	var m dto.Metric
	err := r.m.events.WithLabelValues(typ).Write(&m)
	return m.GetCounter().GetValue(), err
}

// StateCount is cubefleet_nodes{state=s}, for the tests of package nodes_test.
func StateCount(r *Registry, s State) (float64, error) {
	var m dto.Metric
	err := r.m.nodes.WithLabelValues(string(s)).Write(&m)
	return m.GetGauge().GetValue(), err
}

// EventData is the data of a node event, for the tests of package nodes_test.
type EventData = eventData
