package supervisors

import "github.com/berth-dev/berth/persistence"

// Decided is what the kit runs of a pure decider's answer to one input
// (the lease, the registry, the refresh run, the domain gate each decide as
// Decide(state, input, env) → Decision): the events to journal in one commit,
// then the effects to run in order — or, when the commit fails, the Failed
// ones instead (nothing by default: the store has latched).
type Decided[E any] struct {
	Events  []persistence.Event
	Effects []E
	Failed  []E
}

// Execute is the one decide → commit → effects loop: commit journals the
// events (it is not called when there are none), then each effect is run. It
// returns the commit's error.
func Execute[E any](d Decided[E], commit func([]persistence.Event) error, run func(E)) error {
	fx := d.Effects
	var err error
	if len(d.Events) > 0 {
		if err = commit(d.Events); err != nil {
			fx = d.Failed
		}
	}
	for _, e := range fx {
		run(e)
	}
	return err
}
