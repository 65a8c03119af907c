package netpool

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the network pool.
type Metrics struct {
	networks *prometheus.GaugeVec
	claims   *prometheus.CounterVec
	ops      *prometheus.CounterVec
}

// NewMetrics registers the pool's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		networks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "berth_network_pool_networks",
			Help: "Warm-pool lease networks by state (free: ready to hand out; bound: held by a lease)."}, []string{"state"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_network_pool_claims_total",
			Help: "Lease network claims by outcome (warm: a free network bound; made: none was free, the lease created a pool network and it was bound; rebound: the lease's own again; empty: none free; error: not journaled)."},
			[]string{"outcome"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_network_pool_operations_total",
			Help: "Pool network operations (created, create_error, released, vanished, dropped, removed, in_use)."}, []string{"op"}),
	}
	for _, s := range []string{"free", "bound"} {
		m.networks.WithLabelValues(s)
	}
	for _, o := range []string{"warm", "made", "rebound", "empty", "error"} {
		m.claims.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.networks, m.claims, m.ops)
	}
	return m
}
