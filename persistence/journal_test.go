package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestCommitLoad_RoundTripAcrossReopen(t *testing.T) {
	s := newStore(t)
	at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	c1, err := s.Commit(Write{Appends: []Append{
		{Stream: "registry", Events: []Event{ev("LeaseAdmitted", map[string]string{"lease": "a"}), ev("LeaseAdmitted", map[string]string{"lease": "b"})}},
		{Stream: "lease/a", Events: []Event{{Type: "ProvisionStarted", V: 2, At: at, Data: json.RawMessage(`{"operation_id":"op-1"}`)}}},
	}})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if want := map[string]uint64{"registry": 2, "lease/a": 1}; !reflect.DeepEqual(c1.LastSeq, want) {
		t.Fatalf("LastSeq = %v, want %v", c1.LastSeq, want)
	}
	c2, err := s.Commit(Write{Appends: []Append{{Stream: "registry", Events: []Event{ev("LeaseAdmitted", map[string]string{"lease": "c"})}}}})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if c2.LastSeq["registry"] != 3 {
		t.Fatalf("registry LastSeq = %d, want 3", c2.LastSeq["registry"])
	}

	s = reopen(t, s)
	reg, err := s.Load("registry")
	if err != nil {
		t.Fatalf("Load registry: %v", err)
	}
	if reg.Snapshot != nil || reg.LastSeq != 3 || len(reg.Events) != 3 {
		t.Fatalf("registry = %+v, want 3 events, no snapshot", reg)
	}
	for i, r := range reg.Events {
		if r.Seq != uint64(i+1) || r.Type != "LeaseAdmitted" || r.V != 1 || r.At.IsZero() {
			t.Errorf("registry event %d = %+v", i, r)
		}
	}
	if got := string(reg.Events[2].Data); got != `{"lease":"c"}` {
		t.Errorf("registry event 3 data = %s", got)
	}
	lease, err := s.Load("lease/a")
	if err != nil {
		t.Fatalf("Load lease/a: %v", err)
	}
	if len(lease.Events) != 1 || !lease.Events[0].At.Equal(at) || lease.Events[0].V != 2 || string(lease.Events[0].Data) != `{"operation_id":"op-1"}` {
		t.Fatalf("lease/a = %+v", lease.Events)
	}
	empty, err := s.Load("lease/never")
	if err != nil || empty.LastSeq != 0 || len(empty.Events) != 0 || empty.Snapshot != nil {
		t.Fatalf("Load of unknown stream = %+v, %v", empty, err)
	}
	streams, err := s.Streams("")
	if err != nil || !reflect.DeepEqual(streams, []string{"lease/a", "registry"}) {
		t.Fatalf("Streams = %v, %v", streams, err)
	}
}

func TestCommit_InjectedFailureInsideTx_NothingLandsAcrossStreamsAndOutbox(t *testing.T) {
	s := newStore(t)
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "registry", Events: []Event{ev("Before", 1)}}}}); err != nil {
		t.Fatal(err)
	}
	s.setCommitHook(func(tx *bolt.Tx) error {
		// The writes of this Commit are in tx when the hook runs; prove it, then fail.
		if nested(tx, bucketJournal, "lease/x") == nil || nested(tx, bucketOutbox, "x") == nil {
			return errors.New("hook ran before the writes")
		}
		return errors.New("injected failure")
	})
	_, err := s.Commit(Write{
		Appends: []Append{
			{Stream: "registry", Events: []Event{ev("Admitted", 2)}},
			{Stream: "lease/x", Events: []Event{ev("Started", 1), ev("Ready", 2)}},
		},
		Outbox: []OutboxRow{{Lease: "x", DeliveryID: "d-1", URL: "http://cb", Kind: "operation", Body: json.RawMessage(`{}`)}},
	})
	if !errors.Is(err, ErrLatched) || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Commit error = %v, want latched with the injected cause", err)
	}
	s.setCommitHook(nil)

	// Nothing of the failed commit is visible, now or after a reopen.
	for round := 0; round < 2; round++ {
		st := s
		if round == 1 {
			st = reopen(t, s)
		}
		reg, err := st.Load("registry")
		if err != nil {
			t.Fatal(err)
		}
		if len(reg.Events) != 1 || reg.Events[0].Type != "Before" || reg.LastSeq != 1 {
			t.Fatalf("round %d: registry = %+v, want only the earlier event", round, reg)
		}
		x, err := st.Load("lease/x")
		if err != nil || len(x.Events) != 0 || x.LastSeq != 0 {
			t.Fatalf("round %d: lease/x = %+v, %v; want nothing", round, x, err)
		}
		rows, err := st.OutboxAll()
		if err != nil || len(rows) != 0 {
			t.Fatalf("round %d: outbox = %+v, %v; want empty", round, rows, err)
		}
		streams, _ := st.Streams("")
		if !reflect.DeepEqual(streams, []string{"registry"}) {
			t.Fatalf("round %d: streams = %v", round, streams)
		}
	}
}

