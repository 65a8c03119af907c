package watcher

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/supervisors"
)

// Metrics of the event stream.
type Metrics struct {
	stream, events, dropped *prometheus.CounterVec
	depth                   prometheus.Gauge
}

// NewMetrics registers the watcher's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := supervisors.NewSeries(reg)
	return &Metrics{
		stream: s.Counters("berth_container_event_stream_total",
			"Event stream subscriptions, by outcome (connected, reconnect).", "outcome"),
		events: s.Counters("berth_container_events_total", "Container events seen, by action.", "action"),
		dropped: s.Counters("berth_death_events_dropped_total",
			"Container deaths not delivered to their lease (queue_full, undeliverable); reconciliation finds them later as unknown.", "reason", "queue_full", "undeliverable"),
		depth: s.Gauge("berth_container_death_queue_depth", "Deaths waiting for the dispatcher."),
	}
}
