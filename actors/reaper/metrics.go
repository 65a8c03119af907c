package reaper

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Metrics of retention (berth_retention_*), held and unaccounted volumes.
type Metrics struct {
	sweeps, orphanSkips                                         *prometheus.CounterVec
	retained, retainedBytes, reaping, reapingBytes, unaccounted prometheus.Gauge
	leaked, orphansPruned                                       prometheus.Counter
}

// NewMetrics registers the reaper's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := supervisors.NewSeries(reg)
	return &Metrics{
		retained: s.Gauge("berth_retention_retained_leases",
			"Retention records that are active or being restored, at the last sweep."),
		sweeps: s.Counters("berth_retention_sweep_total",
			"Retention sweeps, by outcome (ok, error); their sum is the reaper's heartbeat.", "outcome", "ok", "error"),
		retainedBytes: s.Gauge("berth_retention_retained_bytes",
			"Bytes the active and restoring retention records hold, measured at close."),
		reaping: s.Gauge("berth_retention_reaping_leases",
			"Retention records whose volumes are being destroyed (still counted in the pool)."),
		reapingBytes: s.Gauge("berth_retention_reaping_bytes", "Bytes of the reaping records."),
		leaked: s.Counter("berth_retention_leaked_total",
			"Failed destroys of retained volumes (other than busy); the record stays reaping and is retried."),
		orphansPruned: s.Counter("berth_retention_orphans_pruned_total",
			"Retention records pruned because their volumes vanished out of band."),
		orphanSkips: s.Counters("berth_retention_orphan_skips_total",
			"Sweeps that skipped orphan pruning, by reason (root_unproven: the volume root is not the one berthd opened).", "reason", "list_error", "root_unproven"),
		unaccounted: s.Gauge("berth_unaccounted_volumes",
			"Managed volumes under the volume root that no live lease or retention record explains. Never destroyed automatically."),
	}
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
