package persistence

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func latchedClosed(s *Store) bool {
	select {
	case <-s.Latched():
		return true
	default:
		return false
	}
}

func TestLatch_CommitFailure_LaterWritesRefusedWithFirstCauseReadsWork(t *testing.T) {
	s := newStore(t)
	c, err := s.Commit(Write{
		Appends: []Append{{Stream: "lease/a", Events: []Event{ev("A", 1)}}},
		Outbox:  []OutboxRow{row("lease-a", "d1", s.opts.Now())},
	})
	if err != nil {
		t.Fatal(err)
	}
	if latchedClosed(s) || s.Err() != nil {
		t.Fatal("latched before any failure")
	}

	s.setCommitHook(func(*bolt.Tx) error { return errors.New("disk on fire") })
	_, err = s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("B", 2)}}}})
	if !errors.Is(err, ErrLatched) || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("failing commit returned %v", err)
	}
	s.setCommitHook(nil) // the disk "recovers": the latch must still hold

	if !latchedClosed(s) {
		t.Fatal("Latched() not closed")
	}
	if s.Err() == nil || !strings.Contains(s.Err().Error(), "disk on fire") {
		t.Fatalf("Err() = %v", s.Err())
	}
	writes := map[string]error{}
	_, writes["Commit"] = s.Commit(Write{Appends: []Append{{Stream: "lease/a", Events: []Event{ev("C", 3)}}}})
	writes["SaveSnapshot"] = s.SaveSnapshot("lease/a", Snapshot{Seq: 1, Data: json.RawMessage(`{}`)})
	writes["DeleteOutbox"] = s.DeleteOutbox(c.OutboxKeys[0])
	writes["DeleteStream"] = s.DeleteStream("lease/a")
	for op, err := range writes {
		if !errors.Is(err, ErrLatched) || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("%s after latch: %v, want ErrLatched naming the first cause", op, err)
		}
	}
	if err := s.Check(); !errors.Is(err, ErrLatched) {
		t.Errorf("Check after latch = %v", err)
	}

	// Reads still work and show exactly the state before the failure.
	l, err := s.Load("lease/a")
	if err != nil || len(l.Events) != 1 || l.Snapshot != nil {
		t.Fatalf("Load after latch = %+v, %v", l, err)
	}
	rows, err := s.OutboxAll()
	if err != nil || len(rows) != 1 {
		t.Fatalf("OutboxAll after latch = %v, %v", rows, err)
	}
	if _, err := s.Streams(""); err != nil {
		t.Fatal(err)
	}
}

func TestLatch_ExplicitLatch_FirstCauseWinsAndWritesStop(t *testing.T) {
	s := newStore(t)
	s.Latch(errors.New("identity drift: first"))
	s.Latch(errors.New("second"))
	if got := s.Err().Error(); got != "identity drift: first" {
		t.Fatalf("Err() = %q", got)
	}
	_, err := s.Commit(Write{Appends: []Append{{Stream: "x", Events: []Event{ev("A", 1)}}}})
	if !errors.Is(err, ErrLatched) || !strings.Contains(err.Error(), "identity drift: first") || strings.Contains(err.Error(), "second") {
		t.Fatalf("Commit = %v", err)
	}
}

func TestLatch_RaisedAfterPrecheck_WriteRefusedInsideTx(t *testing.T) {
	s := newStore(t)
	// Latch between the cheap pre-check and the transaction, as a concurrent drift
	// check could: the check under the writer lock must still refuse the write.
	cause := errors.New("latched mid-flight")
	s.setPreBatchHook(func() { s.Latch(cause) })
	_, err := s.Commit(Write{Appends: []Append{{Stream: "x", Events: []Event{ev("A", 1)}}}})
	s.setPreBatchHook(nil)
	if !errors.Is(err, ErrLatched) || !errors.Is(err, cause) {
		t.Fatalf("commit = %v, want ErrLatched wrapping the cause", err)
	}
	l, err := s.Load("x")
	if err != nil || l.LastSeq != 0 {
		t.Fatalf("refused write landed: %+v, %v", l, err)
	}
}

func TestCheck_MarkerDrift_Latches(t *testing.T) {
	s := newStore(t)
	if err := s.Check(); err != nil {
		t.Fatalf("Check on a healthy store: %v", err)
	}
	marker := filepath.Join(filepath.Dir(s.Path()), markerFileName)
	other := newIdentity(s.opts.Now())
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := publishMarker(marker, other, renameNoReplace); err != nil {
		t.Fatal(err)
	}
	err := s.Check()
	assertRefusal(t, err, ErrForeign, "storage identity drift", other.StorageID, s.Identity().StorageID)
	if !latchedClosed(s) || !errors.Is(s.Err(), ErrForeign) {
		t.Fatalf("drift did not latch: %v", s.Err())
	}
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "x", Events: []Event{ev("A", 1)}}}}); !errors.Is(err, ErrLatched) {
		t.Fatalf("commit after drift = %v", err)
	}
}

func TestCheck_MarkerRemoved_Latches(t *testing.T) {
	s := newStore(t)
	if err := os.Remove(filepath.Join(filepath.Dir(s.Path()), markerFileName)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "storage identity drift") {
		t.Fatalf("Check with marker gone = %v", err)
	}
	if !latchedClosed(s) {
		t.Fatal("not latched")
	}
}

// Attest is what every protected request passes: the same proof as Check,
// without the size ceiling, and drift stays refused once seen even when the
// marker comes back.
func TestAttest_MarkerRemovedThenRestored_RefusedForGood(t *testing.T) {
	s := newStore(t)
	if err := s.Attest(); err != nil {
		t.Fatalf("Attest on a healthy store: %v", err)
	}
	marker := filepath.Join(filepath.Dir(s.Path()), markerFileName)
	saved, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := s.Attest(); err == nil || !strings.Contains(err.Error(), "storage identity drift") || !latchedClosed(s) {
		t.Fatalf("Attest with the marker gone = %v (latched %v)", err, latchedClosed(s))
	}
	if err := os.WriteFile(marker, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Attest(); err == nil {
		t.Fatal("Attest passed again once the marker was put back: drift must stay refused")
	}
}

func TestClose_WritesAfterCloseFailWithoutLatch(t *testing.T) {
	s := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit(Write{Appends: []Append{{Stream: "x", Events: []Event{ev("A", 1)}}}})
	if err == nil || errors.Is(err, ErrLatched) {
		t.Fatalf("commit after close = %v", err)
	}
	if s.Err() != nil {
		t.Fatalf("close latched: %v", s.Err())
	}
}
