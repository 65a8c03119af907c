package volumehold

import (
	"fmt"

	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Stream is the hold actor's journal stream, of events of version eventVersion.
const (
	Stream       = "volumehold"
	eventVersion = 1
)

// Events, version 1.
const (
	EvHeld = "hold.added" // a volume's destruction is held
	EvDone = "hold.done"  // it is gone
)

type holdEvent struct {
	Name  string `json:"name"`
	Owner string `json:"owner,omitempty"`
}

// State is the held volumes by name → owner.
type State struct {
	Holds map[string]string `json:"holds"`
}

func newState() *State { return &State{Holds: map[string]string{}} }

// Apply folds one event into the state.
func (s *State) Apply(ev persistence.Event) error {
	var e holdEvent
	if err := supervisors.DecodeEvent(ev, eventVersion, &e, func() bool { return e.Name != "" }); err != nil {
		return err
	}
	switch ev.Type {
	case EvHeld:
		s.Holds[e.Name] = e.Owner
	case EvDone:
		if _, ok := s.Holds[e.Name]; !ok {
			return fmt.Errorf("event %s: %s is not held", ev.Type, e.Name)
		}
		delete(s.Holds, e.Name)
	default:
		return supervisors.UnknownEvent(ev)
	}
	return nil
}

// Load rebuilds the holds from the stream.
func Load(store supervisors.JournalStore) (*State, uint64, error) {
	return supervisors.Rebuild(store, Stream, eventVersion, newState, func(st *State) {
		if st.Holds == nil {
			st.Holds = map[string]string{}
		}
	})
}

// commit journals one event, then applies it.
func (a *Actor) commit(typ string, e holdEvent) error {
	if err := a.journal.Commit([]persistence.Event{a.journal.Event(typ, e)}); err != nil {
		return err
	}
	a.Metrics.held.Set(float64(len(a.journal.State.Holds)))
	return nil
}
