package refresh

import (
	"fmt"
	"slices"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Stream is the refresh actor's journal stream, of events of version eventVersion.
const (
	Stream       = "refresh"
	eventVersion = 1
)

// Events, version 1.
const (
	EvRunStarted     = "run.started"      // a POST started a run over the stale Ready leases
	EvLeaseStarted   = "lease.started"    // a lease's refresh is about to be asked for (written ahead)
	EvLeaseRefused   = "lease.refused"    // the lease did not take it: pending again
	EvLeaseSettled   = "lease.settled"    // its maintenance settled: the lease's durable outcome
	EvLeaseDropped   = "lease.dropped"    // nothing left to refresh (gone, current, newer): skipped
	EvRunEnded       = "run.ended"        // every admitted lease settled, nothing left to start
	EvOutcomesPruned = "outcomes.dropped" // outcomes of leases that closed
)

// Phase is where a lease of a run stands.
type Phase string

const (
	Pending   Phase = "pending"   // not refreshed yet: tried (again) on a pass
	InFlight  Phase = "in_flight" // its maintenance was asked for and has not settled
	Refreshed Phase = "refreshed"
	Failed    Phase = "failed"  // settled without its target becoming active: never retried
	Dropped   Phase = "dropped" // no longer needs (or may have) a refresh: skipped
)

// Run is one operator-started run.
type Run struct {
	ID          string            `json:"id"`
	StartedAt   time.Time         `json:"started_at"`
	Concurrency int               `json:"concurrency"`
	Leases      map[string]*Lease `json:"leases"` // the stale Ready leases when it started
	Ended       bool              `json:"ended"`
}

// Lease is one lease of a run. MaintenanceID and Stale are those of its
// current (or last) attempt: the same ID is asked for again after a restart
// that lost the answer, so the lease admits it at most once.
type Lease struct {
	Phase         Phase    `json:"phase"`
	MaintenanceID string   `json:"maintenance_id,omitempty"`
	Stale         []string `json:"stale,omitempty"`
}

// Outcome is a lease's latest settled refresh: its durable receipt.
type Outcome struct {
	MaintenanceID string                    `json:"maintenance_id"`
	Outcome       string                    `json:"outcome"` // messages.RefreshRefreshed | RefreshFailed
	Restored      *messages.RestoredRelease `json:"restored,omitempty"`
}

// State is the current or most recent run, and every lease's outcome.
type State struct {
	Run      *Run               `json:"run,omitempty"`
	Outcomes map[string]Outcome `json:"outcomes"`
}

func newState() *State { return &State{Outcomes: map[string]Outcome{}} }

// Active reports whether a run is on.
func (s *State) Active() bool { return s.Run != nil && !s.Run.Ended }

// count is how many leases of the run are in phase p.
func (s *State) count(p Phase) int {
	n := 0
	if s.Run != nil {
		for _, l := range s.Run.Leases {
			if l.Phase == p {
				n++
			}
		}
	}
	return n
}

// Event payloads.
type (
	runStarted struct {
		ID          string    `json:"id"`
		At          time.Time `json:"at"`
		Concurrency int       `json:"concurrency"`
		Leases      []string  `json:"leases"`
	}
	leaseEvent struct {
		Lease         string   `json:"lease_uuid,omitempty"`
		MaintenanceID string   `json:"maintenance_id,omitempty"` // lease.started
		Stale         []string `json:"stale,omitempty"`          // lease.started
		Outcome       *Outcome `json:"outcome,omitempty"`        // lease.settled
		Leases        []string `json:"leases,omitempty"`         // outcomes.dropped
	}
)

// moves are the lease events: the phase each needs, and the one it makes.
var moves = map[string][2]Phase{
	EvLeaseStarted: {Pending, InFlight},
	EvLeaseRefused: {InFlight, Pending},
	EvLeaseDropped: {Pending, Dropped},
	EvLeaseSettled: {InFlight, ""}, // Refreshed or Failed, by the outcome
}

// Apply folds one event; one this state does not permit is refused (the
// journal is not ours to trust).
func (s *State) Apply(ev persistence.Event) error {
	if ev.Type == EvRunStarted {
		var e runStarted
		if err := supervisors.DecodeEvent(ev, eventVersion, &e, func() bool { return e.ID != "" && e.Concurrency > 0 }); err != nil {
			return err
		}
		if s.Active() {
			return fmt.Errorf("event %s: a run is active", ev.Type)
		}
		s.Run = &Run{ID: e.ID, StartedAt: e.At, Concurrency: e.Concurrency, Leases: map[string]*Lease{}}
		for _, l := range e.Leases {
			s.Run.Leases[l] = &Lease{Phase: Pending}
		}
		return nil
	}
	var e leaseEvent
	if err := supervisors.DecodeEvent(ev, eventVersion, &e, nil); err != nil {
		return err
	}
	switch ev.Type {
	case EvRunEnded:
		if !s.Active() || s.count(InFlight) > 0 {
			return fmt.Errorf("event %s: no run to end", ev.Type)
		}
		s.Run.Ended = true
	case EvOutcomesPruned:
		for _, l := range e.Leases {
			delete(s.Outcomes, l)
		}
	default:
		return s.move(ev, e)
	}
	return nil
}

// move applies a lease event of the active run.
func (s *State) move(ev persistence.Event, e leaseEvent) error {
	typ := ev.Type
	m, ok := moves[typ]
	if !ok {
		return supervisors.UnknownEvent(ev)
	}
	if !s.Active() || s.Run.Leases[e.Lease] == nil || s.Run.Leases[e.Lease].Phase != m[0] {
		return fmt.Errorf("event %s: lease %s is not %s", typ, e.Lease, m[0])
	}
	l, to := s.Run.Leases[e.Lease], m[1]
	if typ == EvLeaseStarted {
		if e.MaintenanceID == "" {
			return fmt.Errorf("event %s: malformed", typ)
		}
		l.MaintenanceID, l.Stale = e.MaintenanceID, e.Stale
	}
	if typ == EvLeaseSettled {
		o := e.Outcome
		if o == nil || !slices.Contains([]string{messages.RefreshRefreshed, messages.RefreshFailed}, o.Outcome) {
			return fmt.Errorf("event %s: malformed", typ)
		}
		to = Failed
		if o.Outcome == messages.RefreshRefreshed {
			to = Refreshed
		}
		s.Outcomes[e.Lease] = *o
	}
	l.Phase = to
	return nil
}

// Load rebuilds the refresh state from its stream.
func Load(store supervisors.JournalStore) (*State, uint64, error) {
	return supervisors.Rebuild(store, Stream, eventVersion, newState, func(st *State) {
		if st.Outcomes == nil {
			st.Outcomes = map[string]Outcome{}
		}
	})
}
