package supervisors

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
)

// Background runs fn on its own goroutine, tracked by wg, and sends what it
// returns to the actor: how actors keep blocking work (Docker, HTTP) off their
// mailbox. The actor waits on wg when it stops or restarts.
func Background(c actor.Context, wg *sync.WaitGroup, fn func() any) {
	self, sys := c.Self(), c.ActorSystem()
	wg.Add(1)
	go func() {
		defer wg.Done()
		sys.Root.Send(self, fn())
	}()
}

// Tick sends msg to the actor every interval until ctx ends.
func Tick(c actor.Context, ctx context.Context, wg *sync.WaitGroup, interval time.Duration, msg any) {
	self, sys := c.Self(), c.ActorSystem()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sys.Root.Send(self, msg)
			}
		}
	}()
}

// Passes serialises an actor's background passes (reconciliation, network
// reclamation): one runs at a time, and passes asked for meanwhile collapse into
// one that runs right after it. It also keeps the record of the last finished
// pass (GET /debug/freshness); a restarted actor starts a new record.
type Passes struct {
	running bool
	again   bool
	started time.Time // of the running pass

	finished int
	lastAt   time.Time
	took     time.Duration
	err      string
	detail   string
}

// Start runs fn as a background pass, or remembers that one was asked for.
func (p *Passes) Start(c actor.Context, wg *sync.WaitGroup, fn func() any) {
	if p.running {
		p.again = true
		return
	}
	p.running, p.started = true, time.Now()
	Background(c, wg, fn)
}

// Running reports whether a pass runs now; AskAgain then has another follow it
// (for an actor that must not build a pass's input twice).
func (p *Passes) Running() bool { return p.running }

// AskAgain remembers that another pass is asked for once the running one ends.
func (p *Passes) AskAgain() { p.again = true }

// Done marks the running pass finished and reports whether another was asked for.
func (p *Passes) Done() (again bool) {
	p.running, again, p.again = false, p.again, false
	return again
}

// Finish records how the running pass ended (err nil: ok, with the pass's own
// summary as detail), then is Done.
func (p *Passes) Finish(err error, detail string) (again bool) {
	now := time.Now()
	p.finished++
	p.lastAt, p.took, p.err, p.detail = now, now.Sub(p.started), "", detail
	if err != nil {
		p.err, p.detail = err.Error(), ""
	}
	return p.Done()
}

// Report is the record of the last finished pass, for a GetPass.
func (p *Passes) Report(name string, interval time.Duration) messages.PassReport {
	return messages.PassReport{Name: name, Interval: interval, Passes: p.finished, LastAt: p.lastAt,
		Duration: p.took, Err: p.err, Detail: p.detail, Running: p.running}
}

// InFlight is 1 while a pass runs, else 0 (for Describe).
func (p *Passes) InFlight() int {
	if p.running {
		return 1
	}
	return 0
}
