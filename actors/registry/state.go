package registry

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/persistence"
)

// Stream is the registry's journal stream.
const Stream = "registry"

// Registry events, version 1.
const (
	EvLeaseAdmitted = "lease.admitted" // a lease (or a re-provision of a failed one) with its frozen spec
	EvLeaseClosed   = "lease.closed"   // the lease's closed receipt is journaled; its reservation is released
)

const eventVersion = 1

type leaseAdmitted struct {
	Spec *lease.Spec `json:"spec"`
}

type leaseClosed struct {
	Lease     string `json:"lease_uuid"`
	Admission uint64 `json:"admission"`
}

// State is the registry's durable knowledge: every live lease's latest admitted
// spec. The pool is derived from it.
type State struct {
	Leases     map[string]*lease.Spec `json:"leases"`
	Admissions uint64                 `json:"admissions"` // last admission number handed out
}

func newState() *State { return &State{Leases: map[string]*lease.Spec{}} }

// Apply folds one registry event into the state.
func (s *State) Apply(ev persistence.Event) error {
	if ev.V != eventVersion {
		return fmt.Errorf("event %s: version %d not supported (this berthd reads %d)", ev.Type, ev.V, eventVersion)
	}
	switch ev.Type {
	case EvLeaseAdmitted:
		var e leaseAdmitted
		if err := json.Unmarshal(ev.Data, &e); err != nil || e.Spec == nil || e.Spec.Lease == "" {
			return fmt.Errorf("event %s: malformed", ev.Type)
		}
		if e.Spec.Admission <= s.Admissions {
			return fmt.Errorf("event %s: admission %d not after %d", ev.Type, e.Spec.Admission, s.Admissions)
		}
		s.Leases[e.Spec.Lease] = e.Spec
		s.Admissions = e.Spec.Admission
	case EvLeaseClosed:
		var e leaseClosed
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return fmt.Errorf("event %s: %w", ev.Type, err)
		}
		if cur, ok := s.Leases[e.Lease]; ok && cur.Admission == e.Admission {
			delete(s.Leases, e.Lease)
		}
	default:
		return fmt.Errorf("event type %q unknown to this berthd", ev.Type)
	}
	return nil
}

// Sorted lists live lease IDs in UUID order.
func (s *State) Sorted() []string {
	out := make([]string, 0, len(s.Leases))
	for id := range s.Leases {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// LoadState rebuilds the registry's state from its stream; it also returns the
// stream's last sequence number.
func LoadState(store *persistence.Store) (*State, uint64, error) {
	l, err := store.Load(Stream)
	if err != nil {
		return nil, 0, fmt.Errorf("load registry: %w", err)
	}
	st := newState()
	if l.Snapshot != nil {
		if l.Snapshot.V != eventVersion {
			return nil, 0, fmt.Errorf("load registry: snapshot version %d not supported (this berthd reads %d)", l.Snapshot.V, eventVersion)
		}
		if err := json.Unmarshal(l.Snapshot.Data, st); err != nil {
			return nil, 0, fmt.Errorf("load registry: snapshot: %w", err)
		}
		if st.Leases == nil {
			st.Leases = map[string]*lease.Spec{}
		}
	}
	for _, r := range l.Events {
		if err := st.Apply(r.Event); err != nil {
			return nil, 0, fmt.Errorf("load registry: seq %d: %w", r.Seq, err)
		}
	}
	return st, l.LastSeq, nil
}

// Verify loads the registry and every lease stream it names, the way the actors
// will, so a journal berthd cannot read refuses startup before anything runs.
func Verify(store *persistence.Store) error {
	st, _, err := LoadState(store)
	if err != nil {
		return err
	}
	streams, err := store.Streams("lease/")
	if err != nil {
		return fmt.Errorf("list lease streams: %w", err)
	}
	for _, s := range streams {
		if _, _, err := lease.Load(store, s[len("lease/"):]); err != nil {
			return err
		}
	}
	for id := range st.Leases {
		if _, _, err := lease.Load(store, id); err != nil {
			return err
		}
	}
	return nil
}

func admittedEvent(spec *lease.Spec, at time.Time) persistence.Event {
	data, _ := json.Marshal(leaseAdmitted{Spec: spec})
	return persistence.Event{Type: EvLeaseAdmitted, V: eventVersion, At: at, Data: data}
}

func closedEvent(leaseID string, admission uint64, at time.Time) persistence.Event {
	data, _ := json.Marshal(leaseClosed{Lease: leaseID, Admission: admission})
	return persistence.Event{Type: EvLeaseClosed, V: eventVersion, At: at, Data: data}
}
