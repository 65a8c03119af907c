package reaper

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/messages"
)

// Metrics of retention (berth_retention_*), held and unaccounted volumes.
type Metrics struct {
	sweeps        *prometheus.CounterVec
	retained      prometheus.Gauge
	retainedBytes prometheus.Gauge
	reaping       prometheus.Gauge
	reapingBytes  prometheus.Gauge
	leaked        prometheus.Counter
	orphansPruned prometheus.Counter
	orphanSkips   *prometheus.CounterVec
	unaccounted   prometheus.Gauge
}

// NewMetrics registers the reaper's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_retention_sweep_total",
			Help: "Retention sweeps, by outcome (ok, error); their sum is the reaper's heartbeat."}, []string{"outcome"}),
		retained: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_retention_retained_leases",
			Help: "Retention records that are active or being restored, at the last sweep."}),
		retainedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_retention_retained_bytes",
			Help: "Bytes the active and restoring retention records hold, measured at close."}),
		reaping: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_retention_reaping_leases",
			Help: "Retention records whose volumes are being destroyed (still counted in the pool)."}),
		reapingBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_retention_reaping_bytes",
			Help: "Bytes of the reaping records."}),
		leaked: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_retention_leaked_total",
			Help: "Failed destroys of retained volumes (other than busy); the record stays reaping and is retried."}),
		orphansPruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_retention_orphans_pruned_total",
			Help: "Retention records pruned because their volumes vanished out of band."}),
		orphanSkips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_retention_orphan_skips_total",
			Help: "Sweeps that skipped orphan pruning, by reason."}, []string{"reason"}),
		unaccounted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_unaccounted_volumes",
			Help: "Managed volumes under the volume root that no live lease or retention record explains. Never destroyed automatically."}),
	}
	m.sweeps.WithLabelValues("ok")
	m.sweeps.WithLabelValues("error")
	m.orphanSkips.WithLabelValues("list_error")
	if reg != nil {
		reg.MustRegister(m.sweeps, m.retained, m.retainedBytes, m.reaping, m.reapingBytes, m.leaked, m.orphansPruned,
			m.orphanSkips, m.unaccounted)
	}
	return m
}

func (m *Metrics) observe(rep messages.RetentionSweepReply) {
	var rb, pb int64
	for _, r := range rep.Active {
		rb += r.UsedBytes()
	}
	for _, r := range rep.Reaping {
		pb += r.UsedBytes()
	}
	m.retained.Set(float64(len(rep.Active)))
	m.retainedBytes.Set(float64(rb))
	m.reaping.Set(float64(len(rep.Reaping)))
	m.reapingBytes.Set(float64(pb))
}
