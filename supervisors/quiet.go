package supervisors

import (
	"context"
	"sync/atomic"
	"time"
)

// Quiet lets background work stand aside for a burst of latency-critical
// requests: the registry marks each admission it queues; a provision's worker
// waits, before its first Engine API request, until no admission was marked for
// Window (at most Max). A burst of 100 POSTs is then answered before 100
// workers and dockerd compete with it for this machine's two cores; each
// provision starts a few milliseconds later, which its seconds hide.
type Quiet struct {
	Window, Max time.Duration
	last        atomic.Int64 // unix nanos of the last mark
}

// Mark records a latency-critical request now.
func (q *Quiet) Mark() { q.last.Store(time.Now().UnixNano()) }

// LastMark is when Mark was last called (zero: never).
func (q *Quiet) LastMark() time.Time {
	if n := q.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Wait returns once no mark is younger than Window, after Max, or when ctx
// ends; it reports how long it waited. A nil Quiet never waits.
func (q *Quiet) Wait(ctx context.Context) time.Duration {
	if q == nil || q.Window <= 0 {
		return 0
	}
	start := time.Now()
	for {
		since := time.Since(time.Unix(0, q.last.Load()))
		waited := time.Since(start)
		if since >= q.Window || waited >= q.Max {
			return waited
		}
		t := time.NewTimer(min(q.Window-since, q.Max-waited))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return time.Since(start)
		}
	}
}
