package lease

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// closeIntents is every close journaled and not yet closed, for the seed's
// gauges: how many, the oldest, and — since a close waiting only on a busy volume
// is expected to age — the oldest of the others, the one to page on. Each lease
// actor keeps its own entry; the gauges are computed at scrape.
type closeIntents struct {
	mu    sync.Mutex
	open  map[string]closeIntent
	now   func() time.Time
	descs [4]*prometheus.Desc
}

type closeIntent struct {
	since         time.Time // close.requested
	heldOnVolumes bool      // the teardown waits only on held volume deletions
}

func newCloseIntents() *closeIntents {
	return &closeIntents{open: map[string]closeIntent{}, now: time.Now, descs: [4]*prometheus.Desc{
		prometheus.NewDesc("berth_pending_close_intents", "Closes journaled (close.requested) and not yet closed.", nil, nil),
		prometheus.NewDesc("berth_oldest_close_intent_age_seconds", "Age of the oldest pending close, closes held on busy volumes included (0: none).", nil, nil),
		prometheus.NewDesc("berth_close_intents_delete_held", "Pending closes waiting only on held volume deletions (the volumehold actor retries them).", nil, nil),
		prometheus.NewDesc("berth_oldest_unheld_close_intent_age_seconds",
			"Age of the oldest pending close not waiting only on held volume deletions (0: none); sustained, a teardown dependency is unavailable.", nil, nil),
	}}
}

// set records lease's close (since zero: it has none any more).
func (c *closeIntents) set(lease string, since time.Time, heldOnVolumes bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if since.IsZero() {
		delete(c.open, lease)
		return
	}
	c.open[lease] = closeIntent{since: since, heldOnVolumes: heldOnVolumes}
}

func (c *closeIntents) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *closeIntents) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	now := c.now()
	var held int
	var oldest, oldestUnheld time.Duration
	for _, in := range c.open {
		age := max(0, now.Sub(in.since))
		oldest = max(oldest, age)
		if in.heldOnVolumes {
			held++
		} else {
			oldestUnheld = max(oldestUnheld, age)
		}
	}
	pending := len(c.open)
	c.mu.Unlock()
	for i, v := range []float64{float64(pending), oldest.Seconds(), float64(held), oldestUnheld.Seconds()} {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, v)
	}
}
