// Package lease is the per-lease actor: one event-sourced state machine per lease
// (machine.go), spawned by the registry. It never blocks its mailbox on Docker: it
// journals an intent, starts a worker goroutine with a context, and the worker
// reports back with the epoch it was started under.
package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

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
	ResumePoll       time.Duration // how often an undecidable resumed provision is looked at again
	TeardownRetry    time.Duration
	ReadonlyRootfs   bool
	PidsLimit        int64
	TmpfsSizeMB      int
	OutboxPath       string // where OutboxWake goes
	SnapshotEvery    int    // journal events between snapshots
	WorkerDrain      time.Duration
}

// Deps are a lease actor's collaborators.
type Deps struct {
	Store    *persistence.Store
	Diag     *persistence.Diagnostics
	Engine   dockerio.Engine
	Settings *Settings
	Log      zerolog.Logger
	Now      func() time.Time
	Metrics  *Metrics // nil: not recorded
}

// Metrics of lease state machines.
type Metrics struct {
	transitions *prometheus.CounterVec
}

// NewMetrics registers berth_lease_transitions_total{from,to,event} on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_lease_transitions_total",
		Help: "Journaled lease state-machine transitions, by from status, to status and event.",
	}, []string{"from", "to", "event"})}
	if reg != nil {
		reg.MustRegister(m.transitions)
	}
	return m
}

func (m *Metrics) transition(from, to Status, event string) {
	if m != nil && from != to {
		m.transitions.WithLabelValues(string(from), string(to), event).Inc()
	}
}

// Actor is one lease.
type Actor struct {
	deps *Deps
	set  *Settings
	spec *atomic.Pointer[Spec] // shared with the registry: the latest admission
	id   string

	st      *State
	journal persistence.Cursor
	worker  *worker
	waiters []chan<- error // deprovision requests waiting for the closed receipt
	self    *actor.PID
	parent  *actor.PID
	sys     *actor.ActorSystem
	broken  bool // the journal could not be read: refuse everything
}

// worker is the one goroutine a lease may have doing Docker work.
type worker struct {
	epoch   uint64
	kind    string
	cancel  context.CancelFunc
	done    chan struct{}
	waiting bool // only a timer before the next attempt: nothing runs
}

var epochs atomic.Uint64

// New returns the producer of a lease actor.
func New(deps *Deps, spec *atomic.Pointer[Spec]) actor.Producer {
	return func() actor.Actor {
		id := spec.Load().Lease
		return &Actor{deps: deps, set: deps.Settings, spec: spec, id: id}
	}
}

// Receive dispatches a lease's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *actor.Restarting, *actor.Stopping:
		a.drainWorker()
	case *messages.Deprovision:
		a.deprovision(c, m)
	case Reprovision:
		a.reprovision(c)
	case *messages.GetInfo:
		a.getInfo(m)
	case *messages.GetProvision:
		info := a.provisionInfo()
		m.Reply <- messages.ProvisionReply{Info: &info}
	case *messages.GetLogs:
		a.getLogs(m)
	case provisionDone:
		a.provisionDone(c, m)
	case teardownDone:
		a.teardownDone(c, m)
	case failureCaptured:
		a.failureCaptured(c, m)
	case retry:
		a.retry(c, m)
	case *Inventory:
		a.inventory(c, m)
	case *ContainerDied:
		a.containerDied(c, m)
	case confirmedDeath:
		a.deathConfirmed(c, m)
	}
}

// Describe summarises the lease for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.st == nil {
		return "loading", 0
	}
	s := fmt.Sprintf("%s gen %d fail_count %d", a.st.Status, a.st.Generation, a.st.FailCount)
	if a.worker != nil {
		return s + ", worker " + a.worker.kind, 1
	}
	return s, 0
}

