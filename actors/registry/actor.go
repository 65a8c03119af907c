// Package registry is the parent of every lease actor: the lease directory,
// admission (validation, SKU resolution, the resource pool and tenant quotas), and
// the read model behind GET /provisions and /stats. Admissions are journaled in the
// "registry" stream before the 202 is sent; the pool is derived from that journal.
// Decide (decide.go) chooses everything the registry does; the actor runs it.
package registry

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/messages/policy"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the registry, mapped from the config by cmd/berthd.
type Settings struct {
	Totals            Resources
	TenantQuota       Resources // zero dimension = unlimited
	SKUMapping        map[string]string
	SKUProfiles       map[string]lease.Profile
	ScratchMB         int64 // container_tmpfs_size_mb, pinned by diskless instances
	AllowedRegistries []string
	LeaseMailboxLimit int
	SnapshotEvery     int
	ReconcilerPath    messages.Address // asked for a recovery pass whenever the registry (re)starts
	ReclaimerPath     messages.Address // told when a lease closed, so its network goes soon
	NetpoolPath       messages.Address // told too: a pool network returns to the pool
	// Callbacks is the callback URL policy: no link-local target in any spelling,
	// never one of berthd's own listeners.
	Callbacks callback.Policy
	// Retention (retain_on_close, max_retained_disk_mb, max_retained_leases_per_tenant).
	RetainOnClose        bool
	MaxRetainedDiskMB    int64
	MaxRetainedPerTenant int
	ReaperPath           messages.Address // asked for a pass when a record is evicted or a hold finished
	// QuotaEnforced is whether tenant volumes are kernel-quota-bounded (/stats says so).
	QuotaEnforced bool
	CustomDomains *policy.CustomDomains // the rule tenants' custom domains meet; nil: ingress off
	// ImagePins and TenantImagePins bound the distinct images pinned in all
	// and by one tenant (images.go; 0: unlimited).
	ImagePins, TenantImagePins int
}

// DefaultSettings are the registry's fixed settings: a lease actor's backlog
// limit (256) and the siblings it tells; the pool, SKUs and retention policy
// come from the config.
func DefaultSettings() Settings {
	return Settings{LeaseMailboxLimit: 256, SnapshotEvery: 256, ReconcilerPath: messages.Reconciler,
		ReclaimerPath: messages.Reclaimer, NetpoolPath: messages.Netpool, ReaperPath: messages.Reaper,
		ImagePins: DefaultImagePins, TenantImagePins: DefaultTenantImagePins}
}

// Spec is the registry's row in the tree: its lease actors restart under
// LeaseStrategy, and askers get 503 beyond a backlog of 1024.
func Spec(deps *Deps) supervisors.Spec {
	return supervisors.Spec{Name: "registry", Kind: "registry", Producer: New(deps), MailboxLimit: 1024,
		Supervisor: supervisors.LeaseStrategy()}
}

// Deps are the registry's collaborators.
type Deps struct {
	Store     Store
	Diag      *persistence.Diagnostics
	Tree      *supervisors.Tree
	LeaseDeps *lease.Deps
	Settings  *Settings
	Log       zerolog.Logger
	Now       func() time.Time
	// Phase records how long a startup phase took (berth_startup_phase_seconds).
	Phase func(phase string, d time.Duration)
	// AdmissionBatches observes how many admissions each journal commit carried
	// (berth_admission_batch_size); nil = not recorded.
	AdmissionBatches prometheus.Observer
	// ClosureBatches observes how many lease closes each journal commit carried
	// (berth_closure_batch_size); nil = not recorded.
	ClosureBatches prometheus.Observer
	// DemoteRefused counts restores refused demote_exceeds_tier
	// (berth_restore_demote_refused_total); nil = not counted.
	DemoteRefused prometheus.Counter
	// Quiet is marked with every admission queued, so provisions' workers wait
	// out a burst before their Docker work (nil: not marked).
	Quiet *supervisors.Quiet
	// Transitions is the ring of recent lease transitions (GET /debug/transitions);
	// nil = a messages.TransitionsKept ring made on first use.
	Transitions *Transitions
	// Replayed is what startup's verification replayed (nil: the first start loads too).
	Replayed *Replayed
}

// Store is what the registry needs of the state store: its journal and its
// health (*persistence.Store, or in tests supervisors.FaultyStore).
type Store interface {
	supervisors.JournalStore
	Check() error
	Findings() []string
	Retired(stream string) (bool, error) // a lease stream the reconciler retired
}

