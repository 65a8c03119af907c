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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Stream is the pool's journal stream.
const Stream = "netpool"

// Events, version 1.
const (
	EvBound   = "pool.bound"   // a pool network is bound to a lease
	EvUnbound = "pool.unbound" // its lease is gone and nothing is attached (released), or it vanished (dropped)
)

// Unbind reasons.
const (
	ReasonReleased = "released"
	ReasonDropped  = "dropped"
)

const eventVersion = 1

type bindEvent struct {
	Network string `json:"network"`
	Lease   string `json:"lease"`
	Reason  string `json:"reason,omitempty"`
}

// State is the bindings: pool network ID → lease.
type State struct {
	Bound map[string]string `json:"bound"`
}

func newState() *State { return &State{Bound: map[string]string{}} }

// Apply folds one event into the state.
func (s *State) Apply(ev persistence.Event) error {
	if ev.V != eventVersion {
		return fmt.Errorf("event %s: version %d not supported (this berthd reads %d)", ev.Type, ev.V, eventVersion)
	}
	var e bindEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil || e.Network == "" || e.Lease == "" {
		return fmt.Errorf("event %s: malformed", ev.Type)
	}
	switch ev.Type {
	case EvBound:
		if l, ok := s.Bound[e.Network]; ok {
			return fmt.Errorf("event %s: %s is already bound to %s", ev.Type, e.Network, l)
		}
		s.Bound[e.Network] = e.Lease
	case EvUnbound:
		if s.Bound[e.Network] != e.Lease {
			return fmt.Errorf("event %s: %s is not bound to %s", ev.Type, e.Network, e.Lease)
		}
		delete(s.Bound, e.Network)
	default:
		return fmt.Errorf("event type %q unknown to this berthd", ev.Type)
	}
	return nil
}

// Load rebuilds the bindings from the stream.
func Load(store *persistence.Store) (*State, uint64, error) {
	st := newState()
	seq, err := store.LoadState(Stream, eventVersion, st, func() {
		if st.Bound == nil {
			st.Bound = map[string]string{}
		}
	}, st.Apply)
	if err != nil {
		return nil, 0, err
	}
	return st, seq, nil
}

// Settings of the pool.
type Settings struct {
	Size     int           // network_pool_size: free networks kept ready
	Interval time.Duration // reconcile_interval: a pass at least this often
	Quiet    time.Duration // a close or a claim asks for a pass once claims paused this long
	Budget   time.Duration // one pass
	// IdleWait is how long one pass may wait, in all, for berthd to have no
	// Engine API request in flight before each create or surplus removal (an
	// engine that reports InFlight): the refill then fills the gaps of a burst
	// instead of competing with its container starts, and the trim of a mass
	// close's surplus lets the reclaimer's removals go first. 0: at once.
	IdleWait       time.Duration
	RegistryPath   string
	BackendName    string
	InstallationID string
	SnapshotEvery  int // 0 = 256
}

// Deps are the pool's collaborators.
type Deps struct {
	Store    *persistence.Store
	Engine   dockerio.Engine
	Tree     *supervisors.Tree
	Settings *Settings
	Metrics  *Metrics
	Log      zerolog.Logger
	Now      func() time.Time
}

// Actor is the network pool.
type Actor struct {
	deps    *Deps
	set     *Settings
	log     zerolog.Logger
	st      *State
	journal persistence.Cursor
	byLease map[string]string   // lease → bound network (index of st.Bound)
	names   map[string]string   // network ID → name, as listed or created
	made    map[string]struct{} // networks made since the running pass began (by it, or by a lease): its listing may miss them
	free    []string            // unbound networks ready to hand out, oldest first
	pending []*pendingClaim     // bound in memory, awaiting the batch commit
	trim    []string            // surplus to remove in the next pass
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	passes  supervisors.Passes
	epoch   uint64

	soon      bool      // a pass is scheduled
	lastClaim time.Time // claims in the last Quiet postpone a scheduled pass
	exhausted bool      // the last refill met Docker's address-pool limit
	failed    bool      // the journal did not load: inert until the tree goes down
}

