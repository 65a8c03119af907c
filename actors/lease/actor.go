// Package lease is the per-lease actor: one event-sourced state machine per lease
// (machine.go, apply.go, decide.go), spawned by the registry. The actor only runs
// what Decide chose: it journals the events with their callback rows in one
// transaction, applies them, then runs the effects. It never blocks its mailbox on
// Docker: Docker work runs on the lease's one worker goroutine (or on short side
// checks), every goroutine named and tracked, and comes back as an Input.
package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Deps are a lease actor's collaborators.
type Deps struct {
	Store    *persistence.Store
	Diag     *persistence.Diagnostics
	Engine   dockerio.Engine
	Settings *Settings
	Log      zerolog.Logger
	Now      func() time.Time
	Metrics  *Metrics // nil: not recorded
	// Volumes are the managed host volumes of stateful services (nil: no volume
	// root; a stateful lease then fails to provision).
	Volumes dockerio.Volumes
	// Preloaded are states startup already replayed (nil: every start loads).
	Preloaded *Preloaded
	// Networks is the warm network pool (nil: every lease creates fred-<lease>).
	Networks NetworkPool
	// Quiet holds a provision's first Engine API request until a burst of
	// admissions has been answered (nil: never held).
	Quiet *supervisors.Quiet
}

// Settings of lease actors, mapped from the config by cmd/berthd.
type Settings struct {
	BackendName      string
	HostAddress      string
	HostBindIP       string
	StorageID        string
	InstallationID   string
	ProvisionTimeout time.Duration
	PullTimeout      time.Duration
	VerifyDuration   time.Duration // startup_verify_duration (0 means 5 s)
	StopTimeout      time.Duration
	HealthPoll       time.Duration // 2 s
	ResumePoll       time.Duration // how often an undecidable provision or maintenance is looked at again
	TeardownRetry    time.Duration
	ReadonlyRootfs   bool
	PidsLimit        int64
	TmpfsSizeMB      int
	OutboxPath       messages.Address // where OutboxWake goes
	VolumeHoldPath   messages.Address // where a busy volume is handed (HoldVolume)
	SnapshotEvery    int              // journal events between snapshots
	WorkerDrain      time.Duration    // how long a stopping actor waits for its goroutines
	ReleasesMaxAge   time.Duration    // releases_max_age
	HistoryBytes     int              // per-lease release history cap (32 MiB)
	RetentionMaxAge  time.Duration    // retention_max_age: a retention record's grace
}

// NetworkPool hands a lease a pre-created network (actors/netpool).
type NetworkPool interface {
	// Claim returns the pool network bound to lease; with bind, a free one is
	// bound when it holds none. "" when there is none to give.
	Claim(ctx context.Context, lease string, bind bool) (id string, err error)
	// Bind binds a pool network the lease's first attempt created because
	// none was free; it answers the network the lease holds ("" when the pool
	// would not bind it: the lease uses its own network).
	Bind(ctx context.Context, lease string, made dockerio.Network) (id string, err error)
	// Drop forgets a bound network the lease found gone or no longer ours
	// ("": whatever a first attempt's unanswered claim bound, unused).
	Drop(lease, id string)
}

// Actor is one lease.
type Actor struct {
	deps *Deps
	set  *Settings
	spec *latest // the latest admission, shared with the producer (spec.go)
	id   string

	st      *State
	journal persistence.Cursor
	worker  *worker        // the lease's one worker, nil when none runs
	timer   uint64         // token of the pending Wait, 0 when none
	side    *goroutines    // named short goroutines (death checks, log reads), lazily made
	waiters []chan<- error // deprovision requests waiting for the closed receipt
	self    *actor.PID
	parent  *actor.PID
	sys     *actor.ActorSystem
	broken  bool // the journal could not be read: refuse everything
}

// worker is the one goroutine a lease may have doing Docker work.
type worker struct {
	epoch  uint64
	kind   WorkKind
	cancel context.CancelFunc
	done   chan struct{}
}

var epochs atomic.Uint64

// New returns the producer of the actor of a lease admitted as spec.
func New(deps *Deps, spec *Spec) actor.Producer {
	cur := &latest{spec: spec}
	return func() actor.Actor { return &Actor{deps: deps, set: deps.Settings, spec: cur, id: cur.spec.Lease} }
}

