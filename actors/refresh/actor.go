// Package refresh is the operator's runtime refresh (seed: /runtime_refresh):
// one journaled run at a time recreates every Ready lease still running a
// container created under an older runtime contract, through the lease's own
// runtime_refresh maintenance, a few leases at a time. The run (its leases,
// each one's maintenance ID, written before the lease is asked) and every
// lease's settled outcome live in the "refresh" stream, so a restarted berthd
// resumes the run where it stood: a lease asked before the restart is asked
// again under the same ID only when it never took it, and admits it at most
// once.
package refresh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Actor is the refresh actor.
type Actor struct {
	*Deps
	journal *supervisors.Journal[*State]
	tasks   *supervisors.Tasks
	loop    *supervisors.Periodic
	asking  map[string]bool // leases whose maintenance ask has not been answered
}

// read is an inventory read for a StartRefresh (start) or a GetRefresh.
type read struct {
	inv   Inventory
	err   error
	start bool
	reply chan<- messages.RefreshReply
}

// findings are a pass's inventory and receipts.
type findings struct {
	inv      Inventory
	receipts map[string]messages.RefreshReceipt
}

// Tasks are the actor's reads, asks and pass.
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// New returns the producer of the refresh actor.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor { return &Actor{Deps: deps} }
}

// Receive handles the refresh actor's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *messages.StartRefresh:
		a.read(true, m.Reply)
	case *messages.GetRefresh:
		a.read(false, m.Reply)
	case read:
		a.answer(m)
	case Admitted:
		delete(a.asking, m.Lease)
		a.decide(m)
	default:
		if a.loop != nil {
			a.loop.Receive(m)
		}
	}
}

// Describe summarises the run for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.journal == nil {
		return "loading", 0
	}
	st := a.journal.State
	if !st.Active() {
		return "no active run", 0
	}
	return fmt.Sprintf("run %s: %d pending, %d in flight", st.Run.ID, st.count(Pending), st.count(InFlight)), st.count(InFlight)
}

func (a *Actor) started(c actor.Context) {
	a.tasks = supervisors.NewTasks(c, 0)
	a.asking = map[string]bool{}
	a.journal = &supervisors.Journal[*State]{Store: a.Store, Stream: Stream, Version: eventVersion,
		Every: a.Settings.SnapshotEvery, Now: a.Now, Log: a.Log}
	st, seq, err := Load(a.Store)
	if err != nil {
		a.Tree.Fail(fmt.Errorf("refresh: %w", err))
		return
	}
	a.journal.Resume(st, seq)
	a.loop = supervisors.StartPeriodic(a.tasks, supervisors.PassSpec{Name: "runtime-refresh", Interval: a.Settings.Interval,
		Timeout: 2 * a.Settings.AskTimeout, Begin: a.begin, End: a.end})
}

// read reads the inventory off the actor and hands it back with the request.
func (a *Actor) read(start bool, reply chan<- messages.RefreshReply) {
	if a.journal == nil || a.loop == nil {
		reply <- messages.RefreshReply{Err: messages.Refuse(messages.ErrUnavailable, "runtime refresh state unavailable")}
		return
	}
	a.tasks.Go("refresh-read", func(ctx context.Context) any {
		inv, err := a.inventory(ctx)
		return read{inv: inv, err: err, start: start, reply: reply}
	})
}

// answer starts a run (a POST) and answers the status with the inventory read.
func (a *Actor) answer(m read) {
	a.Metrics.read(m.inv, m.err)
	if m.err != nil {
		a.Log.Warn().Err(m.err).Msg("runtime refresh: inventory unreadable")
		m.reply <- messages.RefreshReply{Err: messages.Refuse(messages.ErrUnavailable, "the Docker inventory could not be read")}
		return
	}
	if m.start {
		if err := a.decide(Start{Inv: m.inv}); err != nil {
			m.reply <- messages.RefreshReply{Err: err}
			return
		}
	}
	m.reply <- messages.RefreshReply{Status: Status(a.journal.State, m.inv)}
}

// decide runs one decision: journal its events, then send its asks. A failed
// commit applies nothing: a start is answered 503.
func (a *Actor) decide(in any) error {
	st := a.journal.State
	d := Decide(st, in, Env{Now: a.Now(), Concurrency: a.Settings.Concurrency, MaxRun: a.Settings.MaxRun, NewID: newID})
	if d.Reply != nil {
		return d.Reply
	}
	err := supervisors.Execute(supervisors.Decided[Ask]{Events: d.Events, Effects: d.Asks}, func(evs []persistence.Event) error {
		if err := a.journal.Commit(evs); err != nil {
			return err
		}
		for _, ev := range evs {
			a.count(ev)
		}
		return nil
	}, a.ask)
	if err != nil {
		a.Log.Error().Err(err).Msg("runtime refresh: journal commit failed")
		return messages.Refuse(messages.ErrUnavailable, "state store unavailable")
	}
	if d.Pass {
		a.loop.Now()
	}
	return nil
}

