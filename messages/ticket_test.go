package messages

import (
	"sync"
	"testing"
	"time"
)

func TestTicket_TakeOrDrop_WhicheverComesFirstDecides(t *testing.T) {
	soon := time.Now().Add(time.Hour)
	cases := []struct {
		name             string
		deadline         time.Time
		first            string // "take" or "drop"
		wantTake, wantDr bool
	}{
		{"taken before the asker gave up: carried out, the asker waits", soon, "take", true, false},
		{"dropped before the actor came: never carried out", soon, "drop", false, true},
		{"the deadline passed before the actor came: never carried out", time.Now().Add(-time.Millisecond), "take", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := NewTicket(c.deadline)
			var took, dropped bool
			if c.first == "take" {
				took, dropped = tk.Take(), tk.Drop()
			} else {
				dropped, took = tk.Drop(), tk.Take()
			}
			if took != c.wantTake || dropped != c.wantDr {
				t.Fatalf("take %t drop %t, want %t %t", took, dropped, c.wantTake, c.wantDr)
			}
			if tk.Take() != took || tk.Dropped() != dropped {
				t.Fatal("a settled ticket changed its mind")
			}
		})
	}
	var none *Ticket
	if !none.Take() || none.Drop() || none.Dropped() {
		t.Fatal("a request without a ticket is always carried out")
	}
}

// TestTicket_RacingTakeAndDrop_ExactlyOneWins: the asker's timer and the actor
// race; never both, never neither.
func TestTicket_RacingTakeAndDrop_ExactlyOneWins(t *testing.T) {
	for range 2000 {
		tk := NewTicket(time.Now().Add(time.Hour))
		var took, dropped bool
		var wg sync.WaitGroup
		wg.Go(func() { took = tk.Take() })
		wg.Go(func() { dropped = tk.Drop() })
		wg.Wait()
		if took == dropped {
			t.Fatalf("take %t and drop %t", took, dropped)
		}
	}
}