// Receive dispatches a lease's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *actor.Restarting, *actor.Stopping:
		a.drain()
	case *messages.Deprovision:
		a.deprovision(m)
	case ReprovisionCommand:
		a.spec.take(m.Spec)
		a.step(Reprovision{})
	case *MaintainCommand:
		d := a.step(m.Maintain)
		if len(d.Events) == 0 {
			a.report() // the registry waits for a report after every maintenance decision
		}
		m.Reply <- d.Reply
	case *messages.GetInfo:
		a.getInfo(m)
	case *messages.GetProvision:
		info := a.provisionInfo()
		m.Reply <- messages.ProvisionReply{Info: &info}
	case *messages.GetLogs:
		a.getLogs(m)
	case *messages.GetReleases:
		a.getReleases(m)
	case *messages.DebugLease:
		m.Reply <- a.debugLease()
	case *messages.Inventory:
		a.inventory(m)
	case *messages.VolumeHoldDone:
		a.step(HoldDone{Name: m.Name})
	case *messages.ContainerDied:
		a.step(Died{ContainerID: m.ContainerID, Generation: m.Generation, Counted: m.Counted})
	case workerDone:
		if a.finish(m.epoch) {
			a.step(m.in)
		}
	case timerFired:
		if m.token == a.timer {
			a.timer = 0
			a.step(Timer{What: m.what})
		}
	case sideDone:
		a.step(m.in)
	}
}

// Describe summarises the lease for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.st == nil {
		return "loading", 0
	}
	s := fmt.Sprintf("%s gen %d fail_count %d", a.st.Status, a.st.Generation, a.st.FailCount)
	inFlight := 0
	if a.worker != nil {
		s += ", worker " + string(a.worker.kind)
		inFlight++
	}
	if n := a.side.running(); n > 0 {
		s += fmt.Sprintf(", %d side checks", n)
		inFlight += n
	}
	return s, inFlight
}

// started rebuilds the state from the journal, then lets Decide settle any intent
// that has no completion before taking new commands.
func (a *Actor) started(c actor.Context) {
	a.self, a.parent, a.sys = c.Self(), c.Parent(), c.ActorSystem()
	st, seq, ok := a.deps.Preloaded.take(a.id)
	var err error
	if !ok {
		st, seq, err = Load(a.deps.Store, a.id)
	}
	if err != nil {
		a.log().Error().Err(err).Msg("lease journal unreadable; lease held as unknown")
		a.broken = true
		a.st = NewState()
		a.report()
		return
	}
	a.st = st
	a.st.ShareAdmission(a.spec.Load())
	a.journal = persistence.Cursor{Stream: Stream(a.id), Seq: seq, Every: a.set.SnapshotEvery}
	a.log().Debug().Str("status", string(st.Status)).Uint64("admission", a.spec.Load().Admission).
		Uint64("journaled_admission", st.Admission).Uint64("generation", st.Generation).Msg("lease actor started")
	a.report()
	a.step(Recover{})
}

// step is the actor's one way to change: Decide, journal and apply, run effects.
func (a *Actor) step(in Input) Decision {
	if a.broken {
		return Decision{Reply: messages.Refuse(messages.ErrLifecyclePending, "lease state is being recovered, retry later")}
	}
	env, err := a.env(in)
	if err != nil {
		a.log().Error().Err(err).Msg("read outbox")
		return Decision{Reply: messages.Refuse(messages.ErrUnavailable, "state store unavailable")}
	}
	var maintenance string
	if m := a.st.Maintenance; m != nil {
		maintenance = m.Kind
	}
	d := Decide(a.st, in, env)
	if len(d.Events) > 0 {
		if err := a.commit(d); err != nil {
			// The store latched; the daemon is draining, so the lease does nothing more.
			return Decision{Reply: messages.Refuse(messages.ErrUnavailable, "state store unavailable")}
		}
		if r, ok := in.(Replaced); ok && maintenance != "" && a.st.Maintenance == nil {
			a.deps.Metrics.maintenanceSettled(maintenance, string(r.Result.Kind))
		}
	}
	for _, e := range d.Effects {
		a.run(e)
	}
	return d
}

