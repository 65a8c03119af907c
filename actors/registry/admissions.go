package registry

// Batched admission. Every admission needs a journal commit (an fsync) before its
// 202; committed one at a time, 100 concurrent POSTs queue behind each other's
// fsyncs (7 ms each here). So the registry validates and reserves each Admit as it
// comes, queues it, and commits every queued admission in one write when it gets
// to the flushAdmissions it sent itself behind the first: that message is behind
// every Admit already in its mailbox, so a burst shares one fsync and a lone
// request waits for nothing but its own.
//
// The batch is invisible to everything else: before any other message (except a
// report of a lease not in the batch, which cannot observe it) the batch is
// committed first, so every other message sees exactly what serial admission
// would have shown. A failed commit undoes the reservations and answers each
// request "state store unavailable"; nothing was promised. A registry stopping or
// restarting with a batch answers it the same way without committing.

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// flushAdmissions is the registry's note to itself to commit the batch.
type flushAdmissions struct{}

// admission is one validated, reserved admission waiting for its commit.
type admission struct {
	spec      *lease.Spec
	event     persistence.Event
	reply     chan<- error
	replacing bool
	before    *leaseUse // the lease's reservation before this admission (nil: none)
}

type admissionBatch struct {
	items []admission
	byID  map[string]bool
}

func (b *admissionBatch) holds(id string) bool { return b.byID[id] }

// queueAdmission adds ad to the batch; the first one asks for the flush.
func (a *Actor) queueAdmission(c actor.Context, ad admission) {
	if len(a.batch.items) == 0 {
		a.batch.byID = map[string]bool{}
		c.Send(c.Self(), flushAdmissions{})
	}
	a.batch.items = append(a.batch.items, ad)
	a.batch.byID[ad.spec.Lease] = true
	if a.deps.Quiet != nil {
		a.deps.Quiet.Mark()
	}
}

// beforeMessage commits the batch before any message that could observe it.
func (a *Actor) beforeMessage(c actor.Context, msg any) {
	if len(a.batch.items) == 0 {
		return
	}
	switch m := msg.(type) {
	case *messages.Admit, flushAdmissions:
		return
	case messages.LeaseReport:
		if !a.batch.holds(m.Lease) {
			return
		}
	case *actor.Restarting, *actor.Stopping:
		a.abandonAdmissions()
		return
	}
	a.flushAdmissions(c)
}

// flushAdmissions commits every queued admission in one write, then spawns and
// answers each.
func (a *Actor) flushAdmissions(c actor.Context) {
	items := a.batch.items
	if len(items) == 0 {
		return
	}
	a.batch = admissionBatch{}
	events := make([]persistence.Event, len(items))
	for i, ad := range items {
		events[i] = ad.event
	}
	if a.deps.AdmissionBatches != nil {
		a.deps.AdmissionBatches.Observe(float64(len(items)))
	}
	if err := a.commit(events); err != nil {
		a.undo(items, messages.Refuse(messages.ErrUnavailable, "state store unavailable"))
		return
	}
	for _, ad := range items {
		a.admitted(c, ad)
	}
}

// abandonAdmissions answers a batch the registry will not commit (it is stopping).
func (a *Actor) abandonAdmissions() {
	items := a.batch.items
	a.batch = admissionBatch{}
	a.undo(items, messages.Refuse(messages.ErrUnavailable, "the registry is restarting, retry shortly"))
}

// undo gives back the batch's reservations, newest first, and answers each with err.
func (a *Actor) undo(items []admission, err error) {
	for i := len(items) - 1; i >= 0; i-- {
		ad := items[i]
		if ad.before != nil {
			a.pool.Set(ad.spec.Lease, ad.before.tenant, ad.before.use)
		} else {
			a.pool.Release(ad.spec.Lease)
		}
		ad.reply <- err
	}
}
