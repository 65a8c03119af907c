package volumehold

import "github.com/prometheus/client_golang/prometheus"

// Metrics of held deletions.
type Metrics struct {
	held     prometheus.Gauge
	outcomes *prometheus.CounterVec
}

// NewMetrics registers berth_volume_holds and berth_volume_hold_outcomes_total.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_volume_holds",
			Help: "Managed volumes whose deletion is held (busy) and retried."}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_volume_hold_outcomes_total",
			Help: "Held deletions, by outcome (held, completed)."}, []string{"outcome"}),
	}
	m.outcomes.WithLabelValues("held")
	m.outcomes.WithLabelValues("completed")
	if reg != nil {
		reg.MustRegister(m.held, m.outcomes)
	}
	return m
}