// env is what Decide may know beyond the state: the clock, the latest admission,
// the running worker, and — for a maintenance — whether an earlier completion of
// this lease is still queued (the maintenance fence).
func (a *Actor) env(in Input) (Env, error) {
	e := Env{Now: a.deps.Now(), Spec: a.spec.Load(), Limits: Limits{
		ProvisionTimeout: a.set.ProvisionTimeout, ResumePoll: a.set.ResumePoll, TeardownRetry: a.set.TeardownRetry,
		ReleasesMaxAge: a.set.ReleasesMaxAge, HistoryBytes: a.set.HistoryBytes, RetentionMaxAge: a.set.RetentionMaxAge}}
	if a.worker != nil {
		e.Worker = a.worker.kind
	}
	if _, ok := in.(Maintain); ok {
		n, err := a.deps.Store.OutboxPending(a.id, RowMaintenance)
		if err != nil {
			return e, err
		}
		e.Fenced = n > 0
	}
	return e, nil
}

// run carries out one effect of a decision.
func (a *Actor) run(e Effect) {
	switch e := e.(type) {
	case Work:
		a.startWorker(e.Kind)
	case Cancel:
		if a.worker != nil {
			a.worker.cancel()
		}
	case Wait:
		token := epochs.Add(1)
		a.timer = token
		self, sys := a.self, a.sys
		time.AfterFunc(e.D, func() { sys.Root.Send(self, timerFired{token: token, what: e.What}) })
	case Confirm:
		j, gen := a.job(), a.st.Generation
		death := e.Death
		a.goSide("confirm-death", func(ctx context.Context) Input {
			return Confirmed{Generation: gen, Death: death, Exited: j.confirmExited(ctx, death.ContainerID)}
		})
	case Sweep:
		// Handed back in the Inventory's answer (see inventory).
		a.log().Warn().Strs("containers", e.IDs).Msg("containers of settled attempts handed to cleanup")
	case Answer:
		for _, w := range a.waiters {
			w <- e.Err
		}
		a.waiters = nil
	case TellClosed:
		a.log().Info().Msg("lease closed")
		closed := messages.LeaseClosed{Lease: a.id, Admission: a.st.ClosedAdmission}
		if c := a.st.Closed; c != nil {
			closed.Retention, closed.Requarantined = c.Retention, c.Requarantined
		}
		a.sys.Root.Send(a.parent, closed)
	}
}

// --- commands -------------------------------------------------------------------

func (a *Actor) deprovision(m *messages.Deprovision) {
	d := a.step(Close{Retain: m.Retain})
	switch {
	case d.Reply != nil:
		m.Reply <- d.Reply
	case d.Hold:
		a.waiters = append(a.waiters, m.Reply)
	default:
		m.Reply <- nil
	}
}

// inventory hands reconciliation's listing to Decide and answers with the
// containers the lease disowned.
func (a *Actor) inventory(m *messages.Inventory) {
	d := a.step(Listed{Containers: m.Containers})
	if m.Reply == nil {
		return
	}
	var ack messages.InventoryAck
	for _, e := range d.Effects {
		if s, ok := e.(Sweep); ok {
			ack.Stale = append(ack.Stale, s.IDs...)
		}
	}
	m.Reply <- ack
}

// --- reads -----------------------------------------------------------------------

func (a *Actor) getInfo(m *messages.GetInfo) {
	if a.st == nil || a.st.Status != Ready {
		m.Reply <- messages.InfoReply{Err: messages.Refuse(messages.ErrNotFound, "lease is not ready")}
		return
	}
	info := leaseInfo(a.spec.Load(), a.st, a.set.HostAddress)
	m.Reply <- messages.InfoReply{Info: &info}
}

func (a *Actor) getLogs(m *messages.GetLogs) {
	j := a.job()
	known := slices.Clone(a.st.Containers)
	failedRelease := 0
	if l := a.st.Latest(); l != nil && l.Status == messages.ReleaseFailed && l.MaintenanceID != "" && a.st.Status == Ready {
		failedRelease = l.Version
	}
	tail, reply := m.Tail, m.Reply
	a.goSide("read-logs", func(context.Context) Input { // Docker reads never run on the actor
		reply <- j.logs(tail, known, failedRelease)
		return nil
	})
}

