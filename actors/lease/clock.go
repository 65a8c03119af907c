package lease

import "time"

// NewProcessClock is the lease's clock: the wall clock read once, then advanced
// by the monotonic clock. Deadlines, budget windows and event times of one
// process are thus bounded by elapsed time — a wall clock stepped back an hour
// stretches no deadline, one stepped forward fails no attempt at once (issue 18
// item 6); a restart anchors to the wall again.
func NewProcessClock() func() time.Time {
	start := time.Now()
	return ProcessClock(time.Now, func() time.Duration { return time.Since(start) })
}

// ProcessClock anchors wall once and advances it by elapsed (a test steps wall).
func ProcessClock(wall func() time.Time, elapsed func() time.Duration) func() time.Time {
	anchor, at := wall(), elapsed()
	return func() time.Time { return anchor.Add(elapsed() - at) }
}
