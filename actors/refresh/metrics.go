package refresh

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Metrics of the runtime refresh: the stale Ready leases at the last read
// (every pass, every GET and POST) and each run's per-lease outcomes.
type Metrics struct {
	stale    prometheus.Gauge
	outcomes *prometheus.CounterVec
}

// NewMetrics registers berth_runtime_stale_leases and berth_runtime_refresh_total.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	series, outcomes := supervisors.NewSeries(reg), []string{messages.RefreshRefreshed, messages.RefreshFailed, messages.RefreshSkipped}
	stale := series.Gauge("berth_runtime_stale_leases", "Ready leases with a container created under an older runtime contract, from the last read.")
	return &Metrics{stale: stale,
		outcomes: series.Counters("berth_runtime_refresh_total", "Final per-lease outcome of each runtime refresh run.", "outcome", outcomes...)}
}
