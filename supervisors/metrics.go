package supervisors

import (
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the per-actor-kind series the receiver middleware and the strategies
// record. Labels are kinds and message types, never lease UUIDs. protoactor's own
// OTel metrics stay off: without a meter provider they leak per spawned actor.
type Metrics struct {
	messages *prometheus.CounterVec
	duration *prometheus.HistogramVec
	panics   *prometheus.CounterVec
	restarts *prometheus.CounterVec
	stale    *prometheus.CounterVec

	observers sync.Map // kind+"\x00"+type → *observer
	typeNames sync.Map // reflect.Type → string
}

type observer struct {
	count prometheus.Counter
	dur   prometheus.Observer
}

// NewMetrics registers the actor series on reg, plus a collector that reads live
// actors and mailbox depth per kind from dir at scrape time.
func NewMetrics(reg prometheus.Registerer, dir *Directory) *Metrics {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_actor_messages_total",
			Help: "Messages handled, by actor kind and message type.",
		}, []string{"kind", "type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_actor_handle_seconds",
			Help:    "Time to handle one message, by actor kind and message type.",
			Buckets: []float64{0.00005, 0.0002, 0.001, 0.005, 0.02, 0.1, 0.5, 2},
		}, []string{"kind", "type"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_actor_panics_total",
			Help: "Panics raised while handling a message, by actor kind.",
		}, []string{"kind"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_actor_restarts_total",
			Help: "Supervisor decisions applied to failed actors, by kind and directive (restart, stop, escalate).",
		}, []string{"kind", "directive"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_actor_stale_results_dropped_total",
			Help: "Task results (a worker's outcome, a timer) that reached a later incarnation of their actor and were dropped " +
				"(the seed's terminal events dropped): only after a restart; the new incarnation recovers from its journal.",
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.messages, m.duration, m.panics, m.restarts, m.stale, &treeCollector{dir: dir})
	}
	return m
}

func (m *Metrics) observe(kind string, msg any, d time.Duration) {
	t := m.typeName(msg)
	key := kind + "\x00" + t
	o, ok := m.observers.Load(key)
	if !ok {
		o, _ = m.observers.LoadOrStore(key, &observer{
			count: m.messages.WithLabelValues(kind, t),
			dur:   m.duration.WithLabelValues(kind, t),
		})
	}
	ob := o.(*observer)
	ob.count.Inc()
	ob.dur.Observe(d.Seconds())
}

func (m *Metrics) typeName(msg any) string {
	rt := reflect.TypeOf(msg)
	if n, ok := m.typeNames.Load(rt); ok {
		return n.(string)
	}
	n := "nil"
	if rt != nil {
		n = rt.String()
	}
	m.typeNames.Store(rt, n)
	return n
}

func (m *Metrics) panic(kind string) { m.panics.WithLabelValues(kind).Inc() }

func (m *Metrics) staleResult(kind string) { m.stale.WithLabelValues(kind).Inc() }

func (m *Metrics) supervision(kind, directive string) {
	m.restarts.WithLabelValues(kind, directive).Inc()
}

// treeCollector reports live actors and mailbox depth per kind from the directory.
type treeCollector struct{ dir *Directory }

var (
	liveDesc  = prometheus.NewDesc("berth_actors_live", "Live actors, by kind.", []string{"kind"}, nil)
	depthDesc = prometheus.NewDesc("berth_actor_mailbox_depth", "User messages waiting in mailboxes, summed by actor kind.", []string{"kind"}, nil)
	stuckDesc = prometheus.NewDesc("berth_actor_stuck_seconds",
		"Age of the oldest message handler still running, by actor kind (0: none). Handlers do no I/O but journal commits: "+
			"seconds here mean a store or an actor is wedged.", []string{"kind"}, nil)
)

func (c *treeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- liveDesc
	ch <- depthDesc
	ch <- stuckDesc
}

func (c *treeCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, s := range c.dir.ByKind() {
		ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, float64(s.Live), kind)
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(s.MailboxDepth), kind)
		ch <- prometheus.MustNewConstMetric(stuckDesc, prometheus.GaugeValue, s.Stuck.Seconds(), kind)
	}
}
