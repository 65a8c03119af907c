package refresh

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Metrics of the runtime refresh: the stale Ready leases and the leases sharing
// a network at the last read (every pass, every GET and POST), the reads' outcomes
// and each run's per-lease outcomes.
type Metrics struct {
	stale, shared prometheus.Gauge
	inventories   *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
}

// NewMetrics registers berth_runtime_stale_leases,
// berth_runtime_shared_network_leases, berth_runtime_inventory_total{outcome}
// and berth_runtime_refresh_total{outcome}.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	series, outcomes := supervisors.NewSeries(reg), []string{messages.RefreshRefreshed, messages.RefreshFailed, messages.RefreshSkipped}
	return &Metrics{
		stale: series.Gauge("berth_runtime_stale_leases", "Ready leases with a container created under an older runtime contract, from the last read."),
		shared: series.Gauge("berth_runtime_shared_network_leases",
			"Leases with a container on a Docker network shared with another lease's container (the default bridge), from the last read."),
		inventories: series.Counters("berth_runtime_inventory_total",
			"Inventory reads behind the runtime gauges (each pass, GET and POST /runtime_refresh); a failed read keeps the last values.", "outcome", "ok", "error"),
		outcomes: series.Counters("berth_runtime_refresh_total", "Final per-lease outcome of each runtime refresh run.", "outcome", outcomes...)}
}

// read records one inventory read: its outcome, and the gauges when it worked.
func (m *Metrics) read(inv Inventory, err error) {
	if err != nil {
		m.inventories.WithLabelValues("error").Inc()
		return
	}
	m.inventories.WithLabelValues("ok").Inc()
	m.stale.Set(float64(len(inv.Stale)))
	m.shared.Set(float64(len(inv.Shared)))
}
