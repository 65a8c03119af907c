// Package netpool keeps a warm pool of pre-created lease networks, so a
// provision does not wait for dockerd to create one (at 100 concurrent
// provisions dockerd creates networks one after another: 12–16 s p50).
//
// Docker can neither rename a network nor change its labels, so a pool network
// is born berth-pool-<random> with our ownership labels, fred.network_scope=pool
// and no lease label; which lease holds it lives only in this actor's journal
// (stream "netpool"). A claim binds a free network to a lease in the journal
// before the lease sees its ID (claims arriving together share one commit); a
// lease asks again on every attempt and gets the same network back. A network
// returns to the pool only once its lease is gone from the registry, Docker
// reports no endpoint on it and no container of that lease exists: a network
// only ever carries one lease at a time. Passes (on start, every
// reconcile_interval, and shortly after a close or a burst of claims once
// claims pause) release such networks, adopt unbound pool networks Docker holds
// (a restart's free ones), remove the surplus over network_pool_size, and
// create the deficit, one at a time within Docker's address-pool capacity and
// each when berthd has nothing else in flight with Docker (within a budget).
package netpool

import (
	"cmp"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// quietTick is the scheduled pass's timer.
type quietTick struct{}

// Actor is the network pool.
type Actor struct {
	*Deps
	tasks    *supervisors.Tasks
	journal  *supervisors.Journal[*State]
	st       *State                            // the journal's state
	loop     *supervisors.Periodic             // nil while failed
	claims   *supervisors.Group[*pendingClaim] // bound in memory, awaiting the batch commit
	names    map[string]string                 // network ID → name, as listed or created
	made     map[string]struct{}               // networks made since the running pass began (by it, or by a lease): its listing may miss them
	free     []string                          // unbound networks ready to hand out, oldest first
	trim     []string                          // surplus to remove in the next pass
	closed   map[string]bool                   // leases known closed that still hold a binding
	halt     chan struct{}                     // closed as the pool stops: a pass makes nothing more
	passDone <-chan findings                   // the latest pass's findings, once it ends

	soon      bool      // a pass is scheduled
	lastClaim time.Time // claims in the last Quiet postpone a scheduled pass
	exhausted bool      // the last refill met Docker's address-pool limit
	failed    bool      // the journal did not load: inert until the tree goes down
}

// Tasks are the pool's pass, timers and claim flushes.
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// New returns the producer of the pool.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{Deps: deps}
	}
}

// Receive handles the pool's messages.
func (a *Actor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Stopping); ok {
		a.stopping() // before the claims batch is abandoned: a pending claim is a live lease
	}
	if a.claims != nil && a.claims.Before(c.Message()) {
		return
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *messages.ClaimNetwork:
		if a.failed {
			m.Reply <- messages.NetworkClaim{}
			return
		}
		a.claim(m)
	case *messages.GetPass:
		if a.failed {
			m.Reply <- messages.PassReport{Name: "netpool", Interval: a.Settings.Interval}
			return
		}
		a.loop.Receive(m)
	default:
		if !a.failed {
			a.receive(m)
		}
	}
}

func (a *Actor) receive(msg any) {
	switch m := msg.(type) {
	case *messages.DropNetwork:
		a.drop(m)
	case *messages.LeaseGone:
		if _, bound := a.st.byLease[m.Lease]; bound || a.st.Bridged[m.Lease] {
			a.closed[m.Lease] = true
		}
		a.schedule()
	case quietTick:
		a.quiet()
	case networkCreated:
		a.addCreated(m.net)
		a.gauges()
	default:
		a.loop.Receive(m)
	}
}

// Describe summarises the pool for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.st == nil {
		return "loading", 0
	}
	inFlight := 0
	if a.loop != nil {
		_, inFlight = a.loop.Describe()
	}
	// The last pass's outcome is on /debug/freshness (GetPass); this stays one
	// steady line for the tree views.
	return fmt.Sprintf("%d free, %d bound, %d bridged, %d claims committing", len(a.free), len(a.st.Bound), len(a.st.Bridged), a.claims.Len()), inFlight
}

func (a *Actor) started(c actor.Context) {
	a.tasks = supervisors.NewTasks(c, 0)
	a.names, a.made, a.closed, a.halt = map[string]string{}, map[string]struct{}{}, map[string]bool{}, make(chan struct{})
	a.claims = &supervisors.Group[*pendingClaim]{Tasks: a.tasks, Commutes: claimCommutes,
		Commit: a.commitClaims, Abandon: a.abandonClaims}
	st, seq, err := Load(a.Store)
	if err != nil {
		// Without the bindings every pool network would look free: hand out
		// nothing, pass never, until the failed tree is drained.
		a.failed = true
		a.Tree.Fail(fmt.Errorf("netpool: %w", err))
		a.st = newState()
		return
	}
	a.st = st
	a.journal = &supervisors.Journal[*State]{Store: a.Store, Stream: Stream, Version: eventVersion,
		Every: a.Settings.SnapshotEvery, Now: a.Now, Log: a.Log}
	a.journal.Resume(st, seq)
	if n := len(st.Bridged); n > 0 && !a.Settings.Bridged {
		// Never moved silently: each launch onto the bridge verifies it still
		// isolates, and a launch refused says so on its lease.
		a.Log.Error().Int("leases", n).Str("reason", cmp.Or(a.Settings.Bridge.Reason, "single_container_network: own")).
			Msg("leases are bound to the default bridge, which new single-container leases no longer get; they stay bound, and each launch onto it is refused unless the bridge isolates")
	}
	a.gauges()
	a.loop = supervisors.StartPeriodic(a.tasks, supervisors.PassSpec{Name: "netpool", Interval: a.Settings.Interval,
		Timeout: a.Settings.Budget, Begin: a.begin, End: a.end})
}

// schedule asks for a pass once claims have paused for Quiet.
func (a *Actor) schedule() {
	if !a.soon {
		a.after(a.Settings.Quiet)
	}
}

func (a *Actor) after(d time.Duration) {
	a.soon = true
	a.tasks.After("netpool-quiet", d, quietTick{})
}

// quiet runs the scheduled pass, or puts it off until claims paused for Quiet.
func (a *Actor) quiet() {
	a.soon = false
	if wait := a.Settings.Quiet - a.Now().Sub(a.lastClaim); wait > 0 {
		a.after(wait)
		return
	}
	a.loop.Now()
}

func (a *Actor) gauges() {
	a.Metrics.networks.WithLabelValues("free").Set(float64(len(a.free)))
	a.Metrics.networks.WithLabelValues("bound").Set(float64(len(a.st.Bound)))
	a.Metrics.networks.WithLabelValues("bridged").Set(float64(len(a.st.Bridged)))
}
