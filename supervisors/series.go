package supervisors

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Series declares an actor's metrics, one line each, registered on the
// registerer it was made with (nil: none, as unit tests want).
type Series struct{ f promauto.Factory }

// NewSeries declares series on reg.
func NewSeries(reg prometheus.Registerer) Series { return Series{promauto.With(reg)} }

// Gauge is one gauge.
func (s Series) Gauge(name, help string) prometheus.Gauge {
	return s.f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// Counter is one counter.
func (s Series) Counter(name, help string) prometheus.Counter {
	return s.f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// Gauges are gauges by one label, the values in seed shown from the start.
func (s Series) Gauges(name, help, label string, seed ...string) *prometheus.GaugeVec {
	v := s.f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{label})
	for _, l := range seed {
		v.WithLabelValues(l)
	}
	return v
}

// Counters are counters by one label, the values in seed shown from the start.
func (s Series) Counters(name, help, label string, seed ...string) *prometheus.CounterVec {
	v := s.f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	for _, l := range seed {
		v.WithLabelValues(l)
	}
	return v
}
