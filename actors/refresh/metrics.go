package refresh

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Metrics of the runtime refresh.
type Metrics struct {
	stale    prometheus.Gauge
	outcomes *prometheus.CounterVec
}

// NewMetrics registers berth_runtime_stale_leases and berth_runtime_refresh_total.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := supervisors.NewSeries(reg)
	return &Metrics{
		stale: s.Gauge("berth_runtime_stale_leases",
			"Ready leases with a container created under an older runtime contract, from the last read."),
		outcomes: s.Counters("berth_runtime_refresh_total", "Final per-lease outcome of each runtime refresh run.",
			"outcome", messages.RefreshRefreshed, messages.RefreshFailed, messages.RefreshSkipped),
	}
}