func TestSaveSnapshot_CompactsJournalAndLoadReturnsOnlyLaterEvents(t *testing.T) {
	s := newStore(t)
	for i := 1; i <= 10; i++ {
		if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("Step", i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	snap := Snapshot{Seq: 7, V: 3, Data: json.RawMessage(`{"state":"ready","steps":7}`)}
	if err := s.SaveSnapshot("lease/a", snap); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	// Compaction happened in the same transaction: keys ≤ 7 are gone.
	err := s.db.View(func(tx *bolt.Tx) error {
		var keys []uint64
		c := nested(tx, bucketJournal, "lease/a").Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n, _ := keyU64(k)
			keys = append(keys, n)
		}
		if !reflect.DeepEqual(keys, []uint64{8, 9, 10}) {
			return fmt.Errorf("journal keys after snapshot = %v, want [8 9 10]", keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		if round == 1 {
			s = reopen(t, s)
		}
		l, err := s.Load("lease/a")
		if err != nil {
			t.Fatal(err)
		}
		if l.Snapshot == nil || l.Snapshot.Seq != 7 || l.Snapshot.V != 3 || string(l.Snapshot.Data) != `{"state":"ready","steps":7}` || l.Snapshot.At.IsZero() {
			t.Fatalf("snapshot = %+v", l.Snapshot)
		}
		if l.LastSeq != 10 || len(l.Events) != 3 {
			t.Fatalf("Load = %d events, LastSeq %d; want 3, 10", len(l.Events), l.LastSeq)
		}
		for i, r := range l.Events {
			if r.Seq != uint64(8+i) || string(r.Data) != fmt.Sprint(8+i) {
				t.Errorf("event %d = seq %d data %s", i, r.Seq, r.Data)
			}
		}
	}
	// Appends continue the sequence; a snapshot covering everything leaves no events.
	c, err := s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("Step", 11)}}}})
	if err != nil || c.LastSeq["lease/a"] != 11 {
		t.Fatalf("append after snapshot: %v, %v", c.LastSeq, err)
	}
	if err := s.SaveSnapshot("lease/a", Snapshot{Seq: 11, V: 3, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load("lease/a")
	if err != nil || len(l.Events) != 0 || l.LastSeq != 11 || l.Snapshot.Seq != 11 {
		t.Fatalf("Load after full snapshot = %+v, %v", l, err)
	}
	c, err = s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("Step", 12)}}}})
	if err != nil || c.LastSeq["lease/a"] != 12 {
		t.Fatalf("append after full compaction: %v, %v", c.LastSeq, err)
	}
}

