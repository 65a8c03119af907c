package watcher

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the event stream.
type Metrics struct {
	stream  *prometheus.CounterVec
	events  *prometheus.CounterVec
	dropped *prometheus.CounterVec
	depth   prometheus.Gauge
}

// NewMetrics registers the watcher's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		stream: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_container_event_stream_total",
			Help: "Event stream subscriptions, by outcome (connected, reconnect)."}, []string{"outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_container_events_total",
			Help: "Container events seen, by action."}, []string{"action"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_death_events_dropped_total",
			Help: "Container deaths not delivered to their lease (queue_full, undeliverable); reconciliation finds them later as unknown."}, []string{"reason"}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_container_death_queue_depth",
			Help: "Deaths waiting for the dispatcher."}),
	}
	m.dropped.WithLabelValues("queue_full")
	m.dropped.WithLabelValues("undeliverable")
	if reg != nil {
		reg.MustRegister(m.stream, m.events, m.dropped, m.depth)
	}
	return m
}
