package persistence

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLoadState_SnapshotThenLaterEvents_VersionAndApplyErrorsRefuse(t *testing.T) {
	s := newStore(t)
	ev := func(n int) Event {
		data, _ := json.Marshal(map[string]int{"n": n})
		return Event{Type: "count.added", V: 1, At: time.Now(), Data: data}
	}
	res, err := s.Commit(Write{Appends: []Append{{Stream: "counter", Events: []Event{ev(1), ev(2)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot("counter", Snapshot{Seq: res.LastSeq["counter"], V: 1, At: time.Now(), Data: []byte(`{"sum":3}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "counter", Events: []Event{ev(4)}}}}); err != nil {
		t.Fatal(err)
	}
	type counter struct {
		Sum      int  `json:"sum"`
		Repaired bool `json:"-"`
	}
	apply := func(st *counter) func(Event) error {
		return func(e Event) error {
			var d struct{ N int }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return err
			}
			st.Sum += d.N
			return nil
		}
	}
	var st counter
	seq, err := s.LoadState("counter", 1, &st, func() { st.Repaired = true }, apply(&st))
	if err != nil || seq != 3 || st.Sum != 7 || !st.Repaired {
		t.Fatalf("LoadState = seq %d, %+v, %v; want seq 3, sum 3 (snapshot) + 4, repaired", seq, st, err)
	}
	if _, err := s.LoadState("counter", 2, &counter{}, nil, apply(&counter{})); err == nil || !strings.Contains(err.Error(), "snapshot version 1") {
		t.Fatalf("a snapshot of another version = %v, want refused", err)
	}
	bad := errors.New("does not apply")
	if _, err := s.LoadState("counter", 1, &counter{}, nil, func(Event) error { return bad }); !errors.Is(err, bad) || !strings.Contains(err.Error(), "load counter: seq 3") {
		t.Fatalf("an event that does not apply = %v, want refused naming stream and seq", err)
	}
}
