package supervisors

import (
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Retry is the house's one backoff: waits double from Base up to Cap, and each is
// lengthened by up to a fifth at random, so many actors retrying after one fault
// (a Docker outage, a restart storm) do not come back in step. Jitter only ever
// lengthens a wait: never sooner than the nominal Delay.
type Retry struct{ Base, Cap time.Duration }

// Delay is the nominal wait before the n-th attempt (n ≥ 1).
func (r Retry) Delay(n int) time.Duration {
	d := r.Base
	for i := 1; i < n && d < r.Cap; i++ {
		d *= 2
	}
	return min(d, r.Cap)
}

// Jittered is Delay(n) plus up to a fifth of it at random.
func (r Retry) Jittered(n int) time.Duration {
	d := r.Delay(n)
	if d <= 0 {
		return 0
	}
	return d + rand.N(d/5+1)
}

// Backoff restarts a failed child after a capped exponential delay (Base, 2×Base, …
// up to Cap) and gives up once more than MaxFailures happened within Window.
// protoactor's own "exponential" strategy grows linearly and never gives up, and an
// escalation to a guardian crashes the process, so berth brings its own.
type Backoff struct {
	Base        time.Duration
	Cap         time.Duration
	MaxFailures int
	Window      time.Duration
	// GiveUp is called after the child has been stopped for good. Nil means escalate
	// to the supervisor's own parent instead (used below the root).
	GiveUp func(child *actor.PID, reason any)
}

// DefaultBackoff is the root guardian's policy: 100 ms → 30 s, 10 failures / 5 min.
func DefaultBackoff() Backoff {
	return Backoff{Base: 100 * time.Millisecond, Cap: 30 * time.Second, MaxFailures: 10, Window: 5 * time.Minute}
}

// Delay is the nominal wait before the n-th restart within the window (n ≥ 1).
func (b Backoff) Delay(n int) time.Duration { return Retry{b.Base, b.Cap}.Delay(n) }

// HandleFailure implements actor.SupervisorStrategy.
func (b Backoff) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any, msg any) {
	rs.Fail()
	n := rs.NumberOfFailures(b.Window)
	if n > b.MaxFailures {
		if b.GiveUp == nil {
			publish(sys, child, reason, actor.EscalateDirective)
			sup.EscalateFailure(reason, msg)
			return
		}
		publish(sys, child, reason, actor.StopDirective)
		sup.StopChildren(child)
		b.GiveUp(child, reason)
		return
	}
	time.AfterFunc(Retry{b.Base, b.Cap}.Jittered(n), func() {
		publish(sys, child, reason, actor.RestartDirective)
		sup.RestartChildren(child)
	})
}

// OneForOne restarts a failed child at once, up to MaxRestarts within Window; past
// that it stops the child. The parent sees the child's Terminated and reports it
// (a lease actor stopped this way is shown as unknown until the reconciler retries).
type OneForOne struct {
	MaxRestarts int
	Window      time.Duration
}

// LeaseStrategy is the registry's policy for lease actors: 5 restarts per minute.
func LeaseStrategy() OneForOne { return OneForOne{MaxRestarts: 5, Window: time.Minute} }

// HandleFailure implements actor.SupervisorStrategy.
func (o OneForOne) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any, _ any) {
	rs.Fail()
	if rs.NumberOfFailures(o.Window) > o.MaxRestarts {
		publish(sys, child, reason, actor.StopDirective)
		sup.StopChildren(child)
		return
	}
	publish(sys, child, reason, actor.RestartDirective)
	sup.RestartChildren(child)
}

// publish announces a supervision decision on the event stream, where the tree logs
// and counts it.
func publish(sys *actor.ActorSystem, child *actor.PID, reason any, d actor.Directive) {
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: d})
}
