package reconciler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of reconciliation.
type Metrics struct {
	passes      *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	unaccounted prometheus.Gauge
	removed     prometheus.Counter
	backlog     prometheus.Gauge
	undelivered prometheus.Counter
	diagPruned  prometheus.Counter
}

// NewMetrics registers the reconciler's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_reconciliation_total",
			Help: "Reconciliation passes, by outcome (ok, error)."}, []string{"outcome"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_reconciliation_last_success_timestamp_seconds",
			Help: "Unix time of the last successful reconciliation pass (0 before the first)."}),
		unaccounted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_unaccounted_containers",
			Help: "Managed containers of this installation that no journal explains, from the last pass. Never removed automatically."}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_reconciliation_removed_containers_total",
			Help: "Containers of closed leases or settled attempts removed by reconciliation (gently: stop, no force)."}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_reconciliation_removal_backlog",
			Help: "Removal candidates the last pass left for the next (over the per-pass cap, or failed)."}),
		diagPruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_diagnostics_pruned_total",
			Help: "Diagnostics entries deleted for being older than diagnostics_max_age."}),
		undelivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_reconciliation_undelivered_total",
			Help: "Lease inventories the registry could not deliver (lease gone, stopped or busy)."}),
	}
	m.passes.WithLabelValues("ok")
	m.passes.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(m.passes, m.lastSuccess, m.unaccounted, m.removed, m.backlog, m.undelivered, m.diagPruned)
	}
	return m
}

func (m *Metrics) observe(res Result, err error, now time.Time) {
	if err != nil {
		m.passes.WithLabelValues("error").Inc()
		return
	}
	m.passes.WithLabelValues("ok").Inc()
	m.lastSuccess.Set(float64(now.Unix()))
	m.unaccounted.Set(float64(res.Unaccounted))
	m.removed.Add(float64(res.Removed))
	m.backlog.Set(float64(res.Backlog))
}
