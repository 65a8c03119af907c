// Package reconciler joins the journals with Docker's inventory: once when the
// registry (re)starts — before /health turns healthy and admissions open — and then
// every reconcile_interval, so a death the event stream missed is still reported.
// It hands each live lease the containers Docker lists for it (the lease actor
// classifies them and disowns those of settled generations), removes containers of
// closed leases by their closed receipt, and counts — never adopts, removes or
// reassigns — managed containers no journal explains. Automatic removal is gentle
// and bounded: exact immutable ID, stopped within container_stop_timeout, removed
// without force and without volumes, at most 100 per pass with 30 s each; the
// inventory itself is never capped. The same pass prunes diagnostics.db once an
// hour (diagnostics_max_age).
package reconciler

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Actor is the reconciler's pass; supervisors.PassActor runs it.
type Actor struct {
	*Deps
	pass    *supervisors.PassActor // its tasks run the cleanup reads
	pruned  time.Time              // last diagnostics prune (pass goroutine only)
	settled time.Time              // last compaction of closed leases' journals (pass goroutine only)
	asked   uint64                 // the newest registry incarnation that asked for a pass (actor only)
}

// New returns the producer of the reconciler: a pass at start, every Interval
// and on RecoverNow.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		a := &Actor{Deps: deps}
		a.pass = &supervisors.PassActor{Spec: supervisors.PassSpec{Name: "reconciler", Interval: a.Settings.Interval,
			Timeout: a.Settings.PassTimeout, Begin: a.begin, End: a.end}, On: a.on}
		return a.pass
	}
}

// on runs a pass on RecoverNow. A registry incarnation asking for the first
// time restarts a running pass: that pass began before it asked, listed its
// predecessor's leases and handed their actors — stopped with it — inventories
// nobody acts on; it would make the new incarnation wait for its ack timeout
// and then vouch for accounting it never did. The registry asks again until
// answered: a pass already serving it is left to finish.
func (a *Actor) on(loop *supervisors.Periodic, msg any) {
	if g, ok := msg.(*messages.GetCleanup); ok {
		a.pass.Tasks().Go("cleanup-read", func(ctx context.Context) any {
			g.Reply <- a.observeCleanup(ctx, g.Lease)
			return nil
		})
		return
	}
	m, ok := msg.(messages.RecoverNow)
	switch {
	case !ok:
	case m.For != 0 && m.For != a.asked:
		a.asked = m.For
		loop.Restart()
	case m.For != 0 && loop.Report().Running:
	default:
		loop.Now()
	}
}

// Result summarises one pass.
type Result struct {
	Leases      int
	Containers  int
	Removed     int // containers of closed leases or settled generations removed
	Backlog     int // removal candidates left for the next pass (cap or failures)
	Unaccounted int
	// UnaccountedFred are fred v0.13's containers of this backend name that
	// no adoption made berthd's — a fred started by mistake; -1: not listed.
	UnaccountedFred int
	Undelivered     int      // leases whose inventory could not be delivered or acknowledged
	Helpers         int      // image helpers a killed daemon left, removed
	Guard           string   // the isolation guard: "ok", "reinstalled" or "failed"
	Bridge          string   // why the default bridge no longer isolates its leases ("" it does, or none run there)
	Lingering       []string // closed leases with containers left after the pass's removals
	Compacted       int      // closed leases' journals compacted to a snapshot of the receipt
	Forgotten       int      // closed leases' streams deleted, their receipts past releases_max_age

	holding map[string]bool // live leases, and leases Docker still lists containers of
}

func (a *Actor) begin() func(ctx context.Context) supervisors.Outcome {
	serving := a.asked
	return func(ctx context.Context) supervisors.Outcome {
		res, err := a.run(ctx, serving)
		detail := fmt.Sprintf("%d leases, %d containers, %d removed, %d left, %d unaccounted",
			res.Leases, res.Containers, res.Removed, res.Backlog, res.Unaccounted)
		if res.UnaccountedFred > 0 {
			detail += fmt.Sprintf(", %d of fred v0.13 unaccounted", res.UnaccountedFred)
		}
		if res.Helpers > 0 { // rare: only after a kill -9
			detail += fmt.Sprintf(", %d image helpers removed", res.Helpers)
		}
		if res.Guard != "ok" && res.Guard != "" {
			detail += ", isolation guard " + res.Guard
		}
		if res.Bridge != "" {
			detail += ", default bridge not isolating: " + res.Bridge
		}
		return supervisors.Outcome{Err: err, Value: res, Detail: detail}
	}
}