// Actor is the registry actor: it runs Decide's decisions on its directory.
type Actor struct {
	deps       *Deps
	set        *Settings
	log        zerolog.Logger
	dir        *Directory
	journal    *supervisors.Journal[*State]
	tasks      *supervisors.Tasks
	admissions *supervisors.Group[admission]            // validated admissions waiting for their commit
	closes     *supervisors.Group[messages.LeaseClosed] // plain closes waiting for their commit
	c          actor.Context
	stopping   bool // restarting or stopping: children stop because we do
	startedAt  time.Time
	// incarnation names this instance to the reconciler; recovery closes the
	// wait for its recovery pass (recovery.go).
	incarnation uint64
	recovery    func()
	reminders   int // RecoverNow asks so far
}

// New returns the producer of the registry actor.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{deps: deps, set: deps.Settings, log: deps.Log.With().Str("actor", "registry").Logger()}
	}
}

// Tasks are the registry's timers and flushes (supervisors.Tasked).
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// Receive commits a pending batch unless the message commutes with it, answers
// reads from the directory, and decides everything else.
func (a *Actor) Receive(c actor.Context) {
	msg := c.Message()
	if a.closes != nil && (a.closes.Before(msg) || a.admissions.Before(msg)) {
		return
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.started(c)
	case *actor.Restarting, *actor.Stopping:
		a.stopping = true
		if a.recovery != nil { // the wait ends with this instance
			a.recovery()
			a.recovery = nil
		}
	case messages.Recovered:
		a.recovered(m)
		a.step(m)
	case askRecovery:
		a.remind()
	case *messages.CustomDomainReady:
		a.customDomainReady(m)
	case *messages.RetentionSweep:
		rep := messages.RetentionSweepReply{}
		if a.step(m) {
			rep = a.dir.sweepReply()
		}
		m.Reply <- rep
	default:
		if !a.read(msg) && !givenUp(msg) {
			a.step(msg)
		}
	}
}

// givenUp reports whether msg is a request its asker already answered with an
// error (its ticket dropped or past its deadline): it must change nothing, so
// it is not decided at all. A restore is admitted in the decision that takes
// it, so its ticket is taken here; an admission's is taken at its batch's
// commit, a close's and a maintenance's by the lease as it journals them.
func givenUp(msg any) bool {
	switch m := msg.(type) {
	case *messages.Admit:
		return m.Ticket.Dropped()
	case *messages.Deprovision:
		return m.Ticket.Dropped()
	case *messages.Maintain:
		return m.Ticket.Dropped()
	case *messages.Restore:
		return !m.Ticket.Take()
	}
	return false
}

// Describe summarises the registry for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.dir == nil {
		return "loading", 0
	}
	al := a.dir.Pool.Allocated()
	return fmt.Sprintf("%d leases, ready=%t, allocated cpu %.2f mem %dMB disk %dMB",
		len(a.dir.St.Leases), a.dir.Ready, float64(al.CPUMilli)/1000, al.MemoryMB, al.DiskMB), 0
}

// started loads the journal (or takes what startup replayed), folds the
// directory from it, spawns every live lease's actor and asks for recovery.
func (a *Actor) started(c actor.Context) {
	a.startedAt, a.c, a.incarnation = time.Now(), c, nextIncarnation()
	a.tasks = supervisors.NewTasks(c, 0)
	a.groups()
	a.journal = &supervisors.Journal[*State]{Store: a.deps.Store, Stream: Stream, Version: eventVersion,
		Every: a.set.SnapshotEvery, Now: a.deps.Now, Log: a.log}
	st, seq, ok := a.deps.Replayed.takeState()
	var err error
	if !ok {
		st, seq, err = LoadState(a.deps.Store)
	}
	if err != nil {
		// Startup verified every stream; failing here means the store broke since.
		a.deps.Tree.Fail(fmt.Errorf("registry: %w", err))
		st, seq = newState(), 0
	}
	a.journal.Resume(st, seq)
	a.dir = newDirectory(a.set, st)
	a.journal.Fold = a.dir.fold
	if err != nil {
		return
	}
	a.step(started{})
	a.awaitRecovery()
	a.phase("registry_rebuild", time.Since(a.startedAt))
}

// env is what Decide may know beyond the directory.
func (a *Actor) env() Env {
	return Env{Now: a.deps.Now(), Incarnation: a.incarnation, Stopping: a.stopping, Queued: a.admissions.Items(), Busy: func(pid *actor.PID) bool {
		n, ok := a.deps.Tree.Dir.Get(messages.Address(pid.Id))
		return ok && n.Overloaded()
	}, Used: a.used}
}

