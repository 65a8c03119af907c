package persistence

import (
	"testing"
	"time"
)

func TestCursor_AdvancesSeqAndSnapshotsWhenDue(t *testing.T) {
	s, _, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &Cursor{Stream: "lease/x", Every: 3}
	commit := func(n int) bool {
		evs := make([]Event, n)
		for i := range evs {
			evs[i] = Event{Type: "t", V: 1, At: time.Now(), Data: []byte(`{}`)}
		}
		res, err := s.Commit(Write{Appends: []Append{{Stream: c.Stream, Events: evs}}})
		if err != nil {
			t.Fatal(err)
		}
		return c.Advance(res, n)
	}
	if commit(2) || c.Seq != 2 {
		t.Fatalf("due after 2 of 3 events, seq %d", c.Seq)
	}
	if !commit(1) || c.Seq != 3 {
		t.Fatalf("not due after 3 events, seq %d", c.Seq)
	}
	if err := c.Snapshot(s, 1, time.Now(), map[string]int{"n": 3}); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(c.Stream)
	if err != nil || l.Snapshot == nil || l.Snapshot.Seq != 3 || len(l.Events) != 0 {
		t.Fatalf("after snapshot: %+v %v", l, err)
	}
	if commit(1) || c.Seq != 4 {
		t.Fatalf("snapshot did not restart the count (seq %d)", c.Seq)
	}
}