// end tells the registry RetryStopped after every pass (Recovered went as
// soon as the pass's accounting was whole).
func (a *Actor) end(out *supervisors.Outcome) {
	res, _ := out.Value.(Result)
	a.Metrics.observe(res, out.Err, a.Now())
	if out.Err != nil {
		a.Log.Warn().Err(out.Err).Msg("reconciliation pass failed")
	}
	a.Tree.Send(a.Settings.RegistryPath, messages.RetryStopped{})
}

// run is one pass, off the actor goroutine: the accounting, then Recovered to
// the registry (only a whole accounting makes it whole; at startup it is what
// turns /health healthy), then the housekeeping no lease waits for — state.db's
// and diagnostics.db's first (local, and judged on this accounting; a pass
// canceled by a restart leaves them to the next), then Docker's and the
// firewall's, which can wait on a busy dockerd or the xtables lock: image
// helpers, the isolation guard (start checked it already).
func (a *Actor) run(ctx context.Context, serving uint64) (Result, error) {
	res, err := a.account(ctx)
	if err != nil {
		return res, err
	}
	a.Tree.Send(a.Settings.RegistryPath, messages.Recovered{For: serving, Lingering: res.Lingering})
	if ctx.Err() == nil {
		a.pruneDiagnostics()
		a.settleClosed(&res)
	}
	a.countFredV013(ctx, &res)
	a.sweepHelpers(ctx, &res)
	a.guardIsolation(ctx, &res)
	a.watchBridge(ctx, &res)
	return res, nil
}

// watchBridge proves, while leases run on Docker's default bridge, that it
// still isolates them: "icc" turned back on under live-restore, or a dockerd
// restarted with --iptables=false, leaves them reaching each other with every
// option still reading isolated. Launches onto it check it too; the leases
// already there are reported loudly (berth_default_bridge_isolated 0, alert
// BerthDefaultBridgeNotIsolating) for the operator to restore the setting.
func (a *Actor) watchBridge(ctx context.Context, res *Result) {
	if !a.Settings.Bridged {
		return
	}
	facts, err := a.Engine.DefaultBridge(ctx)
	switch {
	case err != nil:
		a.Log.Warn().Err(err).Msg("the default bridge could not be read; its isolation is checked again next pass")
		return
	case !facts.Isolated:
		res.Bridge = facts.Reason
		a.Log.Error().Str("reason", facts.Reason).Msg("Docker's default bridge no longer isolates the single-container leases on it: " +
			"they can reach each other; new ones get their own networks. Restore the setting (\"icc\": false, iptables on) and restart dockerd")
	}
	a.Metrics.bridgeIsolated(facts.Isolated)
}