type pendingClaim struct {
	lease, network string
	made           bool // the lease created it (the pool was empty)
	waiters        []chan<- messages.NetworkClaim
}

var epochs atomic.Uint64

type (
	tick        struct{ epoch uint64 }
	soonTick    struct{ epoch uint64 }
	flushClaims struct{ epoch uint64 }
)

// New returns the producer of the pool.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{deps: deps, set: deps.Settings, log: deps.Log.With().Str("actor", "netpool").Logger()}
	}
}

// Receive handles the pool's messages.
func (a *Actor) Receive(c actor.Context) {
	if a.failed {
		switch m := c.Message().(type) {
		case *messages.ClaimNetwork:
			m.Reply <- messages.NetworkClaim{}
		case *messages.GetPass:
			m.Reply <- a.passes.Report("netpool", a.set.Interval)
		case *actor.Started:
			a.started(c)
		case *actor.Restarting, *actor.Stopping:
			a.cancel()
			a.wg.Wait()
		}
		return
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *actor.Restarting, *actor.Stopping:
		a.abandonPending()
		if a.cancel != nil {
			a.cancel()
		}
		a.wg.Wait()
	case *messages.ClaimNetwork:
		a.claim(c, m)
	case flushClaims:
		if m.epoch == a.epoch {
			a.flush()
		}
	case *messages.DropNetwork:
		a.drop(m)
	case *messages.LeaseGone:
		a.schedule(c)
	case tick:
		if m.epoch == a.epoch {
			a.pass(c)
		}
	case soonTick:
		if m.epoch != a.epoch {
			return
		}
		a.soon = false
		if wait := a.set.Quiet - a.deps.Now().Sub(a.lastClaim); wait > 0 {
			a.after(c, wait)
			return
		}
		a.pass(c)
	case networkCreated:
		if m.epoch == a.epoch {
			a.addCreated(m.net)
			a.gauges()
		}
	case passDone:
		if m.epoch == a.epoch {
			a.finish(c, m)
		}
	case *messages.GetPass:
		m.Reply <- a.passes.Report("netpool", a.set.Interval)
	}
}

// Describe summarises the pool for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.st == nil {
		return "loading", 0
	}
	// The last pass's outcome is on /debug/freshness (GetPass); this stays one
	// steady line for the tree views.
	return fmt.Sprintf("%d free, %d bound, %d claims committing", len(a.free), len(a.st.Bound), len(a.pending)),
		a.passes.InFlight()
}

func (a *Actor) started(c actor.Context) {
	a.epoch = epochs.Add(1)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.byLease, a.names, a.made = map[string]string{}, map[string]string{}, map[string]struct{}{}
	a.free, a.pending, a.trim = nil, nil, nil
	st, seq, err := Load(a.deps.Store)
	if err != nil {
		// Without the bindings every pool network would look free: hand out
		// nothing, pass never, until the failed tree is drained.
		a.failed = true
		a.deps.Tree.Fail(fmt.Errorf("netpool: %w", err))
		a.st = newState()
		return
	}
	a.failed = false
	a.st = st
	every := a.set.SnapshotEvery
	if every <= 0 {
		every = 256
	}
	a.journal = persistence.Cursor{Stream: Stream, Seq: seq, Every: every}
	for n, l := range st.Bound {
		a.byLease[l] = n
	}
	a.gauges()
	supervisors.Tick(c, a.ctx, &a.wg, a.set.Interval, tick{epoch: a.epoch})
	a.pass(c)
}

