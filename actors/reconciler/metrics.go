package reconciler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/supervisors"
)

// Metrics of reconciliation.
type Metrics struct {
	passes                           *prometheus.CounterVec
	unaccounted                      *prometheus.GaugeVec
	lastSuccess, backlog             prometheus.Gauge
	removed, undelivered, diagPruned prometheus.Counter
	forgotten                        prometheus.Counter
	bridge                           prometheus.Gauge
}

// NewMetrics registers the reconciler's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := supervisors.NewSeries(reg)
	m := &Metrics{
		passes: s.Counters("berth_reconciliation_total",
			"Reconciliation passes, by outcome (ok, error).", "outcome", "ok", "error"),
		lastSuccess: s.Gauge("berth_reconciliation_last_success_timestamp_seconds",
			"Unix time of the last successful reconciliation pass (0 before the first)."),
		unaccounted: s.Gauges("berth_unaccounted_containers",
			"Managed containers no journal explains, from the last pass, by kind: berth (this installation's) or fred_v013 "+
				"(made by fred v0.13 under this backend name, not adopted: a fred running beside berthd?). Never removed automatically.",
			"kind", "berth", "fred_v013"),
		removed: s.Counter("berth_reconciliation_removed_containers_total",
			"Containers of closed leases or settled attempts removed by reconciliation (gently: stop, no force)."),
		backlog: s.Gauge("berth_reconciliation_removal_backlog",
			"Removal candidates the last pass left for the next (over the per-pass cap, or failed)."),
		diagPruned: s.Counter("berth_diagnostics_pruned_total",
			"Diagnostics entries deleted for being older than diagnostics_max_age."),
		forgotten: s.Counter("berth_closed_leases_forgotten_total",
			"Closed leases whose journal (the closed receipt) was deleted once older than releases_max_age."),
		undelivered: s.Counter("berth_reconciliation_undelivered_total",
			"Lease inventories the registry could not deliver (lease gone, stopped or busy)."),
		bridge: s.Gauge("berth_default_bridge_isolated",
			"0 when Docker's default bridge, which single-container leases share, no longer isolates them (icc on, or dockerd's DROP rule missing), "+
				"from the last pass; 1 otherwise (also when leases do not use the bridge)."),
	}
	m.bridge.Set(1)
	return m
}

// bridgeIsolated records the last pass's proof of the default bridge.
func (m *Metrics) bridgeIsolated(ok bool) {
	v := 0.0
	if ok {
		v = 1
	}
	m.bridge.Set(v)
}

func (m *Metrics) observe(res Result, err error, now time.Time) {
	if err != nil {
		m.passes.WithLabelValues("error").Inc()
		return
	}
	m.passes.WithLabelValues("ok").Inc()
	m.lastSuccess.Set(float64(now.Unix()))
	m.unaccounted.WithLabelValues("berth").Set(float64(res.Unaccounted))
	if res.UnaccountedFred >= 0 {
		m.unaccounted.WithLabelValues("fred_v013").Set(float64(res.UnaccountedFred))
	}
	m.removed.Add(float64(res.Removed))
	m.backlog.Set(float64(res.Backlog))
}
