package registry

// The registry's recovery handshake. A registry (re)started holds admissions
// and answers /health unready until a reconciliation pass has handed every live
// lease its containers: it asks the reconciler for a pass for this incarnation
// (RecoverNow{For}), and only a Recovered for the same incarnation makes it
// ready. protoactor drops what is sent to an actor between two incarnations and
// the message an actor was handling when it failed, and the reconciler may be
// restarting, mid-pass or failing the pass itself; so the registry asks again
// until it is answered — after 1 s, backing off to 15 s (a pass that keeps
// failing, Docker down at start, is not rerun every second) — and a wait longer
// than a few seconds is
// logged by name and shown on berth_actor_awaiting_seconds{kind="registry",
// awaits="recovery pass"}. A chaos drill once left a restarted registry unready
// for 71 s, until the next crash happened to restart it.

import (
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

const (
	recoveryPatience = 5 * time.Second // after this the wait is logged
	awaitsRecovery   = "recovery pass"
)

// recoveryAgain is when an unanswered RecoverNow is asked again: 1 s, 2 s, … 15 s.
var recoveryAgain = supervisors.Retry{Base: time.Second, Cap: 15 * time.Second}

// askRecovery is the registry's own reminder to ask again while not ready.
type askRecovery struct{}

var incarnations atomic.Uint64

// nextIncarnation names a registry instance for its RecoverNow (unique within
// the process; a restarted daemon has a new reconciler too).
func nextIncarnation() uint64 { return incarnations.Add(1) }

// awaitRecovery opens the wait for this incarnation's recovery pass and
// schedules the first reminder (the Decide of started asked once already).
func (a *Actor) awaitRecovery() {
	a.recovery, a.reminders = a.deps.Tree.Awaits.Begin("registry", awaitsRecovery), 1
	a.tasks.After("recovery-ask", recoveryAgain.Jittered(1), askRecovery{})
}

// recovered settles the wait when the pass answers this incarnation: the
// registry is ready from then on. A pass that answers another (a predecessor's,
// or one begun before this incarnation asked) is only a pass.
func (a *Actor) recovered(m messages.Recovered) {
	if a.dir.Ready || m.For != a.incarnation {
		return
	}
	took := time.Since(a.startedAt)
	a.phase("recovery", took)
	a.log.Info().Int("leases", len(a.dir.St.Leases)).Dur("took", took).Msg("startup recovery complete; admitting work")
	a.dir.Ready = true
	if a.recovery != nil {
		a.recovery()
		a.recovery = nil
	}
}

// remind asks for the recovery pass again while it has not answered.
func (a *Actor) remind() {
	if a.dir.Ready {
		return
	}
	waited := time.Since(a.startedAt)
	if waited >= recoveryPatience {
		a.log.Warn().Dur("waited", waited).Str("awaits", string(a.set.ReconcilerPath)).
			Msg("not ready: still waiting for the recovery pass; asking again")
	}
	a.deps.Tree.Send(a.set.ReconcilerPath, messages.RecoverNow{For: a.incarnation})
	a.reminders++
	a.tasks.After("recovery-ask", recoveryAgain.Jittered(a.reminders), askRecovery{})
}