// claim answers with the lease's bound network, or binds a free one (answered
// once the batch commit lands), or answers empty when none is free.
func (a *Actor) claim(c actor.Context, m *messages.ClaimNetwork) {
	made := a.takeMade(m)
	if id, ok := a.byLease[m.Lease]; ok {
		a.deps.Metrics.claims.WithLabelValues("rebound").Inc()
		a.keepFree(made)
		m.Reply <- messages.NetworkClaim{ID: id, Name: a.names[id]}
		return
	}
	for _, p := range a.pending {
		if p.lease == m.Lease {
			p.waiters = append(p.waiters, m.Reply)
			a.keepFree(made)
			return
		}
	}
	if !m.Bind {
		m.Reply <- messages.NetworkClaim{}
		return
	}
	a.lastClaim = a.deps.Now()
	id := made
	switch {
	case id != "":
	case len(a.free) == 0:
		a.deps.Metrics.claims.WithLabelValues("empty").Inc()
		m.Reply <- messages.NetworkClaim{}
		a.schedule(c)
		return
	default:
		id = a.free[0]
		a.free = a.free[1:]
	}
	a.pending = append(a.pending, &pendingClaim{lease: m.Lease, network: id, made: made != "", waiters: []chan<- messages.NetworkClaim{m.Reply}})
	if len(a.pending) == 1 {
		// Claims already in the mailbox join this commit.
		c.Send(c.Self(), flushClaims{epoch: a.epoch})
	}
	if len(a.free) < a.set.Size {
		a.schedule(c)
	}
}

// takeMade returns the network a claim made itself when the pool may bind it:
// not bound, not being bound, and taken off the free list and the trim if a
// pass adopted it between its create and this claim. "": none, or it went to
// another lease meanwhile (the claim is then an ordinary one).
func (a *Actor) takeMade(m *messages.ClaimNetwork) string {
	id := m.Made
	if id == "" {
		return ""
	}
	if _, bound := a.st.Bound[id]; bound {
		return ""
	}
	for _, p := range a.pending {
		if p.network == id {
			return ""
		}
	}
	a.names[id] = m.MadeName
	a.free = slices.DeleteFunc(a.free, func(f string) bool { return f == id })
	a.trim = slices.DeleteFunc(a.trim, func(f string) bool { return f == id })
	return id
}

// keepFree puts a network a lease made but does not need on the free list.
// Marked made: a pass listing from before its create must not forget it.
func (a *Actor) keepFree(id string) {
	if id != "" {
		a.made[id] = struct{}{}
		a.free = append(a.free, id)
		a.gauges()
	}
}

// flush journals every pending claim in one commit, then answers them.
func (a *Actor) flush() {
	batch := a.pending
	a.pending = nil
	if len(batch) == 0 {
		return
	}
	evs := make([]bindEvent, len(batch))
	for i, p := range batch {
		evs[i] = bindEvent{Network: p.network, Lease: p.lease}
	}
	if err := a.commit(EvBound, evs); err != nil {
		ids := make([]string, len(batch))
		for i, p := range batch {
			ids[i] = p.network
			for _, w := range p.waiters {
				w <- messages.NetworkClaim{Err: fmt.Errorf("bind pool network: %w", err)}
			}
		}
		a.free = append(ids, a.free...)
		a.deps.Metrics.claims.WithLabelValues("error").Add(float64(len(batch)))
		return
	}
	for _, p := range batch {
		for _, w := range p.waiters {
			w <- messages.NetworkClaim{ID: p.network, Name: a.names[p.network]}
		}
		if p.made {
			a.deps.Metrics.claims.WithLabelValues("made").Inc()
		} else {
			a.deps.Metrics.claims.WithLabelValues("warm").Inc()
		}
	}
}

// abandonPending answers claims that will not be committed: their leases
// create their own networks; the networks stay in Docker, adopted next start.
func (a *Actor) abandonPending() {
	for _, p := range a.pending {
		for _, w := range p.waiters {
			w <- messages.NetworkClaim{}
		}
	}
	a.pending = nil
}

// drop forgets a binding its lease found unusable; the network is never handed
// out again (a pass finds it gone, or adopts it back only if Docker still lists
// it unbound — then it is ours and empty).
func (a *Actor) drop(m *messages.DropNetwork) {
	if m.ID == "" {
		a.abandon(m.Lease)
		return
	}
	if a.st.Bound[m.ID] != m.Lease {
		return
	}
	if err := a.commit(EvUnbound, []bindEvent{{Network: m.ID, Lease: m.Lease, Reason: ReasonDropped}}); err == nil {
		a.deps.Metrics.ops.WithLabelValues("dropped").Inc()
		a.log.Warn().Str("lease", m.Lease).Str("network", m.ID).Msg("bound pool network unusable; binding dropped")
	}
}

