package volumehold

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/supervisors"
)

// Metrics of held deletions.
type Metrics struct {
	held     prometheus.Gauge
	outcomes *prometheus.CounterVec
}

// NewMetrics registers berth_volume_holds and berth_volume_hold_outcomes_total.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := supervisors.NewSeries(reg)
	return &Metrics{
		held: s.Gauge("berth_volume_holds", "Managed volumes whose deletion is held (busy) and retried."),
		outcomes: s.Counters("berth_volume_hold_outcomes_total",
			"Held deletions, by outcome (held, completed).", "outcome", "held", "completed"),
	}
}