// account hands every live lease its containers, removes what closed receipts
// and the leases' answers let go, and reports what lingers.
func (a *Actor) account(ctx context.Context) (Result, error) {
	var res Result
	isLive, err := supervisors.LiveLeases(ctx, a.Tree, a.Settings.RegistryPath, a.Settings.AckTimeout)
	if err != nil {
		return res, err
	}
	containers, err := a.Engine.ListManaged(ctx)
	if err != nil {
		return res, fmt.Errorf("list containers: %w", err)
	}
	res.Leases, res.Containers = len(isLive), len(containers)
	byLease := make(map[string][]messages.Container)
	res.holding = maps.Clone(isLive)
	for _, ctr := range containers {
		byLease[ctr.Lease] = append(byLease[ctr.Lease], ctr)
		res.holding[ctr.Lease] = true
	}

	// Live leases classify their own containers; wait for every one to act. Each
	// answers with the containers of settled generations it disowns.
	acks := make([]chan messages.InventoryAck, 0, len(isLive))
	for id := range isLive {
		ack := make(chan messages.InventoryAck, 1)
		acks = append(acks, ack)
		a.Tree.Send(a.Settings.RegistryPath, &messages.Deliver{
			Lease: id,
			Msg:   &messages.Inventory{Containers: byLease[id], Reply: ack},
			Dropped: func() {
				ack <- messages.InventoryAck{}
				a.Metrics.undelivered.Inc()
			},
		})
	}
	var remove []string
	timeout := time.NewTimer(a.Settings.AckTimeout)
	defer timeout.Stop()
wait:
	for i, ack := range acks {
		select {
		case got := <-ack:
			remove = append(remove, got.Stale...)
		case <-timeout.C:
			// A lease that closed meanwhile never acts on it; the next pass looks again.
			res.Undelivered = len(acks) - i
			a.Log.Warn().Int("leases", res.Undelivered).Msg("leases did not act on their inventory in time")
			break wait
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}

	closed, err := a.closedOrphans(byLease, isLive, &res)
	if err != nil {
		return res, err
	}
	remove = append(remove, closed...)
	var left []string
	res.Removed, left = a.removeBounded(ctx, remove)
	res.Backlog, res.Lingering = len(left), lingering(byLease, isLive, left)
	return res, nil
}

// closedOrphans are the containers of leases no live lease owns that a closed
// receipt lets go; the rest are counted unaccounted and left alone.
func (a *Actor) closedOrphans(byLease map[string][]messages.Container, isLive map[string]bool, res *Result) (remove []string, err error) {
	var orphans []string
	for id := range byLease {
		if !isLive[id] {
			orphans = append(orphans, id)
		}
	}
	sort.Strings(orphans)
	for _, id := range orphans {
		ctrs := byLease[id]
		closed := false
		if messages.ValidLeaseID(id) {
			if closed, err = a.ClosedReceipt(id); err != nil {
				return nil, fmt.Errorf("read lease %s: %w", id, err)
			}
		}
		if !closed {
			res.Unaccounted += len(ctrs)
			for _, ctr := range ctrs {
				a.Log.Warn().Str("lease_uuid", id).Str("container", ctr.ID).Str("name", ctr.Name).
					Msg("managed container no journal explains; left for an operator")
			}
			continue
		}
		for _, ctr := range ctrs {
			remove = append(remove, ctr.ID)
		}
	}
	return remove, nil
}

// removeBounded stops and removes candidates gently, at most MaxRemovals of them,
// each within RemoveTimeout; what it leaves (the cap, failures) is the backlog for
// the next pass.
func (a *Actor) removeBounded(ctx context.Context, ids []string) (removed int, left []string) {
	for i, id := range ids {
		if i >= a.Settings.MaxRemovals || ctx.Err() != nil {
			left = append(left, ids[i:]...)
			break
		}
		rctx, cancel := context.WithTimeout(ctx, a.Settings.RemoveTimeout)
		err := a.Engine.StopRemove(rctx, id, a.Settings.StopTimeout)
		cancel()
		if err != nil {
			left = append(left, id)
			a.Log.Warn().Err(err).Str("container", id).Msg("automatic removal failed; retried next pass")
			continue
		}
		removed++
		a.Log.Info().Str("container", id).Msg("removed a container of a closed lease or a settled attempt")
	}
	if len(left) > 0 {
		a.Log.Info().Int("left", len(left)).Msg("automatic removals left for the next pass")
	}
	return removed, left
}

// sweepHelpers removes the image helpers a killed daemon left (never
// started, never a lease's: nothing else would). Best effort: a failure waits
// for the next pass and fails nothing.
func (a *Actor) sweepHelpers(ctx context.Context, res *Result) {
	n, err := a.Engine.SweepHelpers(ctx)
	res.Helpers = n
	if err != nil {
		a.Log.Warn().Err(err).Msg("image helpers not swept; retried next pass")
	} else if n > 0 {
		a.Log.Info().Int("helpers", n).Msg("removed image helpers a killed daemon left")
	}
}

// countFredV013 counts what fred v0.13 made under berthd's backend name that
// no adoption made berthd's: a fred started by mistake (berthd locks it out of
// an adopted host's store, but a fred on another copy would create containers
// and take berthd's as its own). Logged loudly, never touched.
func (a *Actor) countFredV013(ctx context.Context, res *Result) {
	ctrs, err := a.Engine.UnadoptedFredV013(ctx)
	if err != nil {
		res.UnaccountedFred = -1
		a.Log.Warn().Err(err).Msg("fred v0.13's containers not listed; retried next pass")
		return
	}
	res.UnaccountedFred = len(ctrs)
	if len(ctrs) == 0 {
		return
	}
	names := make([]string, 0, min(len(ctrs), 10))
	for _, c := range ctrs[:min(len(ctrs), 10)] {
		names = append(names, c.Name)
	}
	a.Log.Error().Int("containers", len(ctrs)).Strs("first", names).
		Msg("containers fred v0.13 made under this backend name that berthd did not adopt: is a fred docker backend running beside berthd? Left for an operator")
}

// guardIsolation puts the host firewall's isolation guard back when something
// removed it (a flushed mangle table, a firewall reload): without it every
// network Docker creates opens a moment in which leases reach each other.
func (a *Actor) guardIsolation(ctx context.Context, res *Result) {
	installed, err := a.Engine.GuardIsolation(ctx)
	switch {
	case err != nil:
		res.Guard = "failed"
		a.Log.Error().Err(err).Msg("isolation guard not in place: while Docker creates a network, leases can reach each other; retried next pass")
	case installed:
		res.Guard = "reinstalled"
		a.Log.Warn().Msg("isolation guard was missing (mangle table changed); put back")
	default:
		res.Guard = "ok"
	}
}

// lingering are the leases no live lease owns with a container left behind: the
// registry holds their pool reservations while those still run.
func lingering(byLease map[string][]messages.Container, isLive map[string]bool, left []string) []string {
	kept := map[string]bool{}
	for _, id := range left {
		kept[id] = true
	}
	var out []string
	for lease, ctrs := range byLease {
		if isLive[lease] {
			continue
		}
		for _, c := range ctrs {
			if kept[c.ID] {
				out = append(out, lease)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// settleClosed bounds what closed leases keep in state.db (ClosedStreams),
// at most once per PruneEvery (or releases_max_age, when shorter) and
// MaxClosedChanges a pass, never touching a
// lease that is live or still has containers: a lease closed CompactAfter ago
// keeps one snapshot of its receipt, one closed ClosedMaxAge
// (releases_max_age) ago is forgotten — a late container of it is then only
// counted, never removed by its receipt.
func (a *Actor) settleClosed(res *Result) {
	if a.ClosedStreams == nil || res.holding == nil {
		return
	}
	now, every := a.Now(), a.Settings.PruneEvery
	if a.Settings.ClosedMaxAge > 0 {
		every = min(every, a.Settings.ClosedMaxAge) // a window shorter than the hour is kept to
	}
	if !a.settled.IsZero() && now.Sub(a.settled) < every {
		return
	}
	a.settled = now
	forgetBefore := time.Time{} // ClosedMaxAge 0: kept forever
	if a.Settings.ClosedMaxAge > 0 {
		forgetBefore = now.Add(-a.Settings.ClosedMaxAge)
	}
	compacted, forgotten, err := a.ClosedStreams(now.Add(-a.Settings.CompactAfter), forgetBefore,
		func(id string) bool { return res.holding[id] }, a.Settings.MaxClosedChanges)
	res.Compacted, res.Forgotten = compacted, forgotten
	a.Metrics.forgotten.Add(float64(forgotten))
	if err != nil {
		a.Log.Warn().Err(err).Msg("settle closed leases' journals")
	} else if compacted+forgotten > 0 {
		a.Log.Info().Int("compacted", compacted).Int("forgotten", forgotten).Msg("closed leases' journals compacted and forgotten")
	}
}

// pruneDiagnostics deletes diagnostics older than diagnostics_max_age, at most once
// per PruneEvery. Diagnostics carry no authority: a failed prune is only logged.
func (a *Actor) pruneDiagnostics() {
	if a.Diag == nil || a.Settings.DiagnosticsMaxAge <= 0 {
		return
	}
	now := a.Now()
	if !a.pruned.IsZero() && now.Sub(a.pruned) < a.Settings.PruneEvery {
		return
	}
	a.pruned = now
	n, err := a.Diag.Prune(now.Add(-a.Settings.DiagnosticsMaxAge))
	if err != nil {
		a.Log.Warn().Err(err).Msg("prune diagnostics")
		return
	}
	a.Metrics.diagPruned.Add(float64(n))
	if n > 0 {
		a.Log.Info().Int("entries", n).Msg("pruned old diagnostics")
	}
}
