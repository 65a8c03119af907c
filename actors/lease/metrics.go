package lease

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of lease state machines.
type Metrics struct {
	transitions  *prometheus.CounterVec
	replacePhase *prometheus.HistogramVec
	provPhase    *prometheus.HistogramVec
	maintenance  *prometheus.CounterVec
	wpReclaimed  prometheus.Counter
	closes       *closeIntents
}

// NewMetrics registers berth_lease_transitions_total{from,to,event},
// berth_replace_phase_duration_seconds{operation,phase},
// berth_provision_phase_seconds{phase}, berth_maintenance_total{operation,outcome}
// berth_retention_writable_path_reclaimed_total and the close-intent gauges
// (closeintents.go) on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lease_transitions_total",
			Help: "Journaled lease state-machine transitions, by from status, to status and event.",
		}, []string{"from", "to", "event"}),
		replacePhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_replace_phase_duration_seconds",
			Help:    "Duration of each phase of a restart or update (capture, images, launch, verify, compensate).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"operation", "phase"}),
		provPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_provision_phase_seconds",
			Help: "Duration of each phase of a provision attempt: images (resolve or pin, pull when absent), network (the lease network), " +
				"volumes, compose_up (create + start), verify (until ready or failed). Images and network run at once.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"phase"}),
		maintenance: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_maintenance_total",
			Help: "Settled restarts and updates, by operation and outcome (completed, recovered, intact, failed, canceled).",
		}, []string{"operation", "outcome"}),
		wpReclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_retention_writable_path_reclaimed_total",
			Help: "Volumes a retaining close destroyed instead of retaining: they held only writable-path copies, which a restore reseeds from the image.",
		}),
		closes: newCloseIntents(),
	}
	if reg != nil {
		reg.MustRegister(m.transitions, m.replacePhase, m.provPhase, m.maintenance, m.wpReclaimed, m.closes)
	}
	return m
}

func (m *Metrics) transition(from, to Status, event string) {
	if m != nil && from != to {
		m.transitions.WithLabelValues(string(from), string(to), event).Inc()
	}
}

func (m *Metrics) replacePhaseDone(operation, phase string, d time.Duration) {
	if m != nil {
		m.replacePhase.WithLabelValues(operation, phase).Observe(d.Seconds())
	}
}

func (m *Metrics) provisionPhaseDone(phase string, d time.Duration) {
	if m != nil {
		m.provPhase.WithLabelValues(phase).Observe(d.Seconds())
	}
}

func (m *Metrics) maintenanceSettled(operation, outcome string) {
	if m != nil {
		m.maintenance.WithLabelValues(operation, outcome).Inc()
	}
}

// closing counts what a closed receipt about to fold into st settles: the
// volumes its close reclaimed as writable-path-only.
func (m *Metrics) closing(st *State) {
	if m != nil && st.Close != nil && st.Close.Judged {
		m.wpReclaimed.Add(float64(len(st.Close.Reclaim)))
	}
}
