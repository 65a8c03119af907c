package lease

import (
	"testing"
	"time"
)

// TestProcessClock_WallSteps_MoveNothing: the lease's clock follows elapsed time
// only; a wall clock stepped back an hour or forward a day does not move it.
func TestProcessClock_WallSteps_MoveNothing(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var step, elapsed time.Duration
	now := ProcessClock(func() time.Time { return base.Add(elapsed + step) }, func() time.Duration { return elapsed })
	if got := now(); !got.Equal(base) {
		t.Fatalf("anchor %s, want %s", got, base)
	}
	elapsed, step = 10*time.Second, -time.Hour
	if got := now(); !got.Equal(base.Add(10 * time.Second)) {
		t.Fatalf("after a step back: %s, want %s", got, base.Add(10*time.Second))
	}
	elapsed, step = 20*time.Second, 24*time.Hour
	if got := now(); !got.Equal(base.Add(20 * time.Second)) {
		t.Fatalf("after a step forward: %s, want %s", got, base.Add(20*time.Second))
	}
}