// count is the outcome counter of a settled or dropped lease.
func (a *Actor) count(ev persistence.Event) {
	var e leaseEvent
	switch {
	case ev.Type == EvLeaseDropped:
		a.Metrics.outcomes.WithLabelValues(messages.RefreshSkipped).Inc()
	case ev.Type == EvLeaseSettled && supervisors.DecodeEvent(ev, eventVersion, &e, nil) == nil && e.Outcome != nil:
		a.Metrics.outcomes.WithLabelValues(e.Outcome.Outcome).Inc()
	}
}

// ask asks the lease, through the registry, for its runtime_refresh maintenance.
func (a *Actor) ask(k Ask) {
	a.asking[k.Lease] = true
	tree, path, timeout, at := a.Tree, a.Settings.RegistryPath, a.Settings.AskTimeout, a.Now().UTC()
	a.tasks.Go("refresh-ask", func(ctx context.Context) any {
		// Ticketed: an ask that timed out never refreshes the lease behind the run's back.
		refusal, err := supervisors.AskTicketed(ctx, tree, path, timeout, timeout, func(r chan<- error, tk *messages.Ticket) any {
			return &messages.Maintain{Kind: messages.MaintenanceRuntimeRefresh, Req: messages.MaintenanceRequest{LeaseUUID: k.Lease},
				MaintenanceID: k.MaintenanceID, AdmittedAt: at, Stale: k.Stale, Reply: r, Ticket: tk}
		})
		return Admitted{Lease: k.Lease, MaintenanceID: k.MaintenanceID, Err: cmp.Or(err, refusal)}
	})
}

// begin snapshots the in-flight leases to ask about (not those whose ask is
// out) and returns the pass: the inventory, then each one's receipt.
func (a *Actor) begin() func(ctx context.Context) supervisors.Outcome {
	asks := map[string]string{}
	if st := a.journal.State; st.Active() {
		for id, l := range st.Run.Leases {
			if l.Phase == InFlight && !a.asking[id] {
				asks[id] = l.MaintenanceID
			}
		}
	}
	return func(ctx context.Context) supervisors.Outcome {
		inv, err := a.inventory(ctx)
		if err != nil {
			return supervisors.Outcome{Err: err}
		}
		f := findings{inv: inv, receipts: map[string]messages.RefreshReceipt{}}
		for _, id := range slices.Sorted(maps.Keys(asks)) {
			if inv.Live[id] {
				f.receipts[id] = a.receipt(ctx, id, asks[id])
			}
		}
		return supervisors.Outcome{Value: f, Detail: fmt.Sprintf("%d stale leases", len(inv.Stale))}
	}
}

// end folds a pass in and asks for the next one soon while a run is active.
func (a *Actor) end(out *supervisors.Outcome) {
	f, ok := out.Value.(findings)
	if out.Err != nil || !ok {
		a.Metrics.read(Inventory{}, cmp.Or(out.Err, errors.New("no findings")))
		return
	}
	a.Metrics.read(f.inv, nil)
	_ = a.decide(Pass{Inv: f.inv, Receipts: f.receipts})
	if st := a.journal.State; st.Active() {
		out.After = a.Settings.RetryEvery
		if st.count(InFlight) > 0 {
			out.After = a.Settings.PollEvery
		}
	}
}

// receipt asks a lease how its maintenance id stands; unread when it cannot be asked.
func (a *Actor) receipt(ctx context.Context, lease, id string) messages.RefreshReceipt {
	rec, err := supervisors.Ask(ctx, a.Tree, a.Settings.RegistryPath, a.Settings.AskTimeout, func(r chan<- messages.RefreshReceipt) any {
		return &messages.Deliver{Lease: lease, Msg: &messages.GetRefreshReceipt{MaintenanceID: id, Reply: r},
			Dropped: func() { r <- messages.RefreshReceipt{} }}
	})
	if err != nil {
		return messages.RefreshReceipt{}
	}
	return rec
}

// inventory reads the live leases, which of them are Ready, and this
// installation's containers.
func (a *Actor) inventory(ctx context.Context) (Inventory, error) {
	live, err := supervisors.LiveLeases(ctx, a.Tree, a.Settings.RegistryPath, a.Settings.AskTimeout)
	if err != nil {
		return Inventory{}, err
	}
	provs, err := supervisors.Ask(ctx, a.Tree, a.Settings.RegistryPath, a.Settings.AskTimeout, func(r chan<- messages.ProvisionsReply) any {
		return &messages.ListProvisions{Leases: slices.Sorted(maps.Keys(live)), Reply: r}
	})
	if err != nil {
		return Inventory{}, fmt.Errorf("list provisions: %w", err)
	}
	ready := map[string]bool{}
	for _, p := range provs.Provisions {
		if p.Status == messages.StatusReady {
			ready[p.LeaseUUID] = true
		}
	}
	containers, err := a.Engine.ListManaged(ctx)
	if err != nil {
		return Inventory{}, errors.Join(messages.ErrUnavailable, err)
	}
	return Classify(live, ready, containers), nil
}

func newID() string { return uuid.NewString() }
