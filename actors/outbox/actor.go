// Package outbox is the durable callback sender: it delivers the rows lease actors
// commit to outbox/<lease> together with the events that produced them, one lease's
// rows in order (the next waits for its head), many leases in parallel, and deletes
// a row only after a 2xx. Delivery survives a restart of this actor or the process:
// the rows are the truth, and a restarted instance simply reads them again.
package outbox

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the outbox actor.
type Settings struct {
	Secret   []byte       // callback_secret: signs every attempt
	Client   *http.Client // no client-wide timeout: the delivery deadline is the only one
	Parallel int          // leases delivering at once
	Delays   []time.Duration
	Deadline time.Duration
	Sweep    time.Duration // replay cadence for rows whose delivery failed
	MaxAge   time.Duration // callback_max_age: a lifecycle row this old is removed (stale.go)
	Now      func() time.Time
}

// DefaultSettings are CONTRACT.md's: attempts at 0 s, 1 s, 5 s inside 2 m 15 s, a
// 30 s sweep, 16 leases in flight, and a client whose every dial obeys policy;
// lifecycle rows age out after callback_max_age's default, 24 h.
func DefaultSettings(secret []byte, policy callback.Policy) Settings {
	return Settings{
		Secret:   secret,
		Client:   NewClient(policy, nil),
		Parallel: 16,
		Delays:   []time.Duration{0, time.Second, 5 * time.Second},
		Deadline: 2*time.Minute + 15*time.Second,
		Sweep:    30 * time.Second,
		MaxAge:   24 * time.Hour,
		Now:      time.Now,
	}
}

// NewClient is the callback client: every connection it opens is checked by
// policy on the address actually dialled (after DNS), so a callback never reaches
// berthd's own listeners or a link-local address whatever its URL says. It uses
// no proxy (a proxy would dial the target out of the policy's sight) and follows
// no redirect: a 3xx is not a delivery (and must not carry the signature
// elsewhere); it is retried like any other non-2xx. tlsConf may be nil.
func NewClient(policy callback.Policy, tlsConf *tls.Config) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           policy.Dialer().DialContext,
		TLSClientConfig:       tlsConf,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Actor is the outbox actor.
type Actor struct {
	store *persistence.Store
	set   Settings
	log   zerolog.Logger
	met   *Metrics

	tasks        *supervisors.Tasks
	inFlight     map[string]bool // lease → its head is being delivered
	queued       []string        // leases with rows waiting for a delivery slot
	isQueued     map[string]bool
	tries        map[string]*messages.DeliveryAttempts // delivery ID → attempts of a row still queued (debug.go)
	recent       *ring                                 // recent deliveries (debug.go)
	droppedTotal map[string]int                        // rows removed undelivered, by reason (stale.go)
}

// New returns the producer of the outbox actor.
func New(store *persistence.Store, set Settings, log zerolog.Logger, met *Metrics) actor.Producer {
	return func() actor.Actor {
		return &Actor{store: store, set: set, log: log.With().Str("actor", "outbox").Logger(), met: met}
	}
}

// delivered reports the end of one delivery back to the actor.
type delivered struct {
	lease string
	row   persistence.OutboxRow
	at    time.Time
	err   error
}

type sweepTick struct{}

// Tasks are the outbox's deliveries and its sweep.
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// Receive handles the outbox's messages. A previous incarnation's deliveries
// never reach it (the kit drops them); their rows are re-read anyway.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *messages.OutboxWake:
		if m.Lease == "" {
			a.queueAll()
		} else {
			a.enqueue(m.Lease)
		}
		a.schedule()
	case sweepTick:
		a.queueAll()
		a.schedule()
	case delivered:
		delete(a.inFlight, m.lease)
		a.settle(m)
		a.schedule()
	case attempted:
		a.record(m)
	case *messages.DebugOutbox:
		m.Reply <- a.debug(m.Lease)
	}
}

// Describe summarises the outbox for /debug/actors.
func (a *Actor) Describe() (string, int) {
	return fmt.Sprintf("%d leases delivering, %d queued", len(a.inFlight), len(a.queued)), len(a.inFlight)
}

