package supervisors

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/persistence"
)

// summer sums the n of its events; refuse, when set, is what Apply returns.
type summer struct {
	Sum      int   `json:"sum"`
	Repaired bool  `json:"-"`
	refuse   error // test only
}

func (c *summer) Apply(e persistence.Event) error {
	if c.refuse != nil {
		return c.refuse
	}
	var d struct{ N int }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return err
	}
	c.Sum += d.N
	return nil
}

func TestReplay_SnapshotThenLaterEvents_VersionAndApplyErrorsRefuse(t *testing.T) {
	s := openFaulty(t)
	ev := func(n int) persistence.Event {
		data, _ := json.Marshal(map[string]int{"n": n})
		return persistence.Event{Type: "count.added", V: 1, At: time.Now(), Data: data}
	}
	res, err := s.Commit(persistence.Write{Appends: []persistence.Append{{Stream: "counter", Events: []persistence.Event{ev(1), ev(2)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot("counter", persistence.Snapshot{Seq: res.LastSeq["counter"], V: 1, At: time.Now(), Data: []byte(`{"sum":3}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(persistence.Write{Appends: []persistence.Append{{Stream: "counter", Events: []persistence.Event{ev(4)}}}}); err != nil {
		t.Fatal(err)
	}
	var st summer
	seq, err := Replay(s, "counter", 1, &st, func() { st.Repaired = true })
	if err != nil || seq != 3 || st.Sum != 7 || !st.Repaired {
		t.Fatalf("Replay = seq %d, %+v, %v; want seq 3, sum 3 (snapshot) + 4, repaired", seq, st, err)
	}
	if _, err := Replay(s, "counter", 2, &summer{}, nil); err == nil || !strings.Contains(err.Error(), "snapshot version 1") {
		t.Fatalf("a snapshot of another version = %v, want refused", err)
	}
	bad := errors.New("does not apply")
	if _, err := Replay(s, "counter", 1, &summer{refuse: bad}, nil); !errors.Is(err, bad) || !strings.Contains(err.Error(), "load counter: seq 3") {
		t.Fatalf("an event that does not apply = %v, want refused naming stream and seq", err)
	}
}