// abandon takes back the network of a first attempt that gave up waiting for
// its claim: no lease ever learned its ID, so it is free again at once.
func (a *Actor) abandon(lease string) {
	// Still in the batch (the give-up overtook the commit): never bound at all.
	for i, p := range a.pending {
		if p.lease == lease {
			a.pending = slices.Delete(a.pending, i, i+1)
			for _, w := range p.waiters {
				w <- messages.NetworkClaim{}
			}
			a.free = append(a.free, p.network)
			a.gauges()
			return
		}
	}
	id, ok := a.byLease[lease]
	if !ok {
		return
	}
	if err := a.commit(EvUnbound, []bindEvent{{Network: id, Lease: lease, Reason: ReasonReleased}}); err == nil {
		a.free = append(a.free, id)
		a.gauges()
	}
}

func (a *Actor) commit(typ string, evs []bindEvent) error {
	at := a.deps.Now()
	events := make([]persistence.Event, len(evs))
	for i, e := range evs {
		data, _ := json.Marshal(e)
		events[i] = persistence.Event{Type: typ, V: eventVersion, At: at, Data: data}
	}
	res, err := a.deps.Store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: Stream, Events: events}}})
	if err != nil {
		a.log.Error().Err(err).Msg("journal write failed")
		return err
	}
	due := a.journal.Advance(res, len(events))
	for i, ev := range events {
		if err := a.st.Apply(ev); err != nil {
			a.log.Error().Err(err).Msg("journaled event does not apply")
			continue
		}
		if typ == EvBound {
			a.byLease[evs[i].Lease] = evs[i].Network
		} else {
			delete(a.byLease, evs[i].Lease)
		}
	}
	if due {
		if err := a.journal.Snapshot(a.deps.Store, eventVersion, at, a.st); err != nil {
			a.log.Warn().Err(err).Msg("snapshot")
		}
	}
	a.gauges()
	return nil
}

// schedule asks for a pass once claims have paused for Quiet.
func (a *Actor) schedule(c actor.Context) {
	if a.soon {
		return
	}
	a.soon = true
	a.after(c, a.set.Quiet)
}

func (a *Actor) after(c actor.Context, d time.Duration) {
	a.soon = true
	self, sys, epoch := c.Self(), c.ActorSystem(), a.epoch
	time.AfterFunc(d, func() { sys.Root.Send(self, soonTick{epoch: epoch}) })
}

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
type networkCreated struct {
	epoch uint64
	net   dockerio.Network
}

type passDone struct {
	epoch     uint64
	listed    []dockerio.Network
	listOK    bool
	released  []binding
	vanished  []binding
	created   []dockerio.Network
	trimmed   []string // removal attempted (removed, or adopted again if it failed)
	exhausted bool
	more      bool
	err       error
}

func (a *Actor) pass(c actor.Context) {
	if a.passes.Running() { // its input is taken: another follows it
		a.passes.AskAgain()
		return
	}
	in := passIn{pending: map[string]bool{}, free: map[string]bool{}, trim: a.trim, want: a.set.Size}
	a.trim = nil
	clear(a.made)
	for n, l := range a.st.Bound {
		in.bound = append(in.bound, binding{n, l})
	}
	slices.SortFunc(in.bound, func(x, y binding) int { return strings.Compare(x.network, y.network) })
	for _, p := range a.pending {
		in.pending[p.network] = true
	}
	for _, id := range a.free {
		in.free[id] = true
	}
	epoch, parent := a.epoch, a.ctx
	sys, self := c.ActorSystem(), c.Self()
	// Each network joins the free list as soon as it exists: a refill can take
	// the whole idle budget, and a burst arriving meanwhile should get the
	// networks already made rather than create its own.
	in.created = func(n dockerio.Network) { sys.Root.Send(self, networkCreated{epoch: epoch, net: n}) }
	a.passes.Start(c, &a.wg, func() any {
		ctx, cancel := context.WithTimeout(parent, a.set.Budget)
		defer cancel()
		out := a.run(ctx, in)
		out.epoch = epoch
		out.more = out.more && parent.Err() == nil
		return out
	})
}

