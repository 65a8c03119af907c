package netpool

import (
	"fmt"

	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Stream is the pool's journal stream, of events of version eventVersion.
const (
	Stream       = "netpool"
	eventVersion = 1
)

// Events, version 1.
const (
	EvBound   = "pool.bound"   // a pool network is bound to a lease
	EvUnbound = "pool.unbound" // its lease is gone and nothing is attached (released), or it vanished (dropped)
)

// Unbind reasons.
const (
	ReasonReleased = "released"
	ReasonDropped  = "dropped"
)

// State is the bindings: pool network ID → lease, and its index by lease.
type State struct {
	Bound   map[string]string `json:"bound"`
	byLease map[string]string // lease → bound network
}

func newState() *State { return &State{Bound: map[string]string{}, byLease: map[string]string{}} }

// bindEvent is the payload of both events.
type bindEvent struct {
	Network string `json:"network"`
	Lease   string `json:"lease"`
	Reason  string `json:"reason,omitempty"`
}

// Apply folds one event into the state.
func (s *State) Apply(ev persistence.Event) error {
	var e bindEvent
	if err := supervisors.DecodeEvent(ev, eventVersion, &e, func() bool { return e.Network != "" && e.Lease != "" }); err != nil {
		return err
	}
	switch ev.Type {
	case EvBound:
		if l, ok := s.Bound[e.Network]; ok {
			return fmt.Errorf("event %s: %s is already bound to %s", ev.Type, e.Network, l)
		}
		s.Bound[e.Network], s.byLease[e.Lease] = e.Lease, e.Network
	case EvUnbound:
		if s.Bound[e.Network] != e.Lease {
			return fmt.Errorf("event %s: %s is not bound to %s", ev.Type, e.Network, e.Lease)
		}
		delete(s.Bound, e.Network)
		delete(s.byLease, e.Lease)
	default:
		return supervisors.UnknownEvent(ev)
	}
	return nil
}

// Load rebuilds the bindings from the stream.
func Load(store supervisors.JournalStore) (*State, uint64, error) {
	return supervisors.Rebuild(store, Stream, eventVersion, newState, (*State).index)
}

// index mends a snapshot's bindings and rebuilds their index by lease.
func (s *State) index() {
	if s.Bound == nil {
		s.Bound = map[string]string{}
	}
	for n, l := range s.Bound {
		s.byLease[l] = n
	}
}

// commit journals one bind or unbind per event in one write, then applies them.
func (a *Actor) commit(typ string, evs []bindEvent) error {
	events := make([]persistence.Event, len(evs))
	for i, e := range evs {
		events[i] = a.journal.Event(typ, e)
	}
	if err := a.journal.Commit(events); err != nil {
		return err
	}
	if typ == EvUnbound {
		for _, e := range evs {
			delete(a.closed, e.Lease)
		}
	}
	a.gauges()
	return nil
}
