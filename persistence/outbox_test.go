package persistence

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func row(lease, delivery string, created time.Time) OutboxRow {
	return OutboxRow{Lease: lease, DeliveryID: delivery, URL: "https://fred.example/cb?operation_id=" + delivery,
		Body: json.RawMessage(fmt.Sprintf(`{"lease_uuid":%q,"status":"success"}`, lease)), Kind: "operation", CreatedAt: created}
}

// outboxHead is a lease's oldest row, the one the outbox delivers next.
func outboxHead(s *Store, lease string) (*OutboxEntry, bool, error) {
	rows, err := s.OutboxOf(lease)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return &rows[0], true, nil
}

func TestOutbox_FIFOPerLeaseGlobalOrderAndExactDelete(t *testing.T) {
	s := newStore(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// Interleave two leases across commits; one commit carries rows for both plus a journal event.
	c1, err := s.Commit(Write{Outbox: []OutboxRow{row("lease-b", "b1", t0.Add(1*time.Second))}})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.Commit(Write{
		Appends: []Append{{Stream: "lease/a", Events: []Event{ev("Ready", 1)}}},
		Outbox:  []OutboxRow{row("lease-a", "a1", t0.Add(2*time.Second)), row("lease-b", "b2", t0.Add(3*time.Second))},
	})
	if err != nil {
		t.Fatal(err)
	}
	c3, err := s.Commit(Write{Outbox: []OutboxRow{row("lease-a", "a2", t0.Add(4*time.Second))}})
	if err != nil {
		t.Fatal(err)
	}
	keys := append(append(append([]OutboxKey{}, c1.OutboxKeys...), c2.OutboxKeys...), c3.OutboxKeys...)
	wantKeys := []OutboxKey{{"lease-b", 1}, {"lease-a", 2}, {"lease-b", 3}, {"lease-a", 4}}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("assigned keys = %v, want %v", keys, wantKeys)
	}

	s = reopen(t, s)
	all, err := s.OutboxAll()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range all {
		order = append(order, e.Row.DeliveryID)
		if e.Row.Lease != e.Key.Lease {
			t.Errorf("row %v carries lease %q", e.Key, e.Row.Lease)
		}
	}
	if !reflect.DeepEqual(order, []string{"b1", "a1", "b2", "a2"}) {
		t.Fatalf("global order = %v", order)
	}
	if all[1].Row.URL != "https://fred.example/cb?operation_id=a1" || string(all[1].Row.Body) != `{"lease_uuid":"lease-a","status":"success"}` || !all[1].Row.CreatedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("row a1 round-tripped as %+v", all[1].Row)
	}
	leases, err := s.OutboxLeases()
	if err != nil || !reflect.DeepEqual(leases, []string{"lease-a", "lease-b"}) {
		t.Fatalf("OutboxLeases = %v, %v", leases, err)
	}
	head, ok, err := outboxHead(s, "lease-b")
	if err != nil || !ok || head.Row.DeliveryID != "b1" || head.Key != (OutboxKey{"lease-b", 1}) {
		t.Fatalf("head(lease-b) = %+v, %v, %v", head, ok, err)
	}
	pending, oldest, err := s.OutboxStats()
	if err != nil || pending != 4 || !oldest.Equal(t0.Add(time.Second)) {
		t.Fatalf("stats = %d, %v, %v", pending, oldest, err)
	}

	// Delete exactly the head of lease-b: its next row becomes head, nothing else moves.
	if err := s.DeleteOutbox(OutboxKey{"lease-b", 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteOutbox(OutboxKey{"lease-b", 1}); err != nil {
		t.Fatalf("second delete of the same row: %v", err)
	}
	if err := s.DeleteOutbox(OutboxKey{"lease-zzz", 9}); err != nil {
		t.Fatalf("delete in unknown lease: %v", err)
	}
	head, ok, _ = outboxHead(s, "lease-b")
	if !ok || head.Row.DeliveryID != "b2" {
		t.Fatalf("head(lease-b) after delete = %+v", head)
	}
	all, _ = s.OutboxAll()
	if len(all) != 3 {
		t.Fatalf("%d rows after one delete, want 3", len(all))
	}
	pending, oldest, _ = s.OutboxStats()
	if pending != 3 || !oldest.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("stats after delete = %d, %v", pending, oldest)
	}

	// Deleting a row in the same Commit as a new event and a new row (the delivery
	// pattern of a lifecycle follow-up); a lease with no rows left disappears.
	c4, err := s.Commit(Write{
		Appends:      []Append{{Stream: "lease/b", Events: []Event{ev("Closed", 1)}}},
		Outbox:       []OutboxRow{row("lease-c", "c1", t0.Add(5*time.Second))},
		DeleteOutbox: []OutboxKey{{"lease-b", 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c4.OutboxKeys, []OutboxKey{{"lease-c", 5}}) {
		t.Fatalf("keys = %v: the global sequence must keep counting", c4.OutboxKeys)
	}
	leases, _ = s.OutboxLeases()
	if !reflect.DeepEqual(leases, []string{"lease-a", "lease-c"}) {
		t.Fatalf("leases = %v, want lease-b gone", leases)
	}
	if _, ok, _ := outboxHead(s, "lease-b"); ok {
		t.Fatal("lease-b still has a head")
	}
}

func TestOutboxStats_Empty(t *testing.T) {
	s := newStore(t)
	pending, oldest, err := s.OutboxStats()
	if err != nil || pending != 0 || !oldest.IsZero() {
		t.Fatalf("stats = %d, %v, %v", pending, oldest, err)
	}
	leases, err := s.OutboxLeases()
	if err != nil || len(leases) != 0 {
		t.Fatalf("leases = %v, %v", leases, err)
	}
}

func TestOutboxPending_CountsOneLeasesRowsOfOneKind(t *testing.T) {
	s := newStore(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	kinded := func(lease, delivery, kind string) OutboxRow {
		r := row(lease, delivery, t0)
		r.Kind = kind
		return r
	}
	c, err := s.Commit(Write{Outbox: []OutboxRow{
		kinded("lease-a", "a1", "maintenance"),
		kinded("lease-a", "a2", "operation"),
		kinded("lease-a", "a3", "maintenance"),
		kinded("lease-b", "b1", "maintenance"),
		kinded("lease-b", "b2", "lifecycle"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(lease, kind string) int {
		t.Helper()
		n, err := s.OutboxPending(lease, kind)
		if err != nil {
			t.Fatalf("OutboxPending(%s, %s): %v", lease, kind, err)
		}
		return n
	}
	for _, tc := range []struct {
		lease, kind string
		want        int
	}{
		{"lease-a", "maintenance", 2}, {"lease-a", "operation", 1}, {"lease-a", "lifecycle", 0},
		{"lease-b", "maintenance", 1}, {"lease-b", "lifecycle", 1}, {"lease-none", "maintenance", 0},
		{"lease-a", "", 0},
	} {
		if got := count(tc.lease, tc.kind); got != tc.want {
			t.Errorf("OutboxPending(%s, %s) = %d, want %d", tc.lease, tc.kind, got, tc.want)
		}
	}
	// Delivering one maintenance completion lowers the count; the last empties it.
	if err := s.DeleteOutbox(c.OutboxKeys[0]); err != nil {
		t.Fatal(err)
	}
	if got := count("lease-a", "maintenance"); got != 1 {
		t.Fatalf("after one delivery: %d", got)
	}
	if err := s.DeleteOutbox(c.OutboxKeys[2]); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if got := count("lease-a", "maintenance"); got != 0 {
		t.Fatalf("after both deliveries, across reopen: %d", got)
	}
	if _, err := s.OutboxPending("", "maintenance"); !IsInputError(err) {
		t.Fatalf("empty lease name: %v", err)
	}
}

func TestOutboxPending_UndecodableRow_ErrCorrupt(t *testing.T) {
	s := newStore(t)
	if _, err := s.Commit(Write{Outbox: []OutboxRow{row("lease-a", "a1", time.Now())}}); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).Bucket([]byte("lease-a")).Put(u64key(99), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.OutboxPending("lease-a", "operation")
	assertRefusal(t, err, ErrCorrupt, "outbox/lease-a row 99 does not decode")
}
