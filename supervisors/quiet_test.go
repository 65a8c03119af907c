package supervisors

import (
	"context"
	"testing"
	"time"
)

func TestQuiet_WaitsOutMarks_BoundedByMax_NilAndCanceledReturnAtOnce(t *testing.T) {
	var none *Quiet
	if d := none.Wait(context.Background()); d != 0 {
		t.Fatalf("a nil Quiet waited %s", d)
	}

	q := &Quiet{Window: 50 * time.Millisecond, Max: time.Second}
	if d := q.Wait(context.Background()); d > 10*time.Millisecond {
		t.Fatalf("never marked: waited %s", d)
	}
	q.Mark()
	if d := q.Wait(context.Background()); d < 40*time.Millisecond || d > 500*time.Millisecond {
		t.Fatalf("right after a mark: waited %s, want about the 50ms window", d)
	}

	// A window longer than Max (as marks that never stop make it): Max bounds
	// the wait. (A marking goroutine made this flaky on a loaded machine: it
	// could be descheduled for longer than the window.)
	q = &Quiet{Window: 5 * time.Second, Max: 200 * time.Millisecond}
	q.Mark()
	if d := q.Wait(context.Background()); d < 190*time.Millisecond || d > time.Second {
		t.Fatalf("under continuous marks: waited %s, want Max (200ms)", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if d := q.Wait(ctx); d > 150*time.Millisecond {
		t.Fatalf("with ctx ending after 20ms: waited %s", d)
	}
}
