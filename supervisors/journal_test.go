package supervisors

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/persistence"
)

// tally is a journaled state: a sum of added numbers.
type tally struct {
	Sum   int `json:"sum"`
	Count int `json:"count"`
}

func (s *tally) Apply(ev persistence.Event) error {
	if ev.Type != "added" {
		return fmt.Errorf("unknown event %q", ev.Type)
	}
	var n int
	if err := json.Unmarshal(ev.Data, &n); err != nil {
		return err
	}
	s.Sum += n
	s.Count++
	return nil
}

func openFaulty(t *testing.T) *FaultyStore {
	t.Helper()
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &FaultyStore{Store: store}
}

func newTallyJournal(store JournalStore) *Journal[*tally] {
	return &Journal[*tally]{Store: store, Stream: "tally", Version: 1, Every: 3, Now: time.Now, Log: zerolog.Nop()}
}

func TestJournal_CommitAppliesAndSnapshots_ReplayRebuildsTheSame(t *testing.T) {
	store := openFaulty(t)
	j := newTallyJournal(store)
	if err := j.Load(&tally{}, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 7; i++ {
		if err := j.Commit([]persistence.Event{j.Event("added", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if j.State.Sum != 28 || j.Seq() != 7 {
		t.Fatalf("live state %+v at seq %d", j.State, j.Seq())
	}
	l, err := store.Load("tally")
	if err != nil || l.Snapshot == nil || l.Snapshot.Seq != 6 || len(l.Events) != 1 {
		t.Fatalf("snapshot every 3 events: loaded %+v, %v", l, err)
	}
	again := newTallyJournal(store)
	if err := again.Load(&tally{}, nil); err != nil || *again.State != *j.State || again.Seq() != 7 {
		t.Fatalf("replay %+v seq %d (%v), want %+v seq 7", again.State, again.Seq(), err, j.State)
	}
}

func TestJournal_FailedCommit_AppliesNothing_WritesNothing(t *testing.T) {
	store := openFaulty(t)
	j := newTallyJournal(store)
	if err := j.Load(&tally{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit([]persistence.Event{j.Event("added", 5)}); err != nil {
		t.Fatal(err)
	}
	store.FailCommits(func(w persistence.Write) bool { return Streams(w)[0] == "tally" }, nil)
	row := persistence.OutboxRow{Lease: "l", DeliveryID: "d", URL: "http://x", Body: []byte("{}"), Kind: "lifecycle"}
	if err := j.Commit([]persistence.Event{j.Event("added", 100)}, row); !errors.Is(err, ErrInjected) {
		t.Fatalf("commit = %v, want the injected failure", err)
	}
	if j.State.Sum != 5 || j.Seq() != 1 || store.Failed() != 1 {
		t.Fatalf("after a failed commit: state %+v seq %d failed %d", j.State, j.Seq(), store.Failed())
	}
	if rows, _ := store.OutboxOf("l"); len(rows) != 0 {
		t.Fatalf("a failed commit wrote its outbox row: %+v", rows)
	}
	store.Heal()
	if err := j.Commit([]persistence.Event{j.Event("added", 1)}); err != nil || j.State.Sum != 6 {
		t.Fatalf("after heal: %v, state %+v", err, j.State)
	}
}

func TestReplay_RefusesWhatItCannotRead(t *testing.T) {
	store := openFaulty(t)
	if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: "tally",
		Events: []persistence.Event{{Type: "subtracted", V: 1, Data: json.RawMessage("1")}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(store, "tally", 1, &tally{}, nil); err == nil {
		t.Fatal("an event the state does not know was replayed")
	}
}
