package domaingate

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Stream is the gate's journal stream, of events of version eventVersion.
const (
	Stream       = "domaingate"
	eventVersion = 1
)

// Events, version 1.
const (
	EvWatched   = "gate.watched"   // a lease's custom domain is watched
	EvMissed    = "gate.missed"    // a check did not see the quorum
	EvOpened    = "gate.opened"    // the quorum saw it at this host (or the check is disabled)
	EvForgotten = "gate.forgotten" // the lease recorded it, dropped the domain or closed
)

// Event is one gate event's payload.
type Event struct {
	Type   string `json:"-"`
	Lease  string `json:"lease"`
	Domain string `json:"domain"`
	Detail string `json:"detail,omitempty"` // a check's verdict
}

// Gate is one lease's custom domain.
type Gate struct {
	Lease  string    `json:"lease"`
	Domain string    `json:"domain"`
	Since  time.Time `json:"since"`
	Misses int       `json:"misses"`         // failed checks in a row: the backoff's count
	Last   string    `json:"last,omitempty"` // the last check's verdict
	Open   bool      `json:"open"`
	// What operators see of its checks: how many finished, the last one when.
	Checks    int       `json:"checks,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

// State is every watched gate by key (lease + " " + domain).
type State struct {
	Gates map[string]*Gate `json:"gates"`
}

func key(lease, domain string) string { return lease + " " + domain }

func newState() *State { return &State{Gates: map[string]*Gate{}} }

// Apply folds one event into the state.
func (s *State) Apply(ev persistence.Event) error {
	var e Event
	if err := supervisors.DecodeEvent(ev, eventVersion, &e, func() bool { return e.Lease != "" && e.Domain != "" }); err != nil {
		return err
	}
	k := key(e.Lease, e.Domain)
	g, ok := s.Gates[k]
	if ev.Type != EvWatched && !ok {
		return fmt.Errorf("event %s: %s is not watched", ev.Type, k)
	}
	switch ev.Type {
	case EvWatched:
		if ok {
			return fmt.Errorf("event %s: %s is already watched", ev.Type, k)
		}
		s.Gates[k] = &Gate{Lease: e.Lease, Domain: e.Domain, Since: ev.At}
	case EvMissed:
		g.Misses++
		g.Last = e.Detail
		g.checked(ev.At)
	case EvOpened:
		g.Open, g.Last = true, e.Detail
		if e.Detail != detailCheckDisabled {
			g.checked(ev.At)
		}
	case EvForgotten:
		delete(s.Gates, k)
	default:
		return supervisors.UnknownEvent(ev)
	}
	return nil
}

func (g *Gate) checked(at time.Time) {
	g.Checks++
	g.CheckedAt = at
}

// mend gives a snapshot without gates its empty map.
func (s *State) mend() {
	if s.Gates == nil {
		s.Gates = map[string]*Gate{}
	}
}

// Load rebuilds the gates from the stream.
func Load(store supervisors.JournalStore) (*State, uint64, error) {
	return supervisors.Rebuild(store, Stream, eventVersion, newState, (*State).mend)
}
