package supervisors

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Periodic runs an actor's background pass, shaped like controller-runtime's
// reconciler: the actor writes the pass and says when it wants the next; the
// kit owns the interval, the per-pass timeout, one pass at a time (passes asked
// for meanwhile collapse into one right after it), the record behind
// GET /debug/freshness and Describe, and one jittered backoff after a failure.
// Its timers and the pass itself run under the actor's Tasks, so a restarted
// actor never sees an earlier instance's pass.
type Periodic struct {
	spec  PassSpec
	tasks *Tasks

	running bool
	again   bool
	task    *Task     // the running pass
	stale   bool      // the running pass was superseded (Restart): its outcome is not recorded
	started time.Time // of the running pass
	soon    func()    // cancels the scheduled early pass (nil: none)
	fails   int       // consecutive failed passes

	finished int
	lastAt   time.Time
	took     time.Duration
	last     Outcome
}

// PassSpec declares one periodic pass.
type PassSpec struct {
	Name     string        // as GET /debug/freshness shows it
	Interval time.Duration // a pass at least this often
	Timeout  time.Duration // bound of one pass (0: none beyond the actor's life)
	// Retry brings the next pass forward after a failed one (Jittered by the
	// number of failures in a row), never later than Interval. Zero: a failed
	// pass waits for the interval.
	Retry Retry
	// Begin runs on the actor as a pass starts and returns the pass to run off
	// it, built from the actor's state at that moment.
	Begin func() func(ctx context.Context) Outcome
	// End, when set, runs on the actor with the pass's outcome before it is
	// recorded: it folds the findings in, and may amend Detail and Again with
	// what only the folded state tells.
	End func(*Outcome)
}

// Outcome is what a pass reports.
type Outcome struct {
	Detail string // an ok pass's one-line summary
	Err    error
	Again  bool          // run the next pass at once (the budget ran out with work left)
	After  time.Duration // the next pass after this, when sooner than the interval
	Value  any           // the pass's findings, for End
}

type (
	passTick struct{ p *Periodic }
	passDone struct {
		p   *Periodic
		out Outcome
	}
)

// StartPeriodic starts the interval and runs the first pass now.
func StartPeriodic(tasks *Tasks, spec PassSpec) *Periodic {
	p := &Periodic{spec: spec, tasks: tasks}
	tasks.Every(spec.Name+"-interval", spec.Interval, passTick{p})
	p.Now()
	return p
}

// Now runs a pass now, or right after the running one.
func (p *Periodic) Now() {
	if p.running {
		p.again = true
		return
	}
	p.cancelSoon()
	run := p.spec.Begin()
	if run == nil {
		return
	}
	p.running, p.stale, p.started = true, false, time.Now()
	timeout := p.spec.Timeout
	p.task = p.tasks.Start(p.spec.Name+"-pass", func(ctx context.Context) any {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return passDone{p: p, out: run(ctx)}
	})
}

// Restart runs a pass that begins now: a running one is canceled and its
// outcome dropped (what it found was asked for before the reason to restart
// came), and the new one starts as soon as it returns.
func (p *Periodic) Restart() {
	if !p.running {
		p.Now()
		return
	}
	p.stale, p.again = true, true
	p.task.Cancel()
}

// Soon runs a pass after d, unless an early pass is already scheduled.
func (p *Periodic) Soon(d time.Duration) {
	if p.soon == nil {
		p.soon = p.tasks.After(p.spec.Name+"-soon", d, passTick{p})
	}
}

// Scheduled reports whether an early pass is waiting to run.
func (p *Periodic) Scheduled() bool { return p.soon != nil }

func (p *Periodic) cancelSoon() {
	if p.soon != nil {
		p.soon()
		p.soon = nil
	}
}

// Receive handles the pass's own messages; false for anything else.
func (p *Periodic) Receive(msg any) bool {
	switch m := msg.(type) {
	case passTick:
		if m.p != p {
			return false
		}
		p.soon = nil
		p.Now()
	case passDone:
		if m.p != p {
			return false
		}
		p.done(m.out)
	case *messages.GetPass:
		m.Reply <- p.Report()
	default:
		return false
	}
	return true
}

// done records a finished pass, lets the actor fold it in, and schedules the next.
func (p *Periodic) done(out Outcome) {
	p.running, p.task = false, nil
	if p.stale {
		p.stale, p.again = false, false
		p.Now()
		return
	}
	if p.spec.End != nil {
		p.spec.End(&out)
	}
	now := time.Now()
	p.finished++
	p.lastAt, p.took, p.last = now, now.Sub(p.started), out
	next := out.After
	if out.Err != nil {
		p.fails++
		if p.spec.Retry.Base > 0 {
			next = p.spec.Retry.Jittered(p.fails)
		}
	} else {
		p.fails = 0
	}
	again := p.again || out.Again
	p.again = false
	switch {
	case again:
		p.Now()
	case next > 0 && next < p.spec.Interval:
		p.Soon(next)
	}
}

// Report is the record of the last finished pass, for a GetPass.
func (p *Periodic) Report() messages.PassReport {
	r := messages.PassReport{Name: p.spec.Name, Interval: p.spec.Interval, Passes: p.finished, LastAt: p.lastAt,
		Duration: p.took, Detail: p.last.Detail, Running: p.running}
	if p.last.Err != nil {
		r.Err, r.Detail = p.last.Err.Error(), ""
	}
	return r
}

// Describe is "<n> passes, last ok: <detail>" (or "last error: …"), and 1 in
// flight while a pass runs.
func (p *Periodic) Describe() (string, int) {
	last := "none"
	switch {
	case p.last.Err != nil:
		last = "error: " + p.last.Err.Error()
	case p.finished > 0:
		last = "ok: " + p.last.Detail
	}
	inFlight := 0
	if p.running {
		inFlight = 1
	}
	return fmt.Sprintf("%d passes, last %s", p.finished, last), inFlight
}