func (a *Actor) getReleases(m *messages.GetReleases) {
	if a.st == nil || a.st.Status == Closed || len(a.st.Releases) == 0 {
		m.Reply <- messages.ReleasesReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
		return
	}
	out := make([]messages.Release, 0, len(a.st.Releases))
	for i := range a.st.Releases {
		out = append(out, a.st.Releases[i].Wire())
	}
	m.Reply <- messages.ReleasesReply{Releases: out}
}

func (a *Actor) provisionInfo() messages.ProvisionInfo {
	return provisionInfo(a.spec.Load(), a.st)
}

// --- plumbing --------------------------------------------------------------------

// commit journals a decision's events with its callback rows in one transaction,
// then applies them, wakes the outbox and reports to the registry.
func (a *Actor) commit(d Decision) error {
	rows := make([]persistence.OutboxRow, 0, len(d.Callbacks))
	for _, cb := range d.Callbacks {
		rows = append(rows, a.callback(cb))
	}
	res, err := a.deps.Store.Commit(persistence.Write{
		Appends: []persistence.Append{{Stream: a.journal.Stream, Events: d.Events}},
		Outbox:  rows,
	})
	if err != nil {
		a.log().Error().Err(err).Msg("journal write failed")
		return err
	}
	due := a.journal.Advance(res, len(d.Events))
	for _, ev := range d.Events {
		from := a.st.Status
		if err := a.st.Apply(ev); err != nil {
			// Decide chose the event for this state; reaching this is a bug in berth.
			a.log().Error().Err(err).Msg("journaled event does not apply")
		}
		a.deps.Metrics.transition(from, a.st.Status, ev.Type)
	}
	a.st.ShareAdmission(a.spec.Load())
	if due {
		if err := a.journal.Snapshot(a.deps.Store, eventVersion, a.deps.Now(), a.st); err != nil {
			a.log().Warn().Err(err).Msg("snapshot")
		}
	}
	if len(rows) > 0 {
		a.sys.Root.Send(a.sys.NewLocalPID(string(a.set.OutboxPath)), &messages.OutboxWake{Lease: a.id})
	}
	a.report()
	return nil
}

// callback builds the outbox row of a decision's callback. Provision outcomes go
// to the exact completion URL; deaths, maintenance completions and deprovisions to
// the lifecycle URL.
func (a *Actor) callback(cb Callback) persistence.OutboxRow {
	spec := a.spec.Load()
	body := messages.Callback{
		LeaseUUID:        a.id,
		Status:           cb.Status,
		Error:            cb.Error,
		Backend:          a.set.BackendName,
		BackendStorageID: a.set.StorageID,
		MaintenanceID:    cb.MaintenanceID,
		Retained:         cb.Retained,
	}
	if !cb.AdmittedAt.IsZero() {
		body.MaintenanceAdmittedAt = cb.AdmittedAt.UTC().Format(time.RFC3339Nano)
	}
	raw, _ := json.Marshal(body)
	url := spec.CallbackURL
	if cb.Lifecycle {
		url = spec.LifecycleURL
	}
	return persistence.OutboxRow{Lease: a.id, DeliveryID: uuid.NewString(), URL: url, Body: raw, Kind: cb.Kind(), CreatedAt: a.deps.Now()}
}

func (a *Actor) report() {
	if a.parent == nil {
		return
	}
	spec := a.spec.Load()
	r := messages.LeaseReport{Lease: a.id, Admission: spec.Admission, Status: string(a.st.Status), Info: provisionInfo(spec, a.st)}
	if a.broken {
		r.Info.Status = messages.StatusUnknown
	}
	if a.st.Status == Ready {
		r.Running = len(a.st.Containers)
	}
	a.sys.Root.Send(a.parent, r)
}

// holdVolume hands a volume whose destruction is busy to the volumehold actor.
func (a *Actor) holdVolume(name string) {
	if a.set.VolumeHoldPath == "" {
		return
	}
	a.sys.Root.Send(a.sys.NewLocalPID(string(a.set.VolumeHoldPath)), &messages.HoldVolume{Name: name, Owner: "lease:" + a.id})
}

// reportInput sends an intermediate input from a worker to the actor.
func (a *Actor) reportInput(in Input) {
	a.sys.Root.Send(a.self, sideDone{in: in})
}