// start reads the rows again and sweeps every Sweep; the kit cancels in-flight
// deliveries on a stop and waits for them: rows stay in the store, so nothing
// is lost, and no late goroutine of this incarnation outlives it.
func (a *Actor) start(c actor.Context) {
	a.tasks = supervisors.NewTasks(c, 0)
	a.inFlight = make(map[string]bool)
	a.isQueued = make(map[string]bool)
	a.tries = make(map[string]*messages.DeliveryAttempts)
	a.recent = newRing(recentDeliveries)
	a.droppedTotal = make(map[string]int)
	a.queueAll()
	a.schedule()
	a.tasks.Every("outbox-sweep", a.set.Sweep, sweepTick{})
}

func (a *Actor) queueAll() {
	leases, err := a.store.OutboxLeases()
	if err != nil {
		a.log.Error().Err(err).Msg("read outbox")
		return
	}
	for _, l := range leases {
		a.enqueue(l)
	}
}

func (a *Actor) enqueue(lease string) {
	if a.inFlight[lease] || a.isQueued[lease] {
		return
	}
	a.isQueued[lease] = true
	a.queued = append(a.queued, lease)
}

// settle follows one delivery: after a 2xx the lease's next row goes at once; a
// refused head that went stale meanwhile makes way for what waited behind it;
// any other refused head waits for the sweep.
func (a *Actor) settle(m delivered) {
	if m.err == nil {
		a.remember(m.row, m.at, "")
		a.enqueue(m.lease)
		return
	}
	if head := a.prune(m.lease); head == nil || head.Row.DeliveryID != m.row.DeliveryID {
		a.enqueue(m.lease)
		return
	}
	a.log.Warn().Str("lease_uuid", m.lease).Err(m.err).Msg("callback not delivered; kept for the sweep")
}

// schedule starts deliveries for queued leases while slots are free. Only a lease's
// head row is ever in flight, which is what keeps per-lease FIFO.
func (a *Actor) schedule() {
	for len(a.inFlight) < a.set.Parallel && len(a.queued) > 0 {
		lease := a.queued[0]
		a.queued = a.queued[1:]
		delete(a.isQueued, lease)
		if head := a.prune(lease); head != nil {
			a.inFlight[lease] = true
			a.deliver(*head)
		}
	}
}

// prune removes lease's stale rows (stale.go) in one transaction and returns the
// head left to deliver (nil: none). It runs only while none of the lease's rows
// is in flight. When the removal cannot commit nothing is delivered: a head
// never goes ahead of a row that should have left before it; the sweep retries.
func (a *Actor) prune(lease string) *persistence.OutboxEntry {
	rows, err := a.store.OutboxOf(lease)
	if err != nil {
		a.log.Error().Err(err).Str("lease_uuid", lease).Msg("read outbox")
		return nil
	}
	drops := stale(rows, a.set.Now(), a.set.MaxAge)
	if len(drops) > 0 {
		gone := make(map[persistence.OutboxKey]bool, len(drops))
		for _, d := range drops {
			gone[d.entry.Key] = true
		}
		if _, err := a.store.Commit(persistence.Write{DeleteOutbox: slices.Collect(maps.Keys(gone))}); err != nil {
			a.log.Error().Err(err).Str("lease_uuid", lease).Msg("remove stale callbacks")
			return nil
		}
		for _, d := range drops {
			a.drop(d)
		}
		rows = slices.DeleteFunc(rows, func(e persistence.OutboxEntry) bool { return gone[e.Key] })
	}
	if len(rows) == 0 {
		return nil
	}
	return &rows[0]
}

func (a *Actor) deliver(e persistence.OutboxEntry) {
	now, tasks := a.set.Now, a.tasks
	d := &Delivery{Client: a.set.Client, Secret: a.set.Secret, Delays: a.set.Delays,
		Deadline: a.set.Deadline, Now: a.set.Now, Observe: a.met.attempt,
		Attempted: func(_ int, at time.Time, err error) {
			tasks.Send(attempted{lease: e.Key.Lease, deliveryID: e.Row.DeliveryID, at: at, err: err})
		}}
	tasks.Go("delivery", func(ctx context.Context) any {
		err := d.Send(ctx, e.Row)
		if err == nil {
			// Delete exactly the delivered row; a failure here latches the store and
			// the row is simply sent again later (at least once).
			if derr := a.store.DeleteOutbox(e.Key); derr != nil {
				err = fmt.Errorf("delete delivered row: %w", derr)
			}
		}
		return delivered{lease: e.Key.Lease, row: e.Row, at: now(), err: err}
	})
}
