package registry

// Batched admissions and closes, on supervisors.Group: one fsync per admission
// queued 100 concurrent POSTs behind each other, and a mass close held the
// registry for one fsync per lease. So an admission is validated and reserved as
// it comes, a plain close queued, and each group commits all it holds in one
// write at the flush it sent itself behind its first item. A batch is invisible:
// what could observe it commits it first; what commutes passes — another Admit
// the admissions, a plain close the closes, reports (and, past the closes,
// terminations) of leases not in the batch. A close that retains data is decided
// alone (it may evict another record of its tenant). A failed admission commit
// gives every reservation back and answers "state store unavailable"; a failed
// close commit leaves the closes unrecorded (the store latched, the daemon
// drains; each lease tells its close again when it next starts). A registry
// stopping abandons both: admissions answered "restarting", closes dropped.

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// admission is one validated, reserved admission waiting for its commit.
type admission struct {
	spec      *lease.Spec
	event     persistence.Event
	reply     chan<- error
	ticket    *messages.Ticket
	replacing bool
	before    *leaseUse // the lease's reservation before this admission (nil: none)
}

type (
	admissionBatch []admission            // an admission batch due for its commit
	closeBatch     []messages.LeaseClosed // a close batch due for its commit
)

var (
	errStoreUnavailable = messages.Refuse(messages.ErrUnavailable, "state store unavailable")
	errRestarting       = messages.Refuse(messages.ErrUnavailable, "the registry is restarting, retry shortly")
)

// groups declares the registry's two group commits.
func (a *Actor) groups() {
	a.admissions = &supervisors.Group[admission]{Tasks: a.tasks,
		Commutes: func(msg any) bool {
			switch m := msg.(type) {
			case *messages.Admit:
				return true
			case messages.LeaseReport:
				return !a.admissions.Holds(m.Lease)
			}
			return false
		},
		Commit: func(items []admission) {
			items = a.taken(items)
			observe(a.deps.AdmissionBatches, len(items))
			if len(items) > 0 {
				a.step(admissionBatch(items))
			}
		},
		Abandon: func(items []admission) { a.execute(Decision{Effects: undo(items, errRestarting)}) },
	}
	a.closes = &supervisors.Group[messages.LeaseClosed]{Tasks: a.tasks,
		Commutes: func(msg any) bool {
			switch m := msg.(type) {
			case messages.LeaseClosed:
				return m.Retention == nil
			case messages.LeaseReport:
				return !a.closes.Holds(m.Lease)
			case *actor.Terminated:
				id, e := a.dir.actorOf(m.Who)
				return e != nil && !a.closes.Holds(id)
			}
			return false
		},
		Commit: func(items []messages.LeaseClosed) {
			d := Decide(a.dir, closeBatch(items), a.env())
			observe(a.deps.ClosureBatches, len(d.Events))
			a.execute(d)
		},
	}
}

// taken keeps the admissions whose tickets this commit takes and gives back the
// reservations of those whose askers gave up meanwhile (already answered 503:
// they must never be admitted).
func (a *Actor) taken(items []admission) []admission {
	keep, dropped := takeTickets(items)
	if len(dropped) > 0 {
		a.execute(Decision{Effects: undo(dropped, errGivenUp)})
		a.log.Warn().Int("admissions", len(dropped)).Msg("admissions given up by their askers before their commit: not admitted")
	}
	return keep
}

// takeTickets takes each admission's ticket: those taken are committed, the
// others were given up by their askers.
func takeTickets(items []admission) (taken, dropped []admission) {
	for _, ad := range items {
		if ad.ticket.Take() {
			taken = append(taken, ad)
		} else {
			dropped = append(dropped, ad)
		}
	}
	return taken, dropped
}

var errGivenUp = messages.Refuse(messages.ErrUnavailable, "the request expired before it was decided; nothing was changed")

// undo gives back a batch's reservations, newest first, and answers each with err.
func undo(items []admission, err error) []Effect {
	var fx []Effect
	for i := len(items) - 1; i >= 0; i-- {
		fx = append(fx, Reserve{items[i].spec.Lease, items[i].before}, Answer{items[i].reply, err})
	}
	return fx
}