// used reports whether a lease UUID has a lease stream, or had one the
// reconciler retired once its close was older than releases_max_age: its
// closed receipt is the fence that keeps a closed UUID closed, read at
// admission (point look-ups; no set of closed UUIDs is held — see
// fence_bench_test.go). A stream that does not decode was a lease too.
func (a *Actor) used(id string) (bool, error) {
	l, err := a.deps.Store.Load(lease.Stream(id))
	if errors.Is(err, persistence.ErrCorrupt) {
		a.log.Warn().Err(err).Str("lease_uuid", id).Msg("lease stream unreadable at admission; the UUID is refused")
		return true, nil
	}
	if err != nil || l.LastSeq > 0 {
		return l.LastSeq > 0, err
	}
	return a.deps.Store.Retired(lease.Stream(id))
}

// step decides one input and runs the decision.
func (a *Actor) step(in any) bool { return a.execute(Decide(a.dir, in, a.env())) }

// execute journals a decision's events (applied by the journal), then runs its
// effects — or, when the commit failed, its Failed ones. It reports the commit.
func (a *Actor) execute(d Decision) bool {
	return supervisors.Execute(d, func(evs []persistence.Event) error { return a.journal.Commit(evs) }, a.run) == nil
}

// run carries out one effect.
func (a *Actor) run(fx Effect) {
	switch fx := fx.(type) {
	case Spawn:
		pid, err := a.deps.Tree.Spawn(a.c, supervisors.Spec{Name: "lease-" + fx.Spec.Lease, Kind: "lease",
			Producer: lease.New(a.deps.LeaseDeps, fx.Spec), MailboxLimit: a.set.LeaseMailboxLimit})
		a.dir.spawned(fx, pid)
		if err != nil {
			// Decided once this decision's effects have run (a close's Move among them).
			a.c.Send(a.c.Self(), spawnFailed{Lease: fx.Spec.Lease, Err: err})
		}
	case Send:
		if e := a.dir.entries[fx.Lease]; e != nil && e.pid != nil {
			a.c.Send(e.pid, fx.Msg)
		} else if fx.Reply != nil {
			// Only a close is sent to an actor just spawned: one not spawned yet
			// (its predecessor still stops) owns it later.
			fx.Reply <- messages.Refuse(messages.ErrLifecyclePending, "lease actor is being recovered, retry shortly")
		}
	case Stop:
		if e := a.dir.entries[fx.Lease]; e != nil && e.pid != nil {
			a.c.Stop(e.pid)
		}
	case Tell:
		if fx.Path != "" {
			a.deps.Tree.Send(fx.Path, fx.Msg)
		}
	case Answer:
		fx.Reply <- fx.Err
	case Queue:
		if ad, ok := fx.Item.(admission); ok {
			a.admissions.Add(ad.spec.Lease, ad)
			if a.deps.Quiet != nil {
				a.deps.Quiet.Mark()
			}
		} else if m, ok := fx.Item.(messages.LeaseClosed); ok {
			a.closes.Add(m.Lease, m)
		}
	case Log:
		a.log.WithLevel(fx.Level).Str("lease_uuid", fx.Lease).Msg(fx.Msg)
	case DemoteRefused:
		if a.deps.DemoteRefused != nil {
			a.deps.DemoteRefused.Inc()
		}
	case Note:
		if fx.From != untold {
			a.transitions().Add(a.deps.Now(), fx.Lease, fx.From, fx.To, fx.Reason)
		}
		a.dir.apply(fx)
	default:
		a.dir.apply(fx)
	}
}

// forward hands a read to a live lease's actor, refusing at once when the lease
// is unknown, recovering or its backlog is over the limit.
func (a *Actor) forward(id string, msg any, refuse func(error)) {
	e := a.dir.entries[id]
	if err := a.dir.reach(e, a.env().Busy); err != nil {
		refuse(err)
		return
	}
	a.c.Send(e.pid, msg)
}

// health is whether accounting is whole (startup recovery done) and the store
// this actor writes is healthy, with the store's open-time findings as detail.
func (a *Actor) health() messages.HealthReply {
	if err := a.deps.Store.Check(); err != nil {
		a.log.Warn().Err(err).Msg("health: state store")
		return messages.HealthReply{Reason: "state store unhealthy"}
	}
	if !a.dir.Ready {
		return messages.HealthReply{Reason: "startup recovery in progress"}
	}
	return messages.HealthReply{Ready: true, Detail: a.deps.Store.Findings()}
}

func (a *Actor) phase(name string, d time.Duration) {
	if a.deps.Phase != nil {
		a.deps.Phase(name, d)
	}
}

func observe(o prometheus.Observer, n int) {
	if o != nil && n > 0 {
		o.Observe(float64(n))
	}
}
