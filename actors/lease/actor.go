// Package lease is the per-lease actor: one event-sourced state machine per lease
// (machine.go, apply.go, decide.go), spawned by the registry. The actor only runs
// what Decide chose: it journals the events with their callback rows in one
// transaction, applies them, then runs the effects. It never blocks its mailbox on
// Docker: Docker work runs on the lease's one worker goroutine (or on short side
// checks), every goroutine named and tracked, and comes back as an Input.
package lease

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Deps are a lease actor's collaborators.
type Deps struct {
	Store    Store
	Diag     Diagnostics
	Engine   steps.Docker // the Engine API, as the lease's ports (steps/docker.go)
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
	Networks steps.NetworkPool
	// Quiet holds a provision's first Engine API request until a burst of
	// admissions has been answered (nil: never held).
	Quiet *supervisors.Quiet
	// ImageHolds protect the images a launch admits from the image collector
	// until the actor has reported what it pinned (nil: nothing collects).
	ImageHolds *dockerio.ImageHolds
}

// Settings of lease actors, mapped from the config by cmd/berthd.
type Settings struct {
	// NoWarmPool: network_pool_size is 0. Networks (the pool) then only places
	// single-container leases on the default bridge; a first attempt it has
	// nothing for creates fred-<lease>, not a pool network.
	NoWarmPool       bool
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
	CleanupRetry     supervisors.Retry // a failed attempt's kept containers are cleaned up again on this backoff
	ReadonlyRootfs   bool
	PidsLimit        int64
	TmpfsSizeMB      int
	MinAvgFileBytes  int64            // min_avg_file_bytes: a writable-path seed's entries are its quota over this
	OutboxPath       messages.Address // where OutboxWake goes
	VolumeHoldPath   messages.Address // where a busy volume is handed (HoldVolume)
	SnapshotEvery    int              // journal events between snapshots
	WorkerDrain      time.Duration    // how long a stopping actor waits for its goroutines
	ReleasesMaxAge   time.Duration    // releases_max_age
	HistoryBytes     int              // per-lease release history cap (32 MiB)
	RetentionMaxAge  time.Duration    // retention_max_age: a retention record's grace
	Ingress          *ingress.Config  // the ingress.* keys the Traefik labels need; nil: ingress off
	// CustomDomainsUngated is custom_domain_dns_check_disabled: custom domains
	// are routed from the first launch, without the DNS gate.
	CustomDomainsUngated bool
}

// Store is what a lease needs of the state store: its journal and the
// maintenance fence (*persistence.Store, or in tests supervisors.FaultyStore).
type Store interface {
	supervisors.JournalStore
	OutboxPending(lease, kind string) (int, error)
}

// Actor is one lease.
type Actor struct {
	deps *Deps
	set  *Settings
	spec *latest // the latest admission, shared with the producer (spec.go)
	id   string
	c    actor.Context

	// The journal and the Tasks are made when first needed: an idle lease
	// holds neither (10,000 of them must fit in 5 KiB each).
	st            *State
	seq           uint64 // the stream's last sequence, until the journal is made
	journal       *supervisors.Journal[*State]
	tasks         *supervisors.Tasks
	worker        *worker        // the lease's one worker, nil when none runs
	wait          *waiting       // the pending Wait, nil when none
	waiters       []chan<- error // deprovision requests waiting for the closed receipt
	held          error          // why the close's teardown is held (Answer's error), nil while it progresses
	heldOnVolumes bool           // held only on volume deletions (Answer.OnVolumes)
	broken        bool           // the journal could not be read: refuse everything
}

// worker is the one task a lease may have doing Docker work. Its result is
// acted on only while it is the lease's current worker.
type worker struct {
	kind WorkKind
	task *supervisors.Task
}

// New returns the producer of the actor of a lease admitted as spec.
func New(deps *Deps, spec *Spec) actor.Producer {
	cur := &latest{spec: spec}
	return func() actor.Actor { return &Actor{deps: deps, set: deps.Settings, spec: cur, id: cur.spec.Lease} }
}

// now is the lease's clock: the process clock, never earlier than the lease's
// latest journaled event (FloorShift).
func (a *Actor) now() time.Time { return a.deps.Now().Add(a.spec.shift) }

