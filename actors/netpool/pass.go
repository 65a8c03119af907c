package netpool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sync/errgroup"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/supervisors"
)

type binding struct{ network, lease string }

// passIn is what a pass works from: a copy of the actor's view at its start.
type passIn struct {
	bound   []binding       // committed bindings
	pending map[string]bool // claimed, commit in flight: bound soon
	free    map[string]bool
	trim    []string
	want    int
	created func(dockerio.Network) // tells the actor of a network just made
}

// networkCreated is one network a running pass made, handed out at once.
type networkCreated struct{ net dockerio.Network }

// findings are what a pass saw and did, folded into the pool by end.
type findings struct {
	listed    []dockerio.Network
	listOK    bool
	closed    []binding // bound to a lease the registry no longer lists
	released  []binding
	vanished  []binding
	created   []dockerio.Network
	trimmed   []string // removal attempted (removed, or adopted again if it failed)
	exhausted bool
	more      bool
	err       error
}

// begin takes the pass's input from the pool as it stands.
func (a *Actor) begin() func(context.Context) supervisors.Outcome {
	in := passIn{pending: map[string]bool{}, free: map[string]bool{}, trim: a.trim, want: a.Settings.Size}
	a.trim = nil
	clear(a.made)
	for n, l := range a.st.Bound {
		in.bound = append(in.bound, binding{n, l})
	}
	for l := range a.st.Bridged {
		in.bound = append(in.bound, binding{bridgedNetwork, l})
	}
	slices.SortFunc(in.bound, func(x, y binding) int { return strings.Compare(x.network, y.network) })
	for _, p := range a.claims.Items() {
		in.pending[p.network] = true
	}
	for _, id := range a.free {
		in.free[id] = true
	}
	// Each network joins the free list as soon as it exists: a refill can take
	// the whole idle budget, and a burst arriving meanwhile should get the
	// networks already made rather than create its own.
	in.created = func(n dockerio.Network) { a.tasks.Send(networkCreated{net: n}) }
	done := make(chan findings, 1) // a stopping pool waits on it (stop.go)
	a.passDone = done
	return func(ctx context.Context) supervisors.Outcome {
		f := a.run(ctx, in)
		done <- f
		return supervisors.Outcome{Err: f.err, Again: f.more, Value: f}
	}
}

// run is one pass, off the actor.
func (a *Actor) run(ctx context.Context, in passIn) findings {
	var out findings
	eng := a.Engine
	live, liveErr := supervisors.LiveLeases(ctx, a.Tree, a.Settings.RegistryPath, 10*time.Second)
	listed, err := eng.PoolNetworks(ctx)
	if err != nil {
		out.err = fmt.Errorf("list pool networks: %w", err)
		return out
	}
	out.listed, out.listOK = listed, true
	bound := map[string]bool{}
	for _, b := range in.bound {
		bound[b.network] = true
	}
	if liveErr != nil {
		out.err = liveErr // nothing is released without the registry's word
	} else {
		var gone []binding
		for _, b := range in.bound {
			if !live[b.lease] {
				gone = append(gone, b)
			}
		}
		out.closed = gone
		a.settle(ctx, gone, &out)
	}
	waited := time.Duration(0)
	out.trimmed = a.remove(ctx, in.trim, &waited, a.halt)
	// What the pool will hold free after this pass, before creating.
	trimmed := map[string]bool{}
	for _, id := range in.trim {
		trimmed[id] = true
	}
	have := 0
	for _, b := range out.released {
		if b.network != bridgedNetwork {
			have++
		}
	}
	for _, n := range listed {
		if in.free[n.ID] || (!bound[n.ID] && !in.pending[n.ID] && !trimmed[n.ID]) {
			have++
		}
	}
	for have < in.want && ctx.Err() == nil {
		if waited += a.waitIdle(ctx, a.Settings.IdleWait-waited); isClosed(a.halt) {
			break // the pool is stopping: it makes nothing more
		}
		n, err := eng.CreatePoolNetwork(ctx)
		if errdefs.IsResourceExhausted(err) {
			out.exhausted = true
			break
		}
		if err != nil {
			a.Metrics.ops.WithLabelValues("create_error").Inc()
			out.err = errors.Join(out.err, fmt.Errorf("create pool network: %w", err))
			break
		}
		a.Metrics.ops.WithLabelValues("created").Inc()
		out.created = append(out.created, n)
		if in.created != nil {
			in.created(n)
		}
		have++
	}
	out.more = have < in.want && ctx.Err() != nil && !out.exhausted
	return out
}