// started rebuilds the state from the journal, then reconciles any intent that has
// no completion before taking new commands.
func (a *Actor) started(c actor.Context) {
	a.self, a.parent, a.sys = c.Self(), c.Parent(), c.ActorSystem()
	st, seq, err := Load(a.deps.Store, a.id)
	if err != nil {
		a.log().Error().Err(err).Msg("lease journal unreadable; lease held as unknown")
		a.broken = true
		a.st = NewState()
		a.report()
		return
	}
	a.st = st
	a.journal = persistence.Cursor{Stream: Stream(a.id), Seq: seq, Every: a.set.SnapshotEvery}
	spec := a.spec.Load()
	a.log().Debug().Str("status", string(st.Status)).Uint64("admission", spec.Admission).
		Uint64("journaled_admission", st.Admission).Uint64("generation", st.Generation).Msg("lease actor started")
	switch {
	case st.Status == Closed && st.ClosedAdmission >= spec.Admission:
		a.report()
		c.Send(a.parent, LeaseClosed{Lease: a.id, Admission: st.ClosedAdmission})
		return
	case st.Status == Deprovisioning:
		a.report()
		a.startTeardown(c)
		return
	case spec.Admission > st.Admission && (st.Status == Reserved || st.Status == Failed || st.Status == Closed):
		a.startProvision(c)
		return
	case st.Status == Provisioning:
		a.report()
		a.startResume(c)
		return
	case st.Status == Failing:
		a.report()
		a.startFailureCapture(c)
		return
	}
	a.report()
}

// --- commands -------------------------------------------------------------------

func (a *Actor) reprovision(c actor.Context) {
	spec := a.spec.Load()
	if a.broken || spec.Admission <= a.st.Admission {
		return
	}
	switch a.st.Status {
	case Failed, Closed, Reserved:
		a.drainWorker()
		a.startProvision(c)
	default:
		a.log().Warn().Str("status", string(a.st.Status)).Msg("re-provision ignored: lease is not failed")
	}
}

func (a *Actor) deprovision(c actor.Context, m *messages.Deprovision) {
	if a.broken {
		m.Reply <- messages.Refuse(messages.ErrLifecyclePending, "lease state is being recovered, retry later")
		return
	}
	switch a.st.Status {
	case Closed:
		m.Reply <- nil
		return
	case Deprovisioning:
		a.waiters = append(a.waiters, m.Reply)
		return
	}
	now := a.deps.Now()
	if err := a.commit(c, []persistence.Event{event(EvCloseRequested, now,
		CloseRequested{Admission: a.spec.Load().Admission, At: now})}, nil); err != nil {
		m.Reply <- messages.Refuse(messages.ErrUnavailable, "state store unavailable")
		return
	}
	a.waiters = append(a.waiters, m.Reply)
	a.startTeardown(c)
}

// --- provisioning ----------------------------------------------------------------

func (a *Actor) startProvision(c actor.Context) {
	spec := a.spec.Load()
	now := a.deps.Now()
	gen := a.st.Generation + 1
	opID := spec.OperationID
	if a.st.Admission == spec.Admission || opID == "" {
		opID = uuid.NewString() // a second attempt of one admission is its own operation
	}
	ev := event(EvProvisionStarted, now, ProvisionStarted{Admission: spec.Admission, Generation: gen,
		OperationID: opID, At: now, Deadline: now.Add(a.set.ProvisionTimeout)})
	if err := a.commit(c, []persistence.Event{ev}, nil); err != nil {
		return
	}
	job := a.job(spec)
	a.run(c, "provision", func(ctx context.Context) any {
		return provisionDone{generation: gen, out: job.provision(ctx)}
	})
}

// startResume looks at the cohort of a provision whose worker did not report
// (the actor or the process restarted): resume verification if it is complete,
// fail it if it cannot finish, or look again later until its deadline.
func (a *Actor) startResume(c actor.Context) {
	gen := a.st.Generation
	job := a.job(a.spec.Load())
	a.run(c, "resume", func(ctx context.Context) any {
		return provisionDone{generation: gen, out: job.resume(ctx)}
	})
}

func (a *Actor) provisionDone(c actor.Context, m provisionDone) {
	if !a.finish(m.epoch) {
		return
	}
	if a.st.Status == Deprovisioning {
		a.startTeardown(c)
		return
	}
	if a.st.Status != Provisioning || m.generation != a.st.Generation {
		return
	}
	now := a.deps.Now()
	spec := a.spec.Load()
	switch {
	case m.out.pending:
		a.after(a.set.ResumePoll, "resume")
	case m.out.canceled:
		// Only a close or a drain cancels a provision; neither leaves it here.
		a.after(a.set.ResumePoll, "resume")
	case m.out.ok:
		ev := event(EvProvisionSucceeded, now, ProvisionSucceeded{Generation: a.st.Generation, At: now, Containers: m.out.containers})
		if a.commit(c, []persistence.Event{ev}, []persistence.OutboxRow{a.callback(spec, messages.CallbackSuccess, "", false)}) == nil {
			a.log().Info().Uint64("generation", a.st.Generation).Int("containers", len(m.out.containers)).Msg("lease ready")
		}
	default:
		ev := event(EvProvisionFailed, now, ProvisionFailed{Generation: a.st.Generation, At: now, Reason: m.out.reason, Message: m.out.message})
		if a.commit(c, []persistence.Event{ev}, []persistence.OutboxRow{a.callback(spec, messages.CallbackFailed, callbackError(m.out.reason), false)}) == nil {
			a.log().Warn().Str("reason", m.out.reason).Str("message", m.out.message).Msg("provision failed")
		}
	}
}

