package outbox

import (
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
)

// The outbox's part of the operator's debug API. The rows themselves are the
// store's (the debug handlers read them there); what only this actor knows is
// how their deliveries went: attempts and the last error of rows still queued,
// and a bounded ring of recent deliveries. Both are the actor instance's memory:
// a restart of the outbox (or of berthd) forgets them — the rows, which are
// what matters, are re-read from the store and delivered as before. Rows
// removed undelivered (stale.go) go to the same ring, with why.

// Bounds of the delivery bookkeeping.
const (
	recentDeliveries = 1024 // delivered rows remembered, across all leases
	maxTracked       = 4096 // queued rows whose attempts are tracked
)

// attempted reports one attempt of a delivery back to the actor.
type attempted struct {
	lease      string
	deliveryID string
	at         time.Time
	err        error
}

// record counts one attempt of a row still queued.
func (a *Actor) record(m attempted) {
	t := a.tries[m.deliveryID]
	if t == nil {
		if len(a.tries) >= maxTracked {
			a.forgetOldestTry()
		}
		t = &messages.DeliveryAttempts{Lease: m.lease}
		a.tries[m.deliveryID] = t
	}
	t.Attempts++
	t.LastAttemptAt = m.at
	if m.err != nil {
		t.LastError = m.err.Error()
	}
}

// forgetOldestTry drops the tracked row attempted longest ago (the bound is only
// reached when rows leave the outbox some way this actor did not see).
func (a *Actor) forgetOldestTry() {
	oldest := ""
	for id, t := range a.tries {
		if oldest == "" || t.LastAttemptAt.Before(a.tries[oldest].LastAttemptAt) {
			oldest = id
		}
	}
	delete(a.tries, oldest)
}

// remember moves the bookkeeping of a row that left the outbox into the ring:
// delivered (dropped "") or removed undelivered (dropped: why, stale.go).
func (a *Actor) remember(row persistence.OutboxRow, at time.Time, dropped string) {
	d := messages.DeliveredCallback{Lease: row.Lease, DeliveryID: row.DeliveryID, Kind: row.Kind,
		Status: callback.Status(row.Body), URLPath: callback.URLPath(row.URL), CreatedAt: row.CreatedAt, DeliveredAt: at,
		Dropped: dropped}
	if t := a.tries[row.DeliveryID]; t != nil {
		d.Attempts, d.LastAttemptAt, d.LastError = t.Attempts, t.LastAttemptAt, t.LastError
		delete(a.tries, row.DeliveryID)
	}
	a.recent.add(d)
}

// debug answers DebugOutbox with copies: the reply leaves the actor.
func (a *Actor) debug(lease string) messages.DebugOutboxReply {
	out := messages.DebugOutboxReply{Attempts: map[string]messages.DeliveryAttempts{}, Delivered: a.recent.list(lease),
		Expired: a.droppedTotal[DroppedExpired], Coalesced: a.droppedTotal[DroppedCoalesced]}
	for id, t := range a.tries {
		if lease == "" || t.Lease == lease {
			out.Attempts[id] = *t
		}
	}
	return out
}

// ring is a bounded, oldest-first record of callbacks that left the outbox.
type ring struct {
	buf  []messages.DeliveredCallback
	head int
	n    int
}

func newRing(capacity int) *ring {
	return &ring{buf: make([]messages.DeliveredCallback, max(capacity, 1))}
}

func (r *ring) add(d messages.DeliveredCallback) {
	if r.n < len(r.buf) {
		r.buf[(r.head+r.n)%len(r.buf)] = d
		r.n++
		return
	}
	r.buf[r.head] = d
	r.head = (r.head + 1) % len(r.buf)
}

// list returns the remembered deliveries of lease ("" = all), oldest first.
func (r *ring) list(lease string) []messages.DeliveredCallback {
	out := []messages.DeliveredCallback{}
	for i := 0; i < r.n; i++ {
		d := r.buf[(r.head+i)%len(r.buf)]
		if lease == "" || d.Lease == lease {
			out = append(out, d)
		}
	}
	return out
}
