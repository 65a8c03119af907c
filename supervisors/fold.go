package supervisors

import (
	"encoding/json"
	"fmt"

	"github.com/berth-dev/berth/persistence"
)

// DecodeEvent is how a journaled state's Apply reads an event: of version v
// only, its payload decoded into payload and then vouched for by valid (when
// set). An event it cannot read is refused, naming it.
func DecodeEvent(ev persistence.Event, v int, payload any, valid func() bool) error {
	if ev.V != v {
		return fmt.Errorf("event %s: version %d not supported (this berthd reads %d)", ev.Type, ev.V, v)
	}
	if err := json.Unmarshal(ev.Data, payload); err != nil || (valid != nil && !valid()) {
		return fmt.Errorf("event %s: malformed", ev.Type)
	}
	return nil
}

// UnknownEvent refuses an event type this berthd does not know.
func UnknownEvent(ev persistence.Event) error {
	return fmt.Errorf("event type %q unknown to this berthd", ev.Type)
}

// Rebuild replays stream into the state fresh makes (see Replay; repair, when
// set, mends what the snapshot's JSON left unset). On error the state is nil.
func Rebuild[S Folder](store JournalStore, stream string, v int, fresh func() S, repair func(S)) (S, uint64, error) {
	st := fresh()
	seq, err := Replay(store, stream, v, st, func() {
		if repair != nil {
			repair(st)
		}
	})
	if err != nil {
		var none S
		return none, 0, err
	}
	return st, seq, nil
}
