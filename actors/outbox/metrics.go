package outbox

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/persistence"
)

// Metrics of callback delivery. Pending rows and the oldest row's age are read
// from the store at scrape time, so they are right across restarts.
type Metrics struct {
	attempts *prometheus.CounterVec
	dropped  map[string]*prometheus.CounterVec // reason → berth_callback_<reason>_total{kind}
}

// NewMetrics registers the outbox series on reg.
func NewMetrics(reg prometheus.Registerer, store *persistence.Store, now func() time.Time) *Metrics {
	m := &Metrics{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_callback_attempts_total",
		Help: "Callback delivery attempts, by outcome (delivered, rejected, transport, refused, canceled).",
	}, []string{"outcome"})}
	for _, o := range []string{OutcomeDelivered, OutcomeRejected, OutcomeTransport, OutcomeRefused, OutcomeCanceled} {
		m.attempts.WithLabelValues(o)
	}
	m.dropped = map[string]*prometheus.CounterVec{}
	for reason, help := range map[string]string{
		DroppedExpired:   "Callback rows removed undelivered after callback_max_age, by kind (only lifecycle rows age).",
		DroppedCoalesced: "Callback rows removed undelivered because a newer lifecycle row of the lease superseded them, by kind.",
	} {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_callback_" + reason + "_total", Help: help}, []string{"kind"})
		v.WithLabelValues(persistence.KindLifecycle)
		m.dropped[reason] = v
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.dropped[DroppedExpired], m.dropped[DroppedCoalesced], &pendingCollector{store: store, now: now})
	}
	return m
}

func (m *Metrics) drop(kind, reason string) {
	if m != nil {
		m.dropped[reason].WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) attempt(outcome string) {
	if m != nil {
		m.attempts.WithLabelValues(outcome).Inc()
	}
}

var (
	pendingDesc = prometheus.NewDesc("berth_callback_outbox_pending", "Callback rows waiting for delivery.", nil, nil)
	oldestDesc  = prometheus.NewDesc("berth_callback_outbox_oldest_age_seconds", "Age of the oldest undelivered callback row (0 when none).", nil, nil)
)

type pendingCollector struct {
	store *persistence.Store
	now   func() time.Time
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestDesc
}

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	n, oldest, err := c.store.OutboxStats()
	if err != nil {
		return
	}
	age := 0.0
	if n > 0 {
		age = c.now().Sub(oldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
}