// Tasks are the lease's worker, side checks and timers (supervisors.Tasked).
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// tasked is the lease's Tasks, made at its first goroutine or timer. The kit
// stops them after a Restarting or Stopping, waiting up to WorkerDrain.
func (a *Actor) tasked() *supervisors.Tasks {
	if a.tasks == nil {
		a.tasks = supervisors.NewTasks(a.c, a.set.WorkerDrain)
	}
	return a.tasks
}

// Receive dispatches a lease's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *actor.Restarting, *actor.Stopping:
		// The worker first, so it cannot create containers after the actor moved
		// on; the kit then stops every task and waits for them.
		if a.worker != nil {
			a.worker.task.Cancel()
		}
	case *messages.Deprovision:
		a.deprovision(m)
	case ReprovisionCommand:
		a.spec.take(m.Spec)
		a.step(Reprovision{})
	case *MaintainCommand:
		if !m.Ticket.Take() {
			// Its asker already answered an error: never decided. The registry
			// waits for a report after every maintenance it forwarded.
			a.report()
			return
		}
		d := a.step(m.Maintain)
		if len(d.Events) == 0 {
			a.report() // the registry waits for a report after every maintenance decision
		}
		m.Reply <- d.Reply
	case *ReconcileDomainsCommand:
		a.reconcileDomains(m)
	case *messages.GetInfo:
		a.getInfo(m)
	case *messages.GetProvision:
		info := a.provisionInfo()
		m.Reply <- messages.ProvisionReply{Info: &info}
	case *messages.GetLogs:
		a.getLogs(m)
	case *messages.GetReleases:
		a.getReleases(m)
	case *messages.GetRefreshReceipt:
		if a.st != nil {
			m.Reply <- RefreshReceipt(a.st, m.MaintenanceID)
		} else {
			m.Reply <- messages.RefreshReceipt{}
		}
	case *messages.DebugLease:
		m.Reply <- a.debugLease()
	case *messages.Inventory:
		a.inventory(m)
	case *messages.VolumeHoldDone:
		a.step(HoldDone{Name: m.Name})
	case *messages.CustomDomainReady:
		a.customDomainReady(m)
	case *messages.ContainerDied:
		a.step(Died{ContainerID: m.ContainerID, Generation: m.Generation, Counted: m.Counted})
	case workerDone:
		if m.w == a.worker { // not a canceled or superseded worker's
			a.worker = nil
			a.step(m.in)
		}
		m.release() // what it pinned is journaled and reported by now
	case *waiting:
		if m == a.wait {
			a.wait = nil
			a.step(m.timer)
		}
	case Input: // a side check's answer, or a worker's intermediate report
		a.step(m)
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
	if n := a.tasks.Running() - a.tasks.Names()["worker"]; n > 0 {
		s += fmt.Sprintf(", %d side checks", n)
		inFlight += n
	}
	return s, inFlight
}

// started rebuilds the state from the journal, then lets Decide settle any intent
// that has no completion before taking new commands.
func (a *Actor) started(c actor.Context) {
	a.c = c
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
	a.st, a.seq = st, seq
	if shift := FloorShift(a.spec.shift, st.LastAt, a.deps.Now()); shift != a.spec.shift {
		a.spec.shift = shift
		a.log().Warn().Time("last_event_at", st.LastAt).Dur("behind", shift).
			Msg("the clock is behind this lease's journal: the lease's clock runs on from its last event, so no deadline grows")
	}
	a.st.ShareAdmission(a.spec.Load())
	a.log().Debug().Str("status", string(st.Status)).Uint64("admission", a.spec.Load().Admission).
		Uint64("journaled_admission", st.Admission).Uint64("generation", st.Generation).Msg("lease actor started")
	a.report()
	a.step(Recover{})
	a.syncDomainGate()
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
	before := a.st.Status
	defer func() {
		if a.st.Status != before {
			a.syncDomainGate()
		}
		if a.st.Status == Deprovisioning || before == Deprovisioning {
			a.trackClose()
		}
	}()
	d := Decide(a.st, in, env)
	err = supervisors.Execute(supervisors.Decided[Effect]{Events: d.Events, Effects: d.Effects}, func([]persistence.Event) error {
		if err := a.commit(d); err != nil {
			return err
		}
		if r, ok := in.(Replaced); ok && maintenance != "" && a.st.Maintenance == nil {
			a.deps.Metrics.maintenanceSettled(maintenance, string(r.Result.Kind))
		}
		return nil
	}, a.run)
	if err != nil {
		// The store latched; the daemon is draining, so the lease does nothing more.
		return Decision{Reply: messages.Refuse(messages.ErrUnavailable, "state store unavailable")}
	}
	return d
}

