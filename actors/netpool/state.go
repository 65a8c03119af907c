package netpool

import (
	"fmt"

	"github.com/berth-dev/berth/dockerio"
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
	// A single-container lease takes (bridged) or gives back (unbridged) one of
	// the default bridge's slots; the event's network is "bridge".
	EvBridged   = "pool.bridged"
	EvUnbridged = "pool.unbridged"
)

// bridgedNetwork is the network of a lease's binding to the default bridge
// (its events' network, a pass's binding): Docker gives the bridge a new ID
// each time dockerd starts, so its name stands for it. A pool network's ID is
// 64 hex digits: never this.
const bridgedNetwork = dockerio.DefaultBridgeName

// Unbind reasons.
const (
	ReasonReleased = "released"
	ReasonDropped  = "dropped"
)

// State is the bindings: pool network ID → lease, and its index by lease; and
// the leases bound to the default bridge.
type State struct {
	Bound   map[string]string `json:"bound"`
	Bridged map[string]bool   `json:"bridged,omitempty"`
	byLease map[string]string // lease → bound network
}

func newState() *State {
	return &State{Bound: map[string]string{}, Bridged: map[string]bool{}, byLease: map[string]string{}}
}

// holds reports whether b is a binding of the state.
func (s *State) holds(b binding) bool {
	if b.network == bridgedNetwork {
		return s.Bridged[b.lease]
	}
	return s.Bound[b.network] == b.lease
}

// bindEvent is the payload of every event; typ is its type (not in the
// payload).
type bindEvent struct {
	Network string `json:"network"`
	Lease   string `json:"lease"`
	Reason  string `json:"reason,omitempty"`
	typ     string
}

// unbindEvent gives b back: a bridge slot, or a pool network.
func unbindEvent(b binding, reason string) bindEvent {
	typ := EvUnbound
	if b.network == bridgedNetwork {
		typ = EvUnbridged
	}
	return bindEvent{Network: b.network, Lease: b.lease, Reason: reason, typ: typ}
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
	case EvBridged:
		if n, ok := s.byLease[e.Lease]; ok || s.Bridged[e.Lease] {
			return fmt.Errorf("event %s: %s already holds a network (%q)", ev.Type, e.Lease, n)
		}
		s.Bridged[e.Lease] = true
	case EvUnbridged:
		if !s.Bridged[e.Lease] {
			return fmt.Errorf("event %s: %s is not bridged", ev.Type, e.Lease)
		}
		delete(s.Bridged, e.Lease)
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
	if s.Bridged == nil {
		s.Bridged = map[string]bool{}
	}
	for n, l := range s.Bound {
		s.byLease[l] = n
	}
}

// commit journals the events (each its typ) in one write, then applies them.
func (a *Actor) commit(evs []bindEvent) error {
	events := make([]persistence.Event, len(evs))
	for i, e := range evs {
		events[i] = a.journal.Event(e.typ, e)
	}
	if err := a.journal.Commit(events); err != nil {
		return err
	}
	for _, e := range evs {
		if e.typ == EvUnbound || e.typ == EvUnbridged {
			delete(a.closed, e.Lease)
		}
	}
	a.gauges()
	return nil
}
