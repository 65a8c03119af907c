package persistence

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// The reads the debug API makes: one lease's queued rows, a lease's newest captures.

func TestOutboxOf_OneLeasesRowsOldestFirst(t *testing.T) {
	s := newStore(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range []OutboxRow{row("lease-a", "a1", t0), row("lease-b", "b1", t0), row("lease-a", "a2", t0.Add(time.Second))} {
		if _, err := s.Commit(Write{Outbox: []OutboxRow{r}}); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	got, err := s.OutboxOf("lease-a")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, fmt.Sprintf("%s@%d", e.Row.DeliveryID, e.Key.Seq))
	}
	if !reflect.DeepEqual(ids, []string{"a1@1", "a2@3"}) {
		t.Fatalf("OutboxOf(lease-a) = %v", ids)
	}
	if got, err := s.OutboxOf("lease-none"); err != nil || len(got) != 0 {
		t.Fatalf("a lease without rows: %v, %v", got, err)
	}
	if _, err := s.OutboxOf(""); err == nil {
		t.Fatal("an empty lease name was accepted")
	}
}

func TestDiagnosticsRecent_NewestFirstBounded(t *testing.T) {
	d, err := OpenDiagnostics(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	t0 := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		if err := d.Put("a", t0.Add(time.Duration(i)*time.Minute), json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Put("b", t0, json.RawMessage(`{"n":"b"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := d.Recent("a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Recent(a, 3) = %d entries", len(got))
	}
	for i, e := range got {
		n := 4 - i
		if string(e.Blob) != fmt.Sprintf(`{"n":%d}`, n) || !e.At.Equal(t0.Add(time.Duration(n)*time.Minute)) {
			t.Errorf("entry %d = %s at %s, want n %d", i, e.Blob, e.At, n)
		}
	}
	if got, err := d.Recent("none", 3); err != nil || len(got) != 0 {
		t.Fatalf("Recent(none) = %v, %v", got, err)
	}
}