// trackClose keeps the lease's entry in the close-intent gauges: its close's
// age while it is deprovisioning, and whether it waits only on held volumes.
func (a *Actor) trackClose() {
	var since time.Time
	if a.st.Status == Deprovisioning && a.st.Close != nil {
		since = a.st.Close.At
	}
	if m := a.deps.Metrics; m != nil {
		m.closes.set(a.id, since, a.held != nil && a.heldOnVolumes)
	}
}

// env is what Decide may know beyond the state: the clock, the latest admission,
// the running worker, and — for a maintenance — whether an earlier completion of
// this lease is still queued (the maintenance fence).
func (a *Actor) env(in Input) (Env, error) {
	e := Env{Now: a.now(), Spec: a.spec.Load(), Limits: Limits{
		ProvisionTimeout: a.set.ProvisionTimeout, ResumePoll: a.set.ResumePoll, TeardownRetry: a.set.TeardownRetry,
		ReleasesMaxAge: a.set.ReleasesMaxAge, HistoryBytes: a.set.HistoryBytes, RetentionMaxAge: a.set.RetentionMaxAge},
		DomainsUngated: a.set.Ingress != nil && a.set.CustomDomainsUngated, DomainsGated: a.gated(), CloseHeld: a.held}
	if a.worker != nil {
		e.Worker = a.worker.kind
	}
	if needsFence(a.st, in, e) {
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
		a.startWorker(e)
	case Cancel:
		if a.worker != nil {
			a.worker.task.Cancel()
		}
	case Wait:
		a.await(e.D, Timer{What: e.What})
	case Backoff:
		backoff := cmp.Or(a.set.CleanupRetry, DefaultSettings().CleanupRetry)
		a.await(backoff.Jittered(e.Attempt), Timer{What: e.What, Attempt: e.Attempt})
	case Confirm:
		j, gen, death := a.job(), a.st.Generation, e.Death
		a.check("confirm-death", func(ctx context.Context) any {
			return Confirmed{Generation: gen, Death: death, Exited: steps.Capture{API: j.eng}.Exited(ctx, death.ContainerID)}
		})
	case Sweep:
		// Handed back in the Inventory's answer (see inventory).
		a.log().Warn().Strs("containers", e.IDs).Msg("containers of settled attempts handed to cleanup")
	case Answer:
		for _, w := range a.waiters {
			w <- e.Err
		}
		a.waiters, a.held, a.heldOnVolumes = nil, e.Err, e.OnVolumes
	case SyncGate:
		a.syncGate(e)
	case TellClosed:
		a.log().Info().Msg("lease closed")
		closed := messages.LeaseClosed{Lease: a.id, Admission: a.st.ClosedAdmission}
		if c := a.st.Closed; c != nil {
			closed.Retention, closed.Requarantined = c.Retention, c.Requarantined
		}
		a.c.Send(a.c.Parent(), closed)
	}
}

// --- commands -------------------------------------------------------------------