// startWorker starts the lease's worker of kind. Its result comes back as a
// workerDone stamped with the worker's epoch.
func (a *Actor) startWorker(kind WorkKind) {
	if a.worker != nil {
		a.log().Error().Str("running", string(a.worker.kind)).Str("asked", string(kind)).Msg("a second worker was asked for; the first is canceled")
		a.worker.cancel()
	}
	a.timer = 0 // a pending wait is superseded
	j := a.job()
	gen := a.st.Generation
	var fn func(ctx context.Context) Input
	switch kind {
	case WorkProvision:
		fn = func(ctx context.Context) Input { return Attempted{Generation: gen, Outcome: j.provision(ctx)} }
	case WorkResume:
		fn = func(ctx context.Context) Input { return Attempted{Generation: gen, Outcome: j.resume(ctx)} }
	case WorkTeardown:
		fn = func(ctx context.Context) Input { return j.teardown(ctx) }
	case WorkCapture:
		fn = func(ctx context.Context) Input { j.captureRuntimeFailure(ctx); return Captured{Generation: gen} }
	case WorkReplace, WorkReplaceResume:
		if j.maint == nil {
			return
		}
		id, resume := j.maint.ID, kind == WorkReplaceResume
		fn = func(ctx context.Context) Input {
			if resume {
				return Replaced{ID: id, Result: j.replaceResume(ctx)}
			}
			return Replaced{ID: id, Result: j.replace(ctx)}
		}
	default:
		return
	}
	epoch := epochs.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{epoch: epoch, kind: kind, cancel: cancel, done: make(chan struct{})}
	a.worker = w
	self, sys := a.self, a.sys
	go func() {
		defer close(w.done)
		defer cancel()
		sys.Root.Send(self, workerDone{epoch: epoch, in: fn(ctx)})
	}()
}

// finish accepts a worker's report only from the current worker.
func (a *Actor) finish(epoch uint64) bool {
	if a.worker == nil || a.worker.epoch != epoch {
		return false
	}
	a.worker.cancel()
	a.worker = nil
	return true
}

// drain cancels the worker and the side goroutines and waits for them (bounded),
// so a canceled worker cannot create containers after the actor moved on or
// restarted.
func (a *Actor) drain() {
	a.timer = 0
	if w := a.worker; w != nil {
		w.cancel()
		select {
		case <-w.done:
		case <-time.After(a.set.WorkerDrain):
			a.log().Error().Str("worker", string(w.kind)).Msg("worker did not drain in time")
		}
		a.worker = nil
	}
	if !a.side.drain(a.set.WorkerDrain) {
		a.log().Error().Msg("side checks did not drain in time")
	}
}

// goSide runs a short named side goroutine (bounded by 30 s); a non-nil Input it
// returns goes back through Decide.
func (a *Actor) goSide(name string, fn func(ctx context.Context) Input) {
	if a.side == nil {
		a.side = &goroutines{}
	}
	self, sys := a.self, a.sys
	a.side.goNamed(name, func(ctx context.Context) {
		if in := fn(ctx); in != nil {
			sys.Root.Send(self, sideDone{in: in})
		}
	})
}

// goroutines tracks an actor's side goroutines by name, so Describe can show them
// and a stopping actor can cancel and wait for them.
type goroutines struct {
	mu     sync.Mutex
	names  map[string]int
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func (g *goroutines) goNamed(name string, fn func(ctx context.Context)) {
	g.mu.Lock()
	if g.names == nil {
		g.names = map[string]int{}
	}
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
	g.names[name]++
	parent := g.ctx
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		ctx, cancel := context.WithTimeout(parent, 30*time.Second)
		defer cancel()
		defer func() {
			g.mu.Lock()
			g.names[name]--
			g.mu.Unlock()
		}()
		fn(ctx)
	}()
}

func (g *goroutines) running() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.names {
		n += c
	}
	return n
}

// drain cancels every side goroutine and waits up to d; false when some remain.
func (g *goroutines) drain(d time.Duration) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	if g.cancel != nil {
		g.cancel()
		g.cancel, g.ctx = nil, nil
	}
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// log is the lease's logger, built when a line is written: a logger per idle
// actor would cost half a kilobyte each.
func (a *Actor) log() *zerolog.Logger {
	l := a.deps.Log.With().Str("lease_uuid", a.id).Logger()
	return &l
}
