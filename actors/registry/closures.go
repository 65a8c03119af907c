package registry

// Batched closes. Each closed lease needs a registry commit; committed one at a
// time, a mass close of 100 leases holds the registry for 100 fsyncs in a row,
// and every admission arriving meanwhile waits behind them (~180 ms at 100 on
// this machine's disk). So a close without retention is queued, and every
// queued close is committed in one write when the registry reaches the
// flushClosures it sent itself behind the first.
//
// As with admissions, the batch is invisible: any other message (an Admit, whose
// capacity check must see the released pool, included) commits it first, except
// the reports and terminations of leases not in the batch, which cannot observe
// it — a mass close interleaves them with its closes. A
// close that retains data is decided alone against the committed records (it
// may evict another retained lease of its tenant). A failed commit leaves the
// closes unrecorded, as a failed single commit did: the store has latched and
// the daemon drains; each lease actor tells its close again when it next starts.
// A registry stopping with a batch drops it for the same reason.

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// flushClosures is the registry's note to itself to commit the queued closes.
type flushClosures struct{}

// queueClosure adds a close to the batch; the first one asks for the flush.
func (a *Actor) queueClosure(c actor.Context, m messages.LeaseClosed) {
	if len(a.closures) == 0 {
		c.Send(c.Self(), flushClosures{})
		a.closingIDs = map[string]bool{}
	}
	a.closures = append(a.closures, m)
	a.closingIDs[m.Lease] = true
}

// closuresBefore commits the queued closes before a message that could observe
// them (anything but another plain close or the flush), or drops them when the
// registry stops.
func (a *Actor) closuresBefore(c actor.Context, msg any) {
	if len(a.closures) == 0 {
		return
	}
	switch m := msg.(type) {
	case flushClosures:
		return
	case messages.LeaseClosed:
		if m.Retention == nil {
			return
		}
	case messages.LeaseReport:
		if !a.closing(m.Lease) {
			return
		}
	case *actor.Terminated:
		if e := a.byPID[m.Who.Id]; e != nil && !a.closing(e.spec.Load().Lease) {
			return
		}
	case *actor.Restarting, *actor.Stopping:
		a.closures, a.closingIDs = nil, nil
		return
	}
	a.flushClosures(c)
}

// closing reports whether the lease's close is in the batch.
func (a *Actor) closing(lease string) bool { return a.closingIDs[lease] }

// flushClosures journals every queued close in one write, then settles each.
func (a *Actor) flushClosures(c actor.Context) {
	items := a.closures
	a.closures, a.closingIDs = nil, nil
	now := a.deps.Now()
	var (
		events []persistence.Event
		todo   []messages.LeaseClosed
		seen   = map[string]bool{}
	)
	for _, m := range items {
		e, cur := a.leases[m.Lease], a.st.Leases[m.Lease]
		if e == nil || e.closed || seen[m.Lease] || cur == nil || cur.Admission != m.Admission {
			continue // settled since it was queued
		}
		seen[m.Lease] = true
		events = append(events, closedEvent(m, now))
		todo = append(todo, m)
	}
	if len(events) == 0 {
		return
	}
	if a.deps.ClosureBatches != nil {
		a.deps.ClosureBatches.Observe(float64(len(events)))
	}
	if err := a.commit(events); err != nil {
		return
	}
	for _, m := range todo {
		a.closeCommitted(m, false)
		a.markClosed(c, a.leases[m.Lease], m)
	}
}
