package lease

import (
	"context"
	"time"
)

// NewProcessClock is the lease's clock: the wall clock read once, then advanced
// by the monotonic clock. Deadlines, budget windows and event times of one
// process are thus bounded by elapsed time — a wall clock stepped back an hour
// stretches no deadline, one stepped forward fails no attempt at once (issue 18
// item 6); a restart anchors to the wall again, and each lease's clock is then
// floored at its latest journaled event (FloorShift), so a wall set back across
// the restart stretches no deadline either.
func NewProcessClock() func() time.Time {
	start := time.Now()
	return ProcessClock(time.Now, func() time.Duration { return time.Since(start) })
}

// ProcessClock anchors wall once and advances it by elapsed (a test steps wall).
func ProcessClock(wall func() time.Time, elapsed func() time.Duration) func() time.Time {
	anchor, at := wall(), elapsed()
	return func() time.Time { return anchor.Add(elapsed() - at) }
}

// FloorShift is how far a lease's clock runs ahead of the process clock so that
// it never reads earlier than last, the time of the latest event its journal
// holds: the process clock is monotonic only within one process, and a wall
// clock set back across a restart would otherwise grant every deadline the
// rollback on top of what it had left (the seed bounds a restart to one window;
// this keeps to what remained at the last event). The shift never shrinks
// (prev): a lease actor restarted within the process keeps its clock. A clock
// that is not behind gives no shift, so a healthy host's lease clocks are the
// process clock.
func FloorShift(prev time.Duration, last, now time.Time) time.Duration {
	return max(prev, last.Sub(now), 0)
}

// until bounds ctx by d on the lease's clock: a context deadline is read
// against the wall clock, which may be behind (or stepped) — the remaining time
// by the lease's own clock is what a worker may spend.
func (j *job) until(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.Sub(j.now()))
}