// run is one pass, off the actor.
func (a *Actor) run(ctx context.Context, in passIn) passDone {
	var out passDone
	eng := a.deps.Engine
	live, liveErr := supervisors.LiveLeases(ctx, a.deps.Tree, a.set.RegistryPath, 10*time.Second)
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
		// Checked four at a time: after a mass close every lease's network is
		// due, two requests each.
		var mu sync.Mutex
		var g errgroup.Group
		g.SetLimit(removeParallel)
		for _, b := range in.bound {
			if live[b.lease] || ctx.Err() != nil {
				continue
			}
			g.Go(func() error {
				free, err := a.reusable(ctx, b)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, dockerio.ErrNotFound):
					out.vanished = append(out.vanished, b)
				case err != nil:
					out.err = err
				case free:
					out.released = append(out.released, b)
				default:
					a.deps.Metrics.ops.WithLabelValues("in_use").Inc()
				}
				return nil
			})
		}
		_ = g.Wait() // each outcome is recorded above; none stops the others
	}
	waited := time.Duration(0)
	out.trimmed = a.remove(ctx, in.trim, &waited)
	// What the pool will hold free after this pass, before creating.
	trimmed := map[string]bool{}
	for _, id := range in.trim {
		trimmed[id] = true
	}
	have := len(out.released)
	for _, n := range listed {
		if in.free[n.ID] || (!bound[n.ID] && !in.pending[n.ID] && !trimmed[n.ID]) {
			have++
		}
	}
	for have < in.want && ctx.Err() == nil {
		waited += a.waitIdle(ctx, a.set.IdleWait-waited)
		n, err := eng.CreatePoolNetwork(ctx)
		if errors.Is(err, dockerio.ErrAddressPoolExhausted) {
			out.exhausted = true
			break
		}
		if err != nil {
			a.deps.Metrics.ops.WithLabelValues("create_error").Inc()
			out.err = errors.Join(out.err, fmt.Errorf("create pool network: %w", err))
			break
		}
		a.deps.Metrics.ops.WithLabelValues("created").Inc()
		out.created = append(out.created, n)
		if in.created != nil {
			in.created(n)
		}
		have++
	}
	out.more = have < in.want && ctx.Err() != nil && !out.exhausted
	return out
}

// inFlight is an engine that reports how many requests berthd has in flight.
type inFlight interface{ InFlight() int }

// waitIdle waits, at most limit, until the engine has no request in flight,
// and returns how long it waited.
func (a *Actor) waitIdle(ctx context.Context, limit time.Duration) time.Duration {
	eng, ok := a.deps.Engine.(inFlight)
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
		}
	}
	return time.Since(start)
}

// idlePoll is how often waitIdle samples the engine.
const idlePoll = 50 * time.Millisecond

// reusable reports whether a gone lease's pool network can carry another lease:
// ours still, no endpoint attached and no container of that lease left in any
// state (a stopped one would rejoin it if ever started). ErrNotFound: it is gone.
func (a *Actor) reusable(ctx context.Context, b binding) (bool, error) {
	n, err := a.deps.Engine.InspectNetwork(ctx, b.network)
	if err != nil {
		return false, err
	}
	if !labels.OwnedPoolNetwork(n.Name, n.Labels, a.set.BackendName, a.set.InstallationID) {
		return false, fmt.Errorf("pool network %s is no longer ours: %w", b.network, dockerio.ErrNotFound)
	}
	if n.Containers > 0 {
		return false, nil
	}
	cohort, err := a.deps.Engine.Launched(ctx, b.lease)
	if err != nil {
		return false, fmt.Errorf("containers of lease %s: %w", b.lease, err)
	}
	return len(cohort) == 0, nil
}