// settle checks the networks of gone leases, four at a time (after a mass
// close every lease's network is due, two requests each), and records which
// can carry another lease, which vanished, and which are still in use.
func (a *Actor) settle(ctx context.Context, gone []binding, out *findings) {
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(removeParallel)
	for _, b := range gone {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			free, err := a.reusable(ctx, b)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errdefs.IsNotFound(err):
				out.vanished = append(out.vanished, b)
			case err != nil:
				out.err = errors.Join(out.err, err)
			case free:
				out.released = append(out.released, b)
			default:
				a.Metrics.ops.WithLabelValues("in_use").Inc()
			}
			return nil
		})
	}
	_ = g.Wait() // each outcome is recorded above; none stops the others
}

// inFlight is an engine that reports how many requests berthd has in flight.
type inFlight interface{ InFlight() int }

// waitIdle waits, at most limit, until the engine has no request in flight,
// and returns how long it waited.
func (a *Actor) waitIdle(ctx context.Context, limit time.Duration) time.Duration {
	eng, ok := a.Engine.(inFlight)
	if !ok || limit <= 0 {
		return 0
	}
	start := time.Now()
	t := time.NewTicker(idlePoll)
	defer t.Stop()
	for eng.InFlight() > 0 && time.Since(start) < limit {
		select {
		case <-t.C:
		case <-ctx.Done():
			return time.Since(start)
		case <-a.halt:
			return time.Since(start)
		}
	}
	return time.Since(start)
}

// idlePoll is how often waitIdle samples the engine.
const idlePoll = 50 * time.Millisecond

// reusable reports whether a gone lease's pool network can carry another lease:
// ours still, no endpoint attached and no container of that lease left in any
// state (a stopped one would rejoin it if ever started). ErrNotFound: it is gone.
// A slot of the default bridge is free again once no container of the lease
// is left.
func (a *Actor) reusable(ctx context.Context, b binding) (bool, error) {
	if b.network != bridgedNetwork {
		n, err := a.Engine.InspectNetwork(ctx, b.network)
		if err != nil {
			return false, err
		}
		if !labels.OwnedPoolNetwork(n.Name, n.Labels, a.Settings.BackendName, a.Settings.InstallationID) {
			return false, fmt.Errorf("pool network %s is no longer ours: %w", b.network, errdefs.ErrNotFound)
		}
		if n.Containers > 0 {
			return false, nil
		}
	}
	cohort, err := a.Engine.Launched(ctx, b.lease)
	if err != nil {
		return false, fmt.Errorf("containers of lease %s: %w", b.lease, err)
	}
	return len(cohort) == 0, nil
}

// remove removes the surplus in batches of four, each batch once berthd has no
// other Engine API request in flight (within the pass's idle budget): a burst's
// starts and the reclaimer's removals of closed leases' own networks come
// first. Batches, not a rolling four, because the pool's own removals count as
// in flight. It stops between batches once halt is closed, and returns what it
// attempted.
func (a *Actor) remove(ctx context.Context, ids []string, waited *time.Duration, halt <-chan struct{}) []string {
	var tried []string
	for len(ids) > 0 && ctx.Err() == nil {
		if *waited += a.waitIdle(ctx, a.Settings.IdleWait-*waited); isClosed(halt) {
			break
		}
		batch := ids[:min(len(ids), removeParallel)]
		ids = ids[len(batch):]
		tried = append(tried, batch...)
		var wg sync.WaitGroup
		for _, id := range batch {
			wg.Go(func() {
				if err := a.Engine.RemoveNetwork(ctx, id); err != nil {
					a.Log.Warn().Err(err).Str("network", id).Msg("remove surplus pool network")
					return
				}
				a.Metrics.ops.WithLabelValues("removed").Inc()
			})
		}
		wg.Wait()
	}
	return tried
}

// removeParallel is how many surplus removals go to dockerd at once: a mass
// close's surplus can be hundreds, and dockerd removes about twice as many a
// second four at a time as one at a time (measured: 3.7/s at ~420 networks).
const removeParallel = 4

