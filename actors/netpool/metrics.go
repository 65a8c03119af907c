package netpool

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/supervisors"
)

// Metrics of the network pool.
type Metrics struct {
	networks    *prometheus.GaugeVec
	claims, ops *prometheus.CounterVec
}

// NewMetrics registers the pool's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := supervisors.NewSeries(reg)
	return &Metrics{
		ops: s.Counters("berth_network_pool_operations_total",
			"Pool network operations (created, create_error, released, vanished, dropped, removed, in_use; bridge_released: a closed lease's slot of the default bridge given back).", "op"),
		networks: s.Gauges("berth_network_pool_networks",
			"Warm-pool lease networks by state (free: ready to hand out; bound: held by a lease; bridged: single-container leases on the isolated default bridge).", "state", "free", "bound", "bridged"),
		claims: s.Counters("berth_network_pool_claims_total",
			"Lease network claims by outcome (warm: a free network bound; made: none was free, the lease created a pool network and it was bound; rebound: the lease's own again; bridged: a single-container lease bound to the isolated default bridge; empty: none free; error: not journaled).", "outcome", "warm", "made", "rebound", "bridged", "empty", "error"),
	}
}