// --- teardown --------------------------------------------------------------------

func (a *Actor) startTeardown(c actor.Context) {
	if w := a.worker; w != nil && w.waiting {
		a.worker = nil // a pending retry timer: nothing to drain
	}
	if a.worker != nil {
		// The close wins: cancel the worker; teardown starts when it has drained, so
		// no late container of the canceled attempt can survive the teardown.
		a.worker.cancel()
		return
	}
	job := a.job(a.spec.Load())
	a.run(c, "teardown", func(ctx context.Context) any {
		return teardownDone{err: job.teardown(ctx)}
	})
}

func (a *Actor) teardownDone(c actor.Context, m teardownDone) {
	if !a.finish(m.epoch) {
		return
	}
	if m.err != nil {
		a.log().Warn().Err(m.err).Msg("teardown incomplete; retrying")
		a.after(a.set.TeardownRetry, "teardown")
		return
	}
	now := a.deps.Now()
	spec := a.spec.Load()
	ev := event(EvClosed, now, ClosedEv{Admission: a.st.Admission, At: now})
	if err := a.commit(c, []persistence.Event{ev}, []persistence.OutboxRow{a.callback(spec, messages.CallbackDeprovisioned, "", true)}); err != nil {
		return
	}
	for _, w := range a.waiters {
		w <- nil
	}
	a.waiters = nil
	a.log().Info().Msg("lease closed")
	c.Send(a.parent, LeaseClosed{Lease: a.id, Admission: a.st.ClosedAdmission})
}

// --- runtime failure -----------------------------------------------------------------

func (a *Actor) startFailureCapture(c actor.Context) {
	pf := a.st.PendingFailure
	if pf == nil {
		return
	}
	job := a.job(a.spec.Load())
	failure := *pf
	a.run(c, "failure-capture", func(ctx context.Context) any {
		job.captureRuntimeFailure(ctx, failure)
		return failureCaptured{}
	})
}

func (a *Actor) failureCaptured(c actor.Context, m failureCaptured) {
	if !a.finish(m.epoch) {
		return
	}
	if a.st.Status == Deprovisioning {
		a.startTeardown(c) // a close won the race: no stale failed callback
		return
	}
	if a.st.Status != Failing {
		return
	}
	now := a.deps.Now()
	ev := event(EvRuntimeFailed, now, RuntimeFailed{Generation: a.st.Generation, At: now,
		Reason: messages.ReasonContainerExited, Message: "container exited unexpectedly"})
	spec := a.spec.Load()
	if a.commit(c, []persistence.Event{ev}, []persistence.OutboxRow{
		a.callback(spec, messages.CallbackFailed, callbackError(messages.ReasonContainerExited), true)}) == nil {
		a.log().Warn().Int("fail_count", a.st.FailCount).Bool("budget_exhausted", a.st.Budget.Exhausted).Msg("lease failed at runtime")
	}
}

// containerDied handles a death from the live stream: Ready → Failing only after an
// inspect confirms the container really exited (stale and duplicate events are
// dropped by generation).
func (a *Actor) containerDied(c actor.Context, m *ContainerDied) {
	if a.broken || a.st.Status != Ready || m.Generation != a.st.Generation || !a.owns(m.ContainerID) {
		return
	}
	job := a.job(a.spec.Load())
	gen := a.st.Generation
	died := *m
	a.runSide(c, func(ctx context.Context) any {
		return confirmedDeath{generation: gen, death: died, confirmed: job.confirmExited(ctx, died.ContainerID)}
	})
}

func (a *Actor) deathConfirmed(c actor.Context, m confirmedDeath) {
	if m.confirmed == nil || a.st.Status != Ready || m.generation != a.st.Generation {
		return
	}
	inst, ok := a.instance(m.death.ContainerID)
	if !ok {
		return
	}
	a.beginFailing(c, RuntimeFailing{Generation: a.st.Generation, ContainerID: inst.ContainerID,
		Service: inst.Service, Index: inst.Index, ExitCode: m.confirmed.ExitCode,
		OOMKilled: m.confirmed.OOMKilled, Counted: m.death.Counted})
}

