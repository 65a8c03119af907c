package imagegc

import (
	"fmt"
	"slices"
	"time"

	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Stream is the collector's journal stream, of events of version eventVersion.
const (
	Stream       = "imagegc"
	eventVersion = 1
)

// Events, version 1.
const (
	// EvPulled: this installation pulled the image (it was absent before).
	EvPulled = "image.pulled"
	// EvForgotten: the images are gone from Docker's store (collected, or
	// removed out of band); they are no longer this installation's.
	EvForgotten = "images.forgotten"
)

type pulledEvent struct {
	ID  string `json:"id"`
	Ref string `json:"ref"` // the repo@digest it was pulled by
}

type forgottenEvent struct {
	IDs []string `json:"ids"`
}

// Owned is an image this installation pulled: the references it pulled it by
// and when it last did.
type Owned struct {
	Refs     []string  `json:"refs"`
	PulledAt time.Time `json:"pulled_at"`
}

// State is the images of this installation, by ID.
type State struct {
	Images map[string]*Owned `json:"images"`
}

func newState() *State { return &State{Images: map[string]*Owned{}} }

// Apply folds one event into the state.
func (s *State) Apply(ev persistence.Event) error {
	switch ev.Type {
	case EvPulled:
		var e pulledEvent
		if err := supervisors.DecodeEvent(ev, eventVersion, &e, func() bool { return e.ID != "" && e.Ref != "" }); err != nil {
			return err
		}
		o := s.Images[e.ID]
		if o == nil {
			o = &Owned{}
			s.Images[e.ID] = o
		}
		o.PulledAt = ev.At
		if !slices.Contains(o.Refs, e.Ref) {
			o.Refs = append(o.Refs, e.Ref)
		}
	case EvForgotten:
		var e forgottenEvent
		if err := supervisors.DecodeEvent(ev, eventVersion, &e, func() bool { return len(e.IDs) > 0 }); err != nil {
			return err
		}
		for _, id := range e.IDs {
			if _, ok := s.Images[id]; !ok {
				return fmt.Errorf("event %s: image %s is not recorded", ev.Type, id)
			}
			delete(s.Images, id)
		}
	default:
		return supervisors.UnknownEvent(ev)
	}
	return nil
}

// Load rebuilds the installation's images from the stream.
func Load(store supervisors.JournalStore) (*State, uint64, error) {
	return supervisors.Rebuild(store, Stream, eventVersion, newState, func(st *State) {
		if st.Images == nil {
			st.Images = map[string]*Owned{}
		}
	})
}