func (a *Actor) deprovision(m *messages.Deprovision) {
	if !m.Ticket.Take() {
		// Its asker already answered an error: the close never happens.
		if a.c.Parent() != nil {
			a.c.Send(a.c.Parent(), CloseDropped{Lease: a.id})
		}
		return
	}
	d := a.step(Close{Retain: m.Retain})
	switch {
	case d.Reply != nil:
		m.Reply <- d.Reply
	case d.Hold:
		a.waiters = append(a.waiters, m.Reply)
		if m.Durable != nil { // journaled (step committed it) and not held
			select {
			case m.Durable <- struct{}{}:
			default:
			}
		}
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
	info := leaseInfo(a.spec.Load(), a.st, a.set)
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
	a.check("read-logs", func(context.Context) any { // Docker reads never run on the actor
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
	return provisionInfo(a.spec.Load(), a.st, a.set.Ingress)
}

// --- plumbing --------------------------------------------------------------------

// commit journals a decision's events with its callback rows in one transaction
// (the journal applies them), then wakes the outbox and reports to the registry.
func (a *Actor) commit(d Decision) error {
	rows := make([]persistence.OutboxRow, 0, len(d.Callbacks))
	for _, cb := range d.Callbacks {
		rows = append(rows, a.callback(cb))
	}
	if err := a.journaled().Commit(d.Events, rows...); err != nil {
		return err
	}
	a.st.ShareAdmission(a.spec.Load())
	// The registry hears first: its mailbox holds the report before the outbox
	// can deliver the callback, so whatever the callback's receiver asks next
	// (GET /provisions/{id}) reads the state the callback announced.
	a.report()
	if len(rows) > 0 {
		a.tell(a.set.OutboxPath, &messages.OutboxWake{Lease: a.id})
	}
	return nil
}

// journaled is the lease's journal, made at its first commit. Its lines name
// the lease by its stream (a logger of its own would cost every lease 500 B).
func (a *Actor) journaled() *supervisors.Journal[*State] {
	if a.journal == nil {
		metrics := a.deps.Metrics
		a.journal = &supervisors.Journal[*State]{Store: a.deps.Store, Stream: Stream(a.id), Version: eventVersion,
			Every: a.set.SnapshotEvery, Now: a.now, Log: a.deps.Log, Fold: func(st *State, ev persistence.Event) error {
				from := st.Status
				if ev.Type == EvClosed {
					metrics.closing(st)
				}
				err := st.Apply(ev)
				metrics.transition(from, st.Status, ev.Type)
				return err
			}}
		a.journal.Resume(a.st, a.seq)
	}
	return a.journal
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
	return persistence.OutboxRow{Lease: a.id, DeliveryID: uuid.NewString(), URL: url, Body: raw, Kind: cb.Kind(), CreatedAt: a.now()}
}

func (a *Actor) report() {
	if a.c.Parent() == nil {
		return
	}
	spec := a.spec.Load()
	r := messages.LeaseReport{Lease: a.id, Admission: spec.Admission, Status: string(a.st.Status), Info: provisionInfo(spec, a.st, a.set.Ingress),
		Images: a.st.ImageIDs()}
	if a.broken {
		r.Info.Status = messages.StatusUnknown
	}
	if a.st.Status == Ready {
		r.Running = len(a.st.Containers)
	}
	a.c.Send(a.c.Parent(), r)
}

// holdVolume hands a volume whose destruction is busy to the volumehold actor.
func (a *Actor) holdVolume(name string) {
	if a.set.VolumeHoldPath != "" {
		a.tell(a.set.VolumeHoldPath, &messages.HoldVolume{Name: name, Owner: "lease:" + a.id})
	}
}

// tell sends msg to the actor at path; a worker may call it.
func (a *Actor) tell(path messages.Address, msg any) {
	sys := a.c.ActorSystem()
	sys.Root.Send(sys.NewLocalPID(string(path)), msg)
}

// await schedules timer after d, replacing a pending wait.
func (a *Actor) await(d time.Duration, timer Timer) {
	a.cancelWait()
	w := &waiting{timer: timer}
	w.cancel = a.tasked().After("wait", d, w)
	a.wait = w
}

// startWorker starts the lease's worker of work.Kind; a pending wait is superseded.
func (a *Actor) startWorker(work Work) {
	kind := work.Kind
	if a.worker != nil {
		a.log().Error().Str("running", string(a.worker.kind)).Str("asked", string(kind)).Msg("a second worker was asked for; the first is canceled")
		a.worker.task.Cancel()
	}
	a.cancelWait()
	j := a.job()
	j.retry = work.Attempt
	fn := j.work(kind)
	if fn == nil {
		return
	}
	w := &worker{kind: kind}
	if w.task = a.tasked().Start("worker", func(ctx context.Context) any {
		release := j.holdImages(kind)
		in := fn(ctx)
		time.AfterFunc(holdGrace, release)
		return workerDone{w: w, in: in, release: release}
	}); w.task != nil {
		a.worker = w
	}
}

// cancelWait cancels the pending Wait, if any.
func (a *Actor) cancelWait() {
	if a.wait != nil {
		a.wait.cancel()
		a.wait = nil
	}
}

// check runs a short named side check (bounded by 30 s); what it returns goes
// back through Decide.
func (a *Actor) check(name string, fn func(ctx context.Context) any) {
	a.tasked().Go(name, func(ctx context.Context) any {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return fn(ctx)
	})
}

// log is the lease's logger, built when a line is written: a logger per idle
// actor would cost half a kilobyte each.
func (a *Actor) log() *zerolog.Logger {
	l := a.deps.Log.With().Str("lease_uuid", a.id).Logger()
	return &l
}