func TestSaveSnapshot_BeyondJournalOrOlderThanStored_RefusedWithoutLatch(t *testing.T) {
	s := newStore(t)
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "r", Events: []Event{ev("A", 1), ev("B", 2), ev("C", 3)}}}}); err != nil {
		t.Fatal(err)
	}
	err := s.SaveSnapshot("r", Snapshot{Seq: 4, Data: json.RawMessage(`{}`)})
	if !IsInputError(err) || !strings.Contains(err.Error(), "beyond its last seq 3") {
		t.Fatalf("snapshot beyond journal: %v", err)
	}
	if err := s.SaveSnapshot("r", Snapshot{Seq: 2, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	err = s.SaveSnapshot("r", Snapshot{Seq: 1, Data: json.RawMessage(`{}`)})
	if !IsInputError(err) || !strings.Contains(err.Error(), "older than the stored one at 2") {
		t.Fatalf("older snapshot: %v", err)
	}
	if s.Err() != nil {
		t.Fatalf("input errors latched the store: %v", s.Err())
	}
	l, err := s.Load("r")
	if err != nil || l.Snapshot.Seq != 2 || len(l.Events) != 1 || l.Events[0].Seq != 3 {
		t.Fatalf("Load = %+v, %v", l, err)
	}
}

func TestCommit_BadInput_RefusedNothingWrittenNoLatch(t *testing.T) {
	s := newStore(t)
	good := Append{Stream: "ok", Events: []Event{ev("A", 1)}}
	cases := map[string]Write{
		"empty stream name":  {Appends: []Append{good, {Stream: "", Events: []Event{ev("A", 1)}}}},
		"name over 200":      {Appends: []Append{good, {Stream: strings.Repeat("x", 201), Events: []Event{ev("A", 1)}}}},
		"NUL in name":        {Appends: []Append{good, {Stream: "a\x00b", Events: []Event{ev("A", 1)}}}},
		"no events":          {Appends: []Append{good, {Stream: "b"}}},
		"event without type": {Appends: []Append{good, {Stream: "b", Events: []Event{{Data: json.RawMessage(`1`)}}}}},
		"invalid data JSON":  {Appends: []Append{good, {Stream: "b", Events: []Event{{Type: "T", Data: json.RawMessage(`{nope`)}}}}},
		"outbox no lease":    {Appends: []Append{good}, Outbox: []OutboxRow{{DeliveryID: "d"}}},
		"outbox no delivery": {Appends: []Append{good}, Outbox: []OutboxRow{{Lease: "l"}}},
		"delete bad lease":   {Appends: []Append{good}, DeleteOutbox: []OutboxKey{{Lease: "", Seq: 1}}},
	}
	for name, w := range cases {
		if _, err := s.Commit(w); !IsInputError(err) {
			t.Errorf("%s: err = %v, want input error", name, err)
		}
	}
	if s.Err() != nil {
		t.Fatalf("bad input latched the store: %v", s.Err())
	}
	streams, err := s.Streams("")
	if err != nil || len(streams) != 0 {
		t.Fatalf("bad input wrote streams %v (%v)", streams, err)
	}
	if _, err := s.Commit(Write{Appends: []Append{{Stream: strings.Repeat("x", 200), Events: []Event{ev("A", 1)}}}}); err != nil {
		t.Fatalf("200-byte stream name refused: %v", err)
	}
}

func TestStreams_PrefixAndDeleteStream(t *testing.T) {
	s := newStore(t)
	for _, st := range []string{"lease/b", "lease/a", "registry", "retention"} {
		if _, err := s.Commit(Write{Appends: []Append{{Stream: st, Events: []Event{ev("E", st)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSnapshot("lease/a", Snapshot{Seq: 1, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Streams("lease/")
	if err != nil || !reflect.DeepEqual(got, []string{"lease/a", "lease/b"}) {
		t.Fatalf("Streams(lease/) = %v, %v", got, err)
	}
	if err := s.DeleteStream("lease/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteStream("lease/none"); err != nil {
		t.Fatalf("DeleteStream of a missing stream: %v", err)
	}
	got, _ = s.Streams("")
	if !reflect.DeepEqual(got, []string{"lease/b", "registry", "retention"}) {
		t.Fatalf("Streams after delete = %v", got)
	}
	l, err := s.Load("lease/a")
	if err != nil || l.Snapshot != nil || l.LastSeq != 0 {
		t.Fatalf("deleted stream loads as %+v, %v", l, err)
	}
	c, err := s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("E", 1)}}}})
	if err != nil || c.LastSeq["lease/a"] != 1 {
		t.Fatalf("re-created stream seq = %v, %v; want 1", c.LastSeq, err)
	}
}

func TestLoad_UndecodableEnvelope_ErrCorruptNamingStreamAndSeq(t *testing.T) {
	s := newStore(t)
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/z", Events: []Event{ev("A", 1), ev("B", 2)}}}}); err != nil {
		t.Fatal(err)
	}
	// Damage one envelope behind the store's back.
	err := s.db.Update(func(tx *bolt.Tx) error {
		return nested(tx, bucketJournal, "lease/z").Put(u64key(2), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Load("lease/z")
	assertRefusal(t, err, ErrCorrupt, `stream "lease/z" seq 2 does not decode`)
}

// RetireStream deletes a stream only while it still ends at the sequence the
// caller judged it at (snapshot and journal alike) — one written since is kept
// whole — and records its name: Retired stays true once its history is gone.
func TestRetireStream_OnlyWhileTheStreamEndsThere_TheNameStaysRetired(t *testing.T) {
	s := newStore(t)
	for range 2 {
		if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("E", "lease/a")}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSnapshot("lease/a", Snapshot{Seq: 2, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("E", "lease/a")}}}}); err != nil {
		t.Fatal(err)
	}
	if retired, err := s.RetireStream("lease/a", 2); err != nil || retired {
		t.Fatalf("judged at 2, written at 3 since: retired %v, %v", retired, err)
	}
	if got, err := s.Load("lease/a"); err != nil || got.LastSeq != 3 || got.Snapshot == nil || len(got.Events) != 1 {
		t.Fatalf("the kept stream: %+v %v", got, err)
	}
	if r, err := s.Retired("lease/a"); err != nil || r {
		t.Fatalf("retired before it was: %v %v", r, err)
	}
	if retired, err := s.RetireStream("lease/a", 3); err != nil || !retired {
		t.Fatalf("judged at 3: retired %v, %v", retired, err)
	}
	if got, _ := s.Streams("lease/"); len(got) != 0 {
		t.Fatalf("streams after the retirement: %v", got)
	}
	if r, err := s.Retired("lease/a"); err != nil || !r {
		t.Fatalf("the retired name: %v %v", r, err)
	}
	if r, _ := s.Retired("lease/b"); r {
		t.Fatal("a name never used is retired")
	}
}