// remove removes the surplus in batches of four, each batch once berthd has no
// other Engine API request in flight (within the pass's idle budget): a burst's
// starts and the reclaimer's removals of closed leases' own networks come
// first. Batches, not a rolling four, because the pool's own removals count as
// in flight. It returns what it attempted.
func (a *Actor) remove(ctx context.Context, ids []string, waited *time.Duration) []string {
	var tried []string
	for len(ids) > 0 && ctx.Err() == nil {
		*waited += a.waitIdle(ctx, a.set.IdleWait-*waited)
		batch := ids[:min(len(ids), removeParallel)]
		ids = ids[len(batch):]
		tried = append(tried, batch...)
		var wg sync.WaitGroup
		for _, id := range batch {
			wg.Go(func() {
				if err := a.deps.Engine.RemoveNetwork(ctx, id); err != nil {
					a.log.Warn().Err(err).Str("network", id).Msg("remove surplus pool network")
					return
				}
				a.deps.Metrics.ops.WithLabelValues("removed").Inc()
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

// finish folds a pass's findings into the pool.
func (a *Actor) finish(c actor.Context, m passDone) {
	var unbind []bindEvent
	released := map[string]bool{}
	for _, b := range m.released {
		if a.st.Bound[b.network] == b.lease {
			unbind = append(unbind, bindEvent{Network: b.network, Lease: b.lease, Reason: ReasonReleased})
			released[b.network] = true
		}
	}
	for _, b := range m.vanished {
		if a.st.Bound[b.network] == b.lease {
			unbind = append(unbind, bindEvent{Network: b.network, Lease: b.lease, Reason: ReasonDropped})
		}
	}
	if len(unbind) > 0 {
		if err := a.commit(EvUnbound, unbind); err != nil {
			released = nil
		} else {
			a.deps.Metrics.ops.WithLabelValues("released").Add(float64(len(released)))
			a.deps.Metrics.ops.WithLabelValues("vanished").Add(float64(len(unbind) - len(released)))
		}
	}
	if m.listOK {
		a.reconcileFree(m)
	}
	for _, n := range m.created {
		a.addCreated(n) // normally already in by networkCreated
	}
	// Keep Size free; the surplus (a mass close's released networks) goes.
	if len(a.free) > a.set.Size {
		a.trim = append(a.trim, a.free[a.set.Size:]...)
		a.free = slices.Clone(a.free[:a.set.Size])
	}
	if m.exhausted && !a.exhausted {
		a.log.Warn().Int("free", len(a.free)).Int("want", a.set.Size).Msg("Docker's address pools are full; the network pool stays short")
	}
	a.exhausted = m.exhausted
	a.gauges()
	detail := fmt.Sprintf("%d free, %d bound, %d created, %d released, %d trimmed", len(a.free), len(a.st.Bound),
		len(m.created), len(released), len(m.trimmed))
	if m.err != nil {
		a.log.Warn().Err(m.err).Msg("network pool pass incomplete")
	}
	// New surplus goes at once; surplus a pass already tried to remove (Docker
	// refused) waits for the next scheduled pass rather than spinning.
	if a.passes.Finish(m.err, detail) || m.more || newSurplus(a.trim, m.trimmed) {
		a.pass(c)
	}
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
func (a *Actor) reconcileFree(m passDone) {
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
	for _, p := range a.pending {
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

func (a *Actor) gauges() {
	a.deps.Metrics.networks.WithLabelValues("free").Set(float64(len(a.free)))
	a.deps.Metrics.networks.WithLabelValues("bound").Set(float64(len(a.st.Bound)))
}

// Metrics of the network pool.
type Metrics struct {
	networks *prometheus.GaugeVec
	claims   *prometheus.CounterVec
	ops      *prometheus.CounterVec
}

// NewMetrics registers the pool's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		networks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "berth_network_pool_networks",
			Help: "Warm-pool lease networks by state (free: ready to hand out; bound: held by a lease)."}, []string{"state"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_network_pool_claims_total",
			Help: "Lease network claims by outcome (warm: a free network bound; made: none was free, the lease created a pool network and it was bound; rebound: the lease's own again; empty: none free; error: not journaled)."},
			[]string{"outcome"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_network_pool_operations_total",
			Help: "Pool network operations (created, create_error, released, vanished, dropped, removed, in_use)."}, []string{"op"}),
	}
	for _, s := range []string{"free", "bound"} {
		m.networks.WithLabelValues(s)
	}
	for _, o := range []string{"warm", "made", "rebound", "empty", "error"} {
		m.claims.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.networks, m.claims, m.ops)
	}
	return m
}
