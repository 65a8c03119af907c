package supervisors

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/persistence"
)

// JournalStore is what a journaled actor needs of the store: *persistence.Store,
// or in tests FaultyStore, its twin that fails on demand.
type JournalStore interface {
	Commit(persistence.Write) (persistence.Committed, error)
	SaveSnapshot(stream string, snap persistence.Snapshot) error
	Load(stream string) (persistence.Loaded, error)
}

// Folder is a journaled actor's state: its events fold into it, live and on
// replay alike.
type Folder interface {
	Apply(persistence.Event) error
}

// Replay rebuilds st from its stream: the latest snapshot (written at version
// v) decoded into st, then repair (when set) for what JSON leaves unset, then
// every later event in order. It returns the stream's last sequence number. An
// unknown snapshot version or an event that does not apply refuses the whole
// load, naming the stream: berthd never guesses at a journal it cannot read.
func Replay(store JournalStore, stream string, v int, st Folder, repair func()) (uint64, error) {
	l, err := store.Load(stream)
	if err != nil {
		return 0, fmt.Errorf("load %s: %w", stream, err)
	}
	if l.Snapshot != nil {
		if l.Snapshot.V != v {
			return 0, fmt.Errorf("load %s: snapshot version %d not supported (this berthd reads %d)", stream, l.Snapshot.V, v)
		}
		if err := persistence.DecodeValid(l.Snapshot.Data, st); err != nil {
			return 0, fmt.Errorf("load %s: snapshot: %w", stream, err)
		}
	}
	if repair != nil {
		repair()
	}
	for _, r := range l.Events {
		if err := st.Apply(r.Event); err != nil {
			return 0, fmt.Errorf("load %s: seq %d: %w", stream, r.Seq, err)
		}
	}
	return l.LastSeq, nil
}

// Journal is a journaled actor's one way to change its state: events (and the
// callback rows they produce) are committed in one transaction, then applied,
// and every Every events the state is snapshotted and the journal compacted.
// A failed commit applies nothing — the store has latched, and the actor shows
// its documented reaction (refuse, answer "unavailable", wait for the drain).
type Journal[S Folder] struct {
	Store   JournalStore
	Stream  string
	Version int // of the stream's events and snapshots
	Every   int // events between snapshots (0: 256)
	Now     func() time.Time
	Log     zerolog.Logger
	// Fold applies one committed event (nil: State.Apply); a replay always
	// uses State.Apply, so Fold may count what only live changes should.
	Fold  func(st S, ev persistence.Event) error
	State S

	seq   uint64 // the stream's last sequence number
	since int    // events since the last snapshot
}

// Resume takes over a state already replayed up to seq.
func (j *Journal[S]) Resume(st S, seq uint64) {
	j.State, j.seq, j.since = st, seq, 0
}

// Load replays the stream into st (see Replay) and takes it over.
func (j *Journal[S]) Load(st S, repair func()) error {
	seq, err := Replay(j.Store, j.Stream, j.Version, st, repair)
	if err != nil {
		return err
	}
	j.Resume(st, seq)
	return nil
}

// Seq is the stream's last sequence number.
func (j *Journal[S]) Seq() uint64 { return j.seq }

// Event builds one of the stream's events, its payload as JSON.
func (j *Journal[S]) Event(typ string, payload any) persistence.Event {
	return NewEvent(typ, j.Version, j.Now(), payload)
}

// NewEvent builds a journal event of version v with payload as JSON.
func NewEvent(typ string, v int, at time.Time, payload any) persistence.Event {
	data, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("event %s: payload does not encode: %v", typ, err)) // our own types: a bug
	}
	return persistence.Event{Type: typ, V: v, At: at, Data: data}
}

// Commit journals events with rows in one transaction, then applies them and
// snapshots when due.
func (j *Journal[S]) Commit(events []persistence.Event, rows ...persistence.OutboxRow) error {
	if len(events) == 0 {
		return nil
	}
	res, err := j.Store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: j.Stream, Events: events}}, Outbox: rows})
	if err != nil {
		j.Log.Error().Err(err).Str("stream", j.Stream).Msg("journal write failed")
		return err
	}
	j.seq = res.LastSeq[j.Stream]
	j.since += len(events)
	fold := j.Fold
	if fold == nil {
		fold = S.Apply
	}
	for _, ev := range events {
		if err := fold(j.State, ev); err != nil {
			// The actor chose the event for this state: reaching this is a bug in berth.
			j.Log.Error().Err(err).Str("stream", j.Stream).Str("event", ev.Type).Msg("journaled event does not apply")
		}
	}
	every := j.Every
	if every <= 0 {
		every = 256
	}
	if j.since >= every {
		j.snapshot()
	}
	return nil
}

// snapshot saves the state at the current sequence, compacting the journal up
// to it. A failed snapshot costs only replay time: the events are still there.
func (j *Journal[S]) snapshot() {
	data, err := json.Marshal(j.State)
	if err == nil {
		err = j.Store.SaveSnapshot(j.Stream, persistence.Snapshot{Seq: j.seq, V: j.Version, At: j.Now(), Data: data})
	}
	if err != nil {
		j.Log.Warn().Err(err).Str("stream", j.Stream).Msg("snapshot")
		return
	}
	j.since = 0
}
