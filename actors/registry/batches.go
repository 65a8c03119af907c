package registry

// Batched admissions and closes, on supervisors.Group. Every admission needs a
// journal commit (an fsync) before its 202; one at a time, 100 concurrent POSTs
// queue behind each other's fsyncs, and a mass close of 100 leases holds the
// registry for 100 fsyncs in a row while admissions wait behind them. So an
// admission is validated and reserved as it comes, a plain close is queued, and
// each group commits everything queued in one write at the flush it sent itself
// behind its first item.
//
// A batch is invisible. Anything that could observe it commits it first; what
// commutes passes: another Admit past the admission batch, a plain close past
// the close batch, and the reports (and, past the closes, terminations) of
// leases not in the batch — a burst and a mass close interleave them. A close
// that retains data is decided alone against the committed records (it may
// evict another record of its tenant). A failed admission commit gives every
// reservation back and answers "state store unavailable": nothing was promised.
// A failed close commit leaves the closes unrecorded: the store has latched and
// the daemon drains; each lease tells its close again when it next starts. A
// registry that stops or restarts abandons its batches without committing:
// admissions are answered "the registry is restarting", closes dropped.

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
			observe(a.deps.AdmissionBatches, len(items))
			a.step(admissionBatch(items))
		},
		Abandon: func(items []admission) { a.runAll(undo(items, errRestarting)) },
	}
	a.closes = &supervisors.Group[messages.LeaseClosed]{Tasks: a.tasks,
		Commutes: func(msg any) bool {
			switch m := msg.(type) {
			case messages.LeaseClosed:
				return m.Retention == nil
			case messages.LeaseReport:
				return !a.closes.Holds(m.Lease)
			case *actor.Terminated:
				id, ok := a.dir.byPID[m.Who.Id]
				return ok && !a.closes.Holds(id)
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

// undo gives back a batch's reservations, newest first, and answers each with err.
func undo(items []admission, err error) []Effect {
	var fx []Effect
	for i := len(items) - 1; i >= 0; i-- {
		fx = append(fx, Reserve{items[i].spec.Lease, items[i].before}, Answer{items[i].reply, err})
	}
	return fx
}
