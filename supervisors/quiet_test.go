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

	// Marks that never stop: Max bounds the wait.
	q = &Quiet{Window: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				q.Mark()
			}
		}
	}()
	time.Sleep(10 * time.Millisecond)
	if d := q.Wait(context.Background()); d < 190*time.Millisecond || d > time.Second {
		t.Fatalf("under continuous marks: waited %s, want Max (200ms)", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if d := q.Wait(ctx); d > 150*time.Millisecond {
		t.Fatalf("with ctx ending after 20ms: waited %s", d)
	}
}
