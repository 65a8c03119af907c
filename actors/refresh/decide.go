package refresh

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Inputs of Decide.
type (
	// Start is POST /runtime_refresh, with the inventory read for it.
	Start struct{ Inv Inventory }
	// Pass is a pass's inventory and what the in-flight leases it asked answered.
	Pass struct {
		Inv      Inventory
		Receipts map[string]messages.RefreshReceipt
	}
	// Admitted is a lease's answer to the maintenance asked of it.
	Admitted struct {
		Lease, MaintenanceID string
		Err                  error
	}
)

// Inventory is what the registry and Docker show now.
type Inventory struct {
	Live    map[string]bool     // the leases the registry tracks
	Stale   map[string][]string // Ready leases → their running containers under an older contract
	Current map[string]bool     // Ready leases running none (or one under a newer contract)
	Shared  []string            // sorted leases sharing a network with another lease
}

// Env is what a decision depends on besides the state.
type Env struct {
	Now         time.Time
	Concurrency int           // leases refreshed at once; 0 disables the endpoint
	MaxRun      time.Duration // a run starts no lease this long after it started
	NewID       func() string // a fresh maintenance (or run) ID: a UUIDv4
}

// Ask is an effect: ask a lease for its runtime_refresh maintenance.
type Ask struct {
	Lease, MaintenanceID string
	Stale                []string
}

// Decision is what an input makes: events to journal, then asks to send; Reply
// answers a Start; Pass asks for a pass at once (a run just started).
type Decision struct {
	Events []persistence.Event
	Asks   []Ask
	Reply  error
	Pass   bool
}

// Decide is the refresh actor's one decision: no I/O, no clock but env's.
func Decide(st *State, in any, env Env) Decision {
	switch in := in.(type) {
	case Start:
		return decideStart(st, in, env)
	case Pass:
		return decidePass(st, in, env)
	case Admitted:
		return decideAdmitted(st, in, env)
	}
	return Decision{}
}

func decideStart(st *State, in Start, env Env) Decision {
	switch {
	case env.Concurrency <= 0:
		return Decision{Reply: messages.Refuse(messages.ErrDisabled, "runtime refresh is disabled (runtime_refresh_max_concurrency: 0)")}
	case st.Active():
		return Decision{Reply: messages.Refuse(messages.ErrInvalidState, "a runtime refresh run is already active; poll GET /runtime_refresh")}
	}
	ev := event(EvRunStarted, env.Now, runStarted{ID: env.NewID(), At: env.Now, Concurrency: env.Concurrency,
		Leases: slices.Sorted(maps.Keys(in.Inv.Stale))})
	return Decision{Events: []persistence.Event{ev}, Pass: true}
}

// decidePass forgets the outcomes of closed leases, settles the in-flight leases whose maintenance settled (and asks
// again one a restart lost the answer of), drops the pending leases that need
// no refresh any more (or that the run may no longer start), starts pending
// stale ones while slots are free, and ends a run with nothing left.
func decidePass(st *State, in Pass, env Env) Decision {
	var d Decision
	var closed []string
	for _, id := range slices.Sorted(maps.Keys(st.Outcomes)) {
		if !in.Inv.Live[id] {
			closed = append(closed, id)
		}
	}
	if closed != nil { // an outcome goes with its lease
		d.Events = append(d.Events, event(EvOutcomesPruned, env.Now, leaseEvent{Leases: closed}))
	}
	if !st.Active() {
		return d
	}
	run := st.Run
	inFlight, pending := 0, 0
	for _, id := range slices.Sorted(maps.Keys(run.Leases)) {
		l := run.Leases[id]
		if l.Phase != InFlight {
			continue
		}
		r, read := in.Receipts[id]
		switch {
		case !in.Inv.Live[id]: // closed mid-refresh: its settlement is gone with it
			d.settle(env, id, Outcome{MaintenanceID: l.MaintenanceID, Outcome: messages.RefreshFailed})
		case !read || !r.Read:
			inFlight++
		case r.Settled:
			d.settle(env, id, Outcome{MaintenanceID: l.MaintenanceID, Outcome: r.Outcome, Restored: r.Restored})
		case !r.Found: // written ahead, then the answer lost: the same ID again
			d.Asks = append(d.Asks, Ask{Lease: id, MaintenanceID: l.MaintenanceID, Stale: l.Stale})
			inFlight++
		default:
			inFlight++
		}
	}
	late := env.Now.Sub(run.StartedAt) >= env.MaxRun
	for _, id := range slices.Sorted(maps.Keys(run.Leases)) {
		if run.Leases[id].Phase != Pending {
			continue
		}
		stale, isStale := in.Inv.Stale[id]
		switch {
		case late || !in.Inv.Live[id] || in.Inv.Current[id]:
			d.Events = append(d.Events, event(EvLeaseDropped, env.Now, leaseEvent{Lease: id}))
		case isStale && inFlight < run.Concurrency:
			mid := env.NewID()
			d.Events = append(d.Events, event(EvLeaseStarted, env.Now, leaseEvent{Lease: id, MaintenanceID: mid, Stale: stale}))
			d.Asks = append(d.Asks, Ask{Lease: id, MaintenanceID: mid, Stale: stale})
			inFlight++
		default: // busy, not Ready for now, or no slot: a later pass
			pending++
		}
	}
	if inFlight == 0 && pending == 0 {
		d.Events = append(d.Events, event(EvRunEnded, env.Now, leaseEvent{}))
	}
	return d
}

func (d *Decision) settle(env Env, id string, o Outcome) {
	d.Events = append(d.Events, event(EvLeaseSettled, env.Now, leaseEvent{Lease: id, Outcome: &o}))
}

// decideAdmitted puts a lease that refused its refresh back to pending (a
// later pass tries it again); an ask that got no answer stays in flight, and
// the next pass reads whether the lease took it.
func decideAdmitted(st *State, in Admitted, env Env) Decision {
	if in.Err == nil || !st.Active() {
		return Decision{}
	}
	l := st.Run.Leases[in.Lease]
	if l == nil || l.Phase != InFlight || l.MaintenanceID != in.MaintenanceID || !refused(in.Err) {
		return Decision{}
	}
	return Decision{Events: []persistence.Event{event(EvLeaseRefused, env.Now, leaseEvent{Lease: in.Lease})}}
}

// refused reports whether the lease (or the registry) decided against the
// refresh, as opposed to an answer that never came.
func refused(err error) bool {
	return errors.Is(err, messages.ErrInvalidState) || errors.Is(err, messages.ErrNotFound)
}

func event(typ string, at time.Time, payload any) persistence.Event {
	return supervisors.NewEvent(typ, eventVersion, at, payload)
}