// end folds a pass's findings into the pool. New surplus goes at once (Again);
// surplus a pass already tried to remove (Docker refused) waits for the next
// scheduled pass rather than spinning.
func (a *Actor) end(out *supervisors.Outcome) {
	m := out.Value.(findings)
	for _, b := range m.closed {
		if a.st.holds(b) {
			a.closed[b.lease] = true
		}
	}
	released := a.unbind(m.released, m.vanished)
	if m.listOK {
		a.reconcileFree(m)
	}
	for _, n := range m.created {
		a.addCreated(n) // normally already in by networkCreated
	}
	// Keep Size free; the surplus (a mass close's released networks) goes.
	if len(a.free) > a.Settings.Size {
		a.trim = append(a.trim, a.free[a.Settings.Size:]...)
		a.free = slices.Clone(a.free[:a.Settings.Size])
	}
	if m.exhausted && !a.exhausted {
		a.Log.Warn().Int("free", len(a.free)).Int("want", a.Settings.Size).Msg("Docker's address pools are full; the network pool stays short")
	}
	a.exhausted = m.exhausted
	a.gauges()
	out.Detail = fmt.Sprintf("%d free, %d bound, %d created, %d released, %d trimmed", len(a.free), len(a.st.Bound),
		len(m.created), len(released), len(m.trimmed))
	if m.err != nil {
		a.Log.Warn().Err(m.err).Msg("network pool pass incomplete")
	}
	out.Again = out.Again || newSurplus(a.trim, m.trimmed)
}

// unbind journals the release of the networks found free and the drop of those
// found gone (each still bound to the lease it was checked for), and returns
// the released ones (none when the commit failed).
func (a *Actor) unbind(free, vanished []binding) map[string]bool {
	var evs []bindEvent
	released, slots := map[string]bool{}, 0
	for _, b := range free {
		switch {
		case !a.st.holds(b):
			continue
		case b.network == bridgedNetwork:
			slots++
		default:
			released[b.network] = true
		}
		evs = append(evs, unbindEvent(b, ReasonReleased))
	}
	for _, b := range vanished {
		if a.st.holds(b) {
			evs = append(evs, unbindEvent(b, ReasonDropped))
		}
	}
	if len(evs) == 0 {
		return released
	}
	if err := a.commit(evs); err != nil {
		return nil
	}
	a.Metrics.ops.WithLabelValues("released").Add(float64(len(released)))
	a.Metrics.ops.WithLabelValues("bridge_released").Add(float64(slots))
	a.Metrics.ops.WithLabelValues("vanished").Add(float64(len(evs) - len(released) - slots))
	return released
}

// newSurplus reports whether trim holds a network the pass did not try to
// remove: a release's surplus, or what the pass's budget left.
func newSurplus(trim, tried []string) bool {
	seen := make(map[string]bool, len(tried))
	for _, id := range tried {
		seen[id] = true
	}
	for _, id := range trim {
		if !seen[id] {
			return true
		}
	}
	return false
}

// addCreated puts a network this pass made on the free list, once.
func (a *Actor) addCreated(n dockerio.Network) {
	if _, seen := a.made[n.ID]; seen {
		return
	}
	a.made[n.ID] = struct{}{}
	a.names[n.ID] = n.Name
	a.free = append(a.free, n.ID)
}

// reconcileFree makes the free list what Docker holds: free networks Docker no
// longer lists are forgotten, unbound pool networks it lists are adopted, and
// released ones join.
func (a *Actor) reconcileFree(m findings) {
	listed := map[string]bool{}
	for _, n := range m.listed {
		listed[n.ID] = true
		a.names[n.ID] = n.Name
	}
	known := map[string]bool{}
	kept := a.free[:0]
	for _, id := range a.free {
		_, made := a.made[id]
		if listed[id] || made {
			kept = append(kept, id)
			known[id] = true
		}
	}
	a.free = kept
	for _, id := range a.trim {
		known[id] = true
	}
	for _, id := range m.trimmed {
		known[id] = true
	}
	for _, p := range a.claims.Items() {
		known[p.network] = true
	}
	for _, n := range m.listed {
		// Unbound and ours: just released, or free before a restart.
		if !known[n.ID] && a.st.Bound[n.ID] == "" {
			a.free = append(a.free, n.ID)
		}
	}
	// Every free network is listed by now, or made by this pass.
	for id := range a.names {
		if _, made := a.made[id]; !made && !listed[id] && a.st.Bound[id] == "" {
			delete(a.names, id)
		}
	}
}
