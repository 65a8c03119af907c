package outbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
)

func TestRing_KeepsTheNewestOldestFirstAndFiltersByLease(t *testing.T) {
	r := newRing(3)
	if got := r.list(""); got == nil || len(got) != 0 {
		t.Fatalf("empty ring lists %#v", got)
	}
	for i := 1; i <= 5; i++ {
		r.add(messages.DeliveredCallback{Lease: fmt.Sprintf("l%d", i%2), DeliveryID: fmt.Sprint(i)})
	}
	ids := func(ds []messages.DeliveredCallback) string {
		s := ""
		for _, d := range ds {
			s += d.DeliveryID
		}
		return s
	}
	if got := ids(r.list("")); got != "345" {
		t.Fatalf("all = %s, want 345", got)
	}
	if got := ids(r.list("l1")); got != "35" {
		t.Fatalf("l1 = %s, want 35", got)
	}
	if got := ids(r.list("l0")); got != "4" {
		t.Fatalf("l0 = %s, want 4", got)
	}
}

func TestTries_BoundedByForgettingTheOldest(t *testing.T) {
	a := &Actor{tries: map[string]*messages.DeliveryAttempts{}, recent: newRing(4)}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < maxTracked+2; i++ {
		a.record(attempted{lease: "l", deliveryID: fmt.Sprint(i), at: base.Add(time.Duration(i) * time.Second)})
	}
	if len(a.tries) != maxTracked {
		t.Fatalf("tracked %d, want at most %d", len(a.tries), maxTracked)
	}
	if a.tries["0"] != nil || a.tries["1"] != nil || a.tries[fmt.Sprint(maxTracked+1)] == nil {
		t.Fatal("the oldest were not the ones forgotten")
	}
}