// inventory compares what Docker lists for this lease with what the lease
// believes: a Ready cohort with a container gone or not running fails (attributed
// unknown: only the live stream can prove a tenant's own crash), and containers of
// older generations are removed — late effects of attempts already settled. The
// dead cohort of a failed lease stays for the operator until a re-provision or close.
func (a *Actor) inventory(c actor.Context, m *Inventory) {
	defer func() {
		if m.Reply != nil {
			close(m.Reply)
		}
	}()
	if a.broken {
		return
	}
	gen := a.st.Generation
	switch a.st.Status {
	case Ready:
		for _, inst := range a.st.Containers {
			if ctr, ok := findContainer(m.Containers, inst.ContainerID); ok && ctr.State == "running" {
				continue
			}
			// The listing is only a hint — it may predate this cohort's start — so
			// the same inspect that confirms a streamed death confirms this one.
			a.containerDied(c, &ContainerDied{ContainerID: inst.ContainerID, Generation: gen})
		}
		a.removeStale(c, m.Containers, func(ctr dockerio.Container) bool { return ctr.Generation < gen })
	case Failed:
		a.removeStale(c, m.Containers, func(ctr dockerio.Container) bool { return ctr.Generation < gen })
	}
}

// removeStale removes, off the actor goroutine, the listed containers stale says
// this lease no longer owns.
func (a *Actor) removeStale(c actor.Context, listed []dockerio.Container, stale func(dockerio.Container) bool) {
	var ids []string
	for _, ctr := range listed {
		if stale(ctr) {
			ids = append(ids, ctr.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	a.log().Warn().Strs("containers", ids).Msg("removing containers of settled attempts")
	eng := a.deps.Engine
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := eng.RemoveContainers(ctx, ids); err != nil {
			a.log().Warn().Err(err).Msg("remove stale containers")
		}
	}()
}

type confirmedDeath struct {
	generation uint64
	death      ContainerDied
	confirmed  *dockerio.Container // nil: the container still runs (stale event)
}

func (a *Actor) beginFailing(c actor.Context, f RuntimeFailing) {
	now := a.deps.Now()
	f.At = now
	if err := a.commit(c, []persistence.Event{event(EvRuntimeFailing, now, f)}, nil); err != nil {
		return
	}
	a.startFailureCapture(c)
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
	job := a.job(a.spec.Load())
	known := append([]Instance(nil), a.st.Containers...)
	go func() { m.Reply <- job.logs(m.Tail, known) }() // Docker reads never run on the actor
}

func (a *Actor) provisionInfo() messages.ProvisionInfo {
	return provisionInfo(a.spec.Load(), a.st)
}

// --- plumbing --------------------------------------------------------------------

// commit journals events (with their callback rows in the same transaction), then
// applies them, wakes the outbox and reports to the registry. A commit error means
// the store latched; the daemon is draining, so the lease does nothing more.
func (a *Actor) commit(c actor.Context, events []persistence.Event, rows []persistence.OutboxRow) error {
	res, err := a.deps.Store.Commit(persistence.Write{
		Appends: []persistence.Append{{Stream: a.journal.Stream, Events: events}},
		Outbox:  rows,
	})
	if err != nil {
		a.log().Error().Err(err).Msg("journal write failed")
		return err
	}
	due := a.journal.Advance(res, len(events))
	for _, ev := range events {
		from := a.st.Status
		if err := a.st.Apply(ev); err != nil {
			// The handler validated the transition; reaching this is a bug in berth.
			a.log().Error().Err(err).Msg("journaled event does not apply")
		}
		a.deps.Metrics.transition(from, a.st.Status, ev.Type)
	}
	if due {
		if err := a.journal.Snapshot(a.deps.Store, eventVersion, a.deps.Now(), a.st); err != nil {
			a.log().Warn().Err(err).Msg("snapshot")
		}
	}
	if len(rows) > 0 {
		a.sys.Root.Send(a.sys.NewLocalPID(a.set.OutboxPath), &messages.OutboxWake{Lease: a.id})
	}
	a.report()
	return nil
}

func (a *Actor) report() {
	if a.parent == nil {
		return
	}
	spec := a.spec.Load()
	r := Report{Lease: a.id, Admission: spec.Admission, Status: a.st.Status, Info: provisionInfo(spec, a.st)}
	if a.broken {
		r.Info.Status = messages.StatusUnknown
	}
	if a.st.Status == Ready {
		r.Running = len(a.st.Containers)
	}
	a.sys.Root.Send(a.parent, r)
}

// run starts the lease's worker. Its result comes back as a message stamped with
// the worker's epoch.
func (a *Actor) run(c actor.Context, kind string, fn func(ctx context.Context) any) {
	epoch := epochs.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{epoch: epoch, kind: kind, cancel: cancel, done: make(chan struct{})}
	a.worker = w
	self, sys := a.self, a.sys
	go func() {
		defer close(w.done)
		defer cancel()
		msg := stamp(fn(ctx), epoch)
		sys.Root.Send(self, msg)
	}()
}

// runSide starts a short check that is not the lease's worker (it does not block
// provisioning or teardown and is not canceled by them).
func (a *Actor) runSide(c actor.Context, fn func(ctx context.Context) any) {
	self, sys := a.self, a.sys
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sys.Root.Send(self, fn(ctx))
	}()
}

func stamp(msg any, epoch uint64) any {
	switch m := msg.(type) {
	case provisionDone:
		m.epoch = epoch
		return m
	case teardownDone:
		m.epoch = epoch
		return m
	case failureCaptured:
		m.epoch = epoch
		return m
	}
	return msg
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

// drainWorker cancels the worker and waits for it (bounded), so a canceled worker
// cannot create containers after the actor moved on or restarted.
func (a *Actor) drainWorker() {
	w := a.worker
	if w == nil {
		return
	}
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(a.set.WorkerDrain):
		a.log().Error().Str("worker", w.kind).Msg("worker did not drain in time")
	}
	a.worker = nil
}

// after schedules a retry of what, bound to the current epoch counter.
func (a *Actor) after(d time.Duration, what string) {
	self, sys := a.self, a.sys
	token := epochs.Add(1)
	a.worker = &worker{epoch: token, kind: "wait-" + what, cancel: func() {}, done: closedChan, waiting: true}
	time.AfterFunc(d, func() { sys.Root.Send(self, retry{epoch: token, what: what}) })
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (a *Actor) retry(c actor.Context, m retry) {
	if !a.finish(m.epoch) {
		return
	}
	switch {
	case a.st.Status == Deprovisioning:
		a.startTeardown(c)
	case m.what == "resume" && a.st.Status == Provisioning:
		a.startResume(c)
	}
}

func (a *Actor) owns(containerID string) bool {
	_, ok := a.instance(containerID)
	return ok
}

func (a *Actor) instance(containerID string) (Instance, bool) {
	for _, inst := range a.st.Containers {
		if inst.ContainerID == containerID {
			return inst, true
		}
	}
	return Instance{}, false
}

func findContainer(cs []dockerio.Container, id string) (dockerio.Container, bool) {
	for _, c := range cs {
		if c.ID == id {
			return c, true
		}
	}
	return dockerio.Container{}, false
}

// callback builds the outbox row of a terminal decision. Provision outcomes go to
// the exact completion URL; deaths and deprovisions to the lifecycle URL.
func (a *Actor) callback(spec *Spec, status, errText string, lifecycle bool) persistence.OutboxRow {
	body, _ := json.Marshal(messages.Callback{
		LeaseUUID:        a.id,
		Status:           status,
		Error:            errText,
		Backend:          a.set.BackendName,
		BackendStorageID: a.set.StorageID,
	})
	url, kind := spec.CallbackURL, "operation"
	if lifecycle {
		url, kind = spec.LifecycleURL, "lifecycle"
	}
	return persistence.OutboxRow{Lease: a.id, DeliveryID: uuid.NewString(), URL: url, Body: body, Kind: kind, CreatedAt: a.deps.Now()}
}

// callbackError is the curated, on-chain-safe error text of a failure reason.
func callbackError(reason string) string {
	switch reason {
	case messages.ReasonContainerExited:
		return "ContainerExited: a container exited"
	case messages.ReasonImagePullFailed:
		return "ImagePullFailed: an image could not be pulled"
	case messages.ReasonHealthCheckFailed:
		return "HealthCheckFailed: a health check did not pass"
	case messages.ReasonContainerStartFailed:
		return "ContainerStartFailed: a container could not be started"
	case messages.ReasonCleanupFailed:
		return "CleanupFailed: cleanup did not complete"
	}
	return "Internal: provisioning failed on the provider"
}

// log is the lease's logger, built when a line is written: a logger per idle
// actor would cost half a kilobyte each.
func (a *Actor) log() *zerolog.Logger {
	l := a.deps.Log.With().Str("lease_uuid", a.id).Logger()
	return &l
}
