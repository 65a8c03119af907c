package supervisors

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Awaits are the open waits of the tree: an ask for an answer, an actor waiting
// for another's message (the registry for its recovery pass). protoactor drops a
// message sent to an actor between two incarnations and the message an actor was
// handling when it panicked, so every such wait is bounded or retried by its
// owner; Awaits makes the ones still open visible — berth_actor_awaiting_seconds
// is the age of the oldest open wait by who waits and for what, and the owner
// logs a wait that outlived its patience, naming what it waits for.
type Awaits struct {
	mu   sync.Mutex
	open map[*wait]struct{}
	seen map[awaitKey]bool // every (who, what) that ever waited: reported 0 when none is open
}

type awaitKey struct{ who, what string }

type wait struct {
	who, what string
	since     time.Time
}

// Begin opens a wait of who (an actor kind, or "facade") for what; end closes it.
func (a *Awaits) Begin(who, what string) (end func()) {
	w := &wait{who: who, what: what, since: time.Now()}
	a.mu.Lock()
	if a.open == nil {
		a.open, a.seen = map[*wait]struct{}{}, map[awaitKey]bool{}
	}
	a.open[w] = struct{}{}
	a.seen[awaitKey{who, what}] = true
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.open, w)
		a.mu.Unlock()
	}
}

// Oldest is the age of the oldest open wait of who for what (0: none open).
func (a *Awaits) Oldest(who, what string) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var oldest time.Duration
	for w := range a.open {
		if w.who == who && w.what == what {
			oldest = max(oldest, time.Since(w.since))
		}
	}
	return oldest
}

var awaitingDesc = prometheus.NewDesc("berth_actor_awaiting_seconds",
	"Age of the oldest open wait of one actor (or the facade) for another's answer or message, by who waits and what for.",
	[]string{"kind", "awaits"}, nil)

func (a *Awaits) Describe(ch chan<- *prometheus.Desc) { ch <- awaitingDesc }

// Collect reports every (who, what) that ever waited: the oldest open wait's
// age, 0 when none is open.
func (a *Awaits) Collect(ch chan<- prometheus.Metric) {
	oldest := map[awaitKey]time.Duration{}
	a.mu.Lock()
	for k := range a.seen {
		oldest[k] = 0
	}
	for w := range a.open {
		k := awaitKey{w.who, w.what}
		oldest[k] = max(oldest[k], time.Since(w.since))
	}
	a.mu.Unlock()
	for k, d := range oldest {
		ch <- prometheus.MustNewConstMetric(awaitingDesc, prometheus.GaugeValue, d.Seconds(), k.who, k.what)
	}
}
