// Package registry is the parent of every lease actor: the lease directory,
// admission (validation, SKU resolution, the resource pool and tenant quotas), and
// the read model behind GET /provisions and /stats. Admissions are journaled in the
// "registry" stream before the 202 is sent; the pool is derived from that journal.
package registry

import (
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
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
	ReconcilerPath    string // asked for a recovery pass whenever the registry (re)starts
	ReclaimerPath     string // told when a lease closed, so its network goes soon
	NetpoolPath       string // told too: a pool network returns to the pool
	// Callbacks is the callback URL policy: no link-local target in any spelling,
	// never one of berthd's own listeners.
	Callbacks callback.Policy
	// Retention (retain_on_close, max_retained_disk_mb, max_retained_leases_per_tenant).
	RetainOnClose        bool
	MaxRetainedDiskMB    int64
	MaxRetainedPerTenant int
	ReaperPath           string // asked for a pass when a record is evicted or a hold finished
	// QuotaEnforced is whether tenant volumes are kernel-quota-bounded (/stats says so).
	QuotaEnforced bool
}

// Deps are the registry's collaborators.
type Deps struct {
	Store     *persistence.Store
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
	// Quiet is marked with every admission queued, so provisions' workers wait
	// out a burst before their Docker work (nil: not marked).
	Quiet *supervisors.Quiet
	// Transitions is the ring of recent lease transitions (GET /debug/transitions);
	// nil = a messages.TransitionsKept ring made on first use.
	Transitions *Transitions
	// Replayed is what startup's verification replayed (nil: the first start loads too).
	Replayed *Replayed
}

// entry is one lease the registry knows about.
type entry struct {
	id       string
	spec     *atomic.Pointer[lease.Spec] // shared with the lease actor's producer
	pid      *actor.PID
	report   messages.LeaseReport
	reported bool
	closing  bool // a deprovision was forwarded: no re-admission until it settles
	closed   bool // the closed receipt is journaled; waiting for the actor to stop
	stopped  bool // the actor stopped without closing (restart limit): shown unknown
	respawn  bool // a new admission arrived while the old actor was still stopping
	deciding bool // a maintenance was forwarded: no replacement until the lease reports

	// admitted: admitted by this incarnation and not reported yet, so its first
	// report is its admission in the transition ring.
	admitted bool
	// shown is the status the transition ring last recorded for it.
	shown string
}

// Actor is the registry actor.
type Actor struct {
	deps       *Deps
	set        *Settings
	log        zerolog.Logger
	st         *State
	pool       *Pool
	leases     map[string]*entry
	byPID      map[string]*entry
	journal    persistence.Cursor
	ready      bool // startup recovery finished: accounting is whole
	stopping   bool // restarting or stopping: children stop because we do
	startedAt  time.Time
	retaining  map[string]int64       // closes that decided to retain, by lease: their footprint (MB)
	batch      admissionBatch         // validated admissions waiting for their journal commit
	closures   []messages.LeaseClosed // closes waiting for their journal commit (closures.go)
	closingIDs map[string]bool        // the leases of closures
}

// New returns the producer of the registry actor.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{deps: deps, set: deps.Settings, log: deps.Log.With().Str("actor", "registry").Logger()}
	}
}

// Receive dispatches the registry's messages.
func (a *Actor) Receive(c actor.Context) {
	a.closuresBefore(c, c.Message())
	a.beforeMessage(c, c.Message())
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *actor.Restarting, *actor.Stopping:
		a.stopping = true
	case *messages.Admit:
		if err := a.admit(c, m.Req, m.Reply); err != nil {
			m.Reply <- err
		}
	case flushAdmissions:
		a.flushAdmissions(c)
	case *messages.Deprovision:
		a.deprovision(c, m)
	case *messages.Maintain:
		a.maintain(c, m)
	case *messages.Restore:
		m.Reply <- a.restore(c, m.Req)
	case *messages.ListRetentions:
		m.Reply <- a.listRetentions(m)
	case *messages.RetentionSweep:
		m.Reply <- a.sweep(m)
	case *messages.RetentionReaped:
		a.reaped(m)
	case *messages.RetentionOrphaned:
		a.orphaned(m)
	case *messages.HoldDone:
		a.holdDone(c, m)
	case *messages.GetReleases:
		a.forward(c, m.Lease, m, func(err error) { m.Reply <- messages.ReleasesReply{Err: err} })
	case *messages.GetInfo:
		a.forward(c, m.Lease, m, func(err error) { m.Reply <- messages.InfoReply{Err: err} })
	case *messages.GetLogs:
		a.getLogs(c, m)
	case *messages.GetProvision:
		m.Reply <- a.getProvision(m.Lease)
	case *messages.ListProvisions:
		m.Reply <- a.list(m)
	case *messages.DebugLeases:
		m.Reply <- a.debugLeases(m)
	case *messages.DebugTransitions:
		m.Reply <- a.transitions().Since(m.Since, m.Limit)
	case *messages.GetStats:
		if !a.ready {
			// Until recovery has joined journals with Docker the ledger is not whole.
			m.Reply <- messages.StatsReply{Err: messages.Refuse(messages.ErrUnavailable, "accounting is being recovered")}
			return
		}
		stats := a.pool.Stats(a.running())
		for _, r := range a.st.Retentions {
			if r.Status != RetentionRestoring {
				stats.RetainedDiskMB += r.Record.DiskMB()
			}
		}
		stats.DiskQuotaEnforced = a.set.QuotaEnforced
		m.Reply <- messages.StatsReply{Stats: stats}
	case *messages.GetHealth:
		m.Reply <- a.health()
	case messages.LeaseReport:
		if e, ok := a.leases[m.Lease]; ok && m.Admission >= e.report.Admission {
			a.noteReport(e, m)
			e.report, e.reported, e.deciding = m, true, false
			a.restoreReport(m)
		}
	case messages.LeaseClosed:
		a.leaseClosed(c, m)
	case flushClosures:
		a.flushClosures(c)
	case *actor.Terminated:
		a.terminated(c, m)
	case messages.Recovered:
		if !a.ready {
			took := time.Since(a.startedAt)
			a.phase("recovery", took)
			a.log.Info().Int("leases", len(a.st.Leases)).Dur("took", took).Msg("startup recovery complete; admitting work")
		}
		a.ready = true
	case *messages.ListLeases:
		m.Reply <- messages.LeasesReply{Leases: a.st.Sorted()}
	case *messages.Deliver:
		a.deliver(c, m)
	case messages.RetryStopped:
		a.retryStopped(c)
	}
}

// Describe summarises the registry for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.pool == nil {
		return "loading", 0
	}
	al := a.pool.Allocated()
	return fmt.Sprintf("%d leases, ready=%t, allocated cpu %.2f mem %dMB disk %dMB",
		len(a.st.Leases), a.ready, float64(al.CPUMilli)/1000, al.MemoryMB, al.DiskMB), 0
}

func (a *Actor) started(c actor.Context) {
	a.startedAt = time.Now()
	a.leases, a.byPID = map[string]*entry{}, map[string]*entry{}
	st, seq, ok := a.deps.Replayed.takeState()
	var err error
	if !ok {
		st, seq, err = LoadState(a.deps.Store)
	}
	if err != nil {
		// Startup verified every stream; failing here means the store broke since.
		a.deps.Tree.Fail(fmt.Errorf("registry: %w", err))
		a.st, a.pool = newState(), NewPool(a.set.Totals, a.set.TenantQuota)
		return
	}
	a.st = st
	a.journal = persistence.Cursor{Stream: Stream, Seq: seq, Every: a.set.SnapshotEvery}
	a.pool = NewPool(a.set.Totals, a.set.TenantQuota)
	a.retaining = map[string]int64{}
	for id, r := range st.Retentions {
		a.countRetained(id, r)
	}
	for _, id := range st.Sorted() {
		spec := st.Leases[id]
		a.pool.Set(id, spec.Tenant, Need(spec))
		a.spawn(c, spec)
	}
	a.phase("registry_rebuild", time.Since(a.startedAt))
	a.ready = false
	a.deps.Tree.Send(a.set.ReconcilerPath, messages.RecoverNow{})
}

func (a *Actor) spawn(c actor.Context, spec *lease.Spec) {
	e := a.leases[spec.Lease]
	if e == nil {
		e = &entry{id: spec.Lease, spec: &atomic.Pointer[lease.Spec]{}}
		a.leases[spec.Lease] = e
	}
	e.spec.Store(spec)
	e.closing, e.closed, e.stopped = false, false, false
	pid, err := a.deps.Tree.Spawn(c, supervisors.Spec{
		Name:         "lease-" + spec.Lease,
		Kind:         "lease",
		Producer:     lease.New(a.deps.LeaseDeps, e.spec),
		MailboxLimit: a.set.LeaseMailboxLimit,
	})
	if err != nil {
		// The previous actor of this lease is still stopping; spawn when it has.
		a.log.Warn().Err(err).Str("lease_uuid", spec.Lease).Msg("lease actor not spawned yet; retrying when its predecessor stops")
		e.respawn = true
		return
	}
	e.pid, e.respawn = pid, false
	a.byPID[pid.Id] = e
}

// admit validates and reserves, then queues the admission for the batch's one
// journal commit (admissions.go); nothing is reserved or queued for a refused
// request, which gets its error back at once. An accepted one is answered when
// its batch is committed.
func (a *Actor) admit(c actor.Context, req messages.ProvisionRequest, reply chan<- error) error {
	if !a.ready {
		return messages.Refuse(messages.ErrUnavailable, "recovering state, retry shortly")
	}
	now := a.deps.Now()
	spec, err := a.set.prepare(req, now)
	if err != nil {
		return err
	}
	if a.batch.holds(spec.Lease) {
		return messages.Refuse(messages.ErrAlreadyProvisioned, "lease already provisioned")
	}
	e := a.leases[spec.Lease]
	replacing := false
	if e != nil && !e.closed {
		if !e.reported || e.deciding || e.closing || e.stopped || e.report.Status != string(lease.Failed) {
			return messages.Refuse(messages.ErrAlreadyProvisioned, "lease already provisioned")
		}
		replacing = true // a failed lease is replaced; its fail_count carries over
	}
	need := Need(spec)
	if err := a.pool.Check(spec.Lease, spec.Tenant, need); err != nil {
		return err
	}
	spec.Admission = a.st.Admissions + 1 + uint64(len(a.batch.items))
	a.queueAdmission(c, admission{spec: spec, event: admittedEvent(spec, now), reply: reply, replacing: replacing,
		before: a.pool.use(spec.Lease)})
	a.pool.Set(spec.Lease, spec.Tenant, need) // later requests of the batch see it taken
	return nil
}

// admitted finishes one committed admission: the lease actor is spawned (or the
// failed one re-provisions) and the request is answered.
func (a *Actor) admitted(c actor.Context, ad admission) {
	spec := ad.spec
	if ad.replacing {
		// Until the lease reports on the new admission it is not "failed" any more:
		// a second request queued behind this one is already provisioned.
		e := a.leases[spec.Lease]
		e.reported = false
		e.spec.Store(spec)
		c.Send(e.pid, lease.Reprovision{})
	} else {
		a.spawn(c, spec)
		a.leases[spec.Lease].admitted = true
	}
	a.log.Info().Str("lease_uuid", spec.Lease).Uint64("admission", spec.Admission).Bool("replacing", ad.replacing).
		Int("instances", spec.Instances()).Msg("lease admitted")
	ad.reply <- nil
}

func (a *Actor) deprovision(c actor.Context, m *messages.Deprovision) {
	if !messages.ValidLeaseID(m.Lease) {
		m.Reply <- messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID")
		return
	}
	e := a.leases[m.Lease]
	if e == nil || e.closed {
		if e != nil && e.respawn {
			m.Reply <- messages.Refuse(messages.ErrLifecyclePending, "lease is being replaced, retry shortly")
			return
		}
		m.Reply <- nil // idempotent: an unknown or closed lease is gone
		return
	}
	if e.stopped {
		a.spawn(c, e.spec.Load()) // give the lease actor another chance to own its close
	}
	if !e.closing {
		// The retention decision is made once, when the close is first asked for.
		if m.Retain = a.retainDecision(e.spec.Load()); m.Retain {
			a.retaining[m.Lease] = durableFootprint(e.spec.Load())
		}
	}
	e.closing = true
	a.forward(c, m.Lease, m, func(err error) { m.Reply <- err })
}

// maintain validates a restart or update and hands it to the lease actor, which
// decides it (status, maintenance ID, the maintenance fence) and journals the
// intent before answering. An update's manifest passes the provision rules, its
// services must be the lease's, and it keeps the lease's frozen profiles.
func (a *Actor) maintain(c actor.Context, m *messages.Maintain) {
	if !a.ready {
		m.Reply <- messages.Refuse(messages.ErrUnavailable, "recovering state, retry shortly")
		return
	}
	e := a.leases[m.Req.LeaseUUID]
	if e == nil || e.closed || e.closing {
		m.Reply <- messages.Refuse(messages.ErrNotFound, "lease not provisioned")
		return
	}
	in := lease.Maintain{Kind: m.Kind, ID: m.MaintenanceID, AdmittedAt: m.AdmittedAt}
	if m.Kind == messages.MaintenanceUpdate {
		target, err := a.set.prepareUpdate(e.spec.Load(), m.Req.Payload)
		if err != nil {
			m.Reply <- err
			return
		}
		in.Target = target
	}
	// Until the lease reports after deciding, its last report (maybe "failed")
	// must not admit a replacement provision behind the maintenance's back.
	e.deciding = true
	a.forward(c, m.Req.LeaseUUID, &lease.MaintainCommand{Maintain: in, Reply: m.Reply}, func(err error) {
		e.deciding = false
		m.Reply <- err
	})
}

// health is whether accounting is whole (startup recovery done) and the store
// this actor writes is healthy, with the store's open-time findings as detail.
func (a *Actor) health() messages.HealthReply {
	if err := a.deps.Store.Check(); err != nil {
		a.log.Warn().Err(err).Msg("health: state store")
		return messages.HealthReply{Reason: "state store unhealthy"}
	}
	if !a.ready {
		return messages.HealthReply{Reason: "startup recovery in progress"}
	}
	return messages.HealthReply{Ready: true, Detail: a.deps.Store.Findings()}
}

// forward hands a command to a live lease's actor, refusing at once when the lease
// is unknown or its backlog is over the limit.
func (a *Actor) forward(c actor.Context, id string, msg any, refuse func(error)) {
	e := a.leases[id]
	if e == nil || e.closed || e.pid == nil {
		refuse(messages.Refuse(messages.ErrNotFound, "lease not found"))
		return
	}
	if e.stopped {
		refuse(messages.Refuse(messages.ErrUnavailable, "lease actor is being recovered"))
		return
	}
	if n, ok := a.deps.Tree.Dir.Get(e.pid.Id); ok && n.Overloaded() {
		refuse(messages.Refuse(messages.ErrBusy, "lease is busy, retry later"))
		return
	}
	c.Send(e.pid, msg)
}

func (a *Actor) deliver(c actor.Context, m *messages.Deliver) {
	e := a.leases[m.Lease]
	if e == nil || e.closed || e.stopped || e.pid == nil {
		if m.Dropped != nil {
			m.Dropped()
		}
		return
	}
	if n, ok := a.deps.Tree.Dir.Get(e.pid.Id); ok && n.Overloaded() {
		if m.Dropped != nil {
			m.Dropped()
		}
		return
	}
	c.Send(e.pid, m.Msg)
}

func (a *Actor) getLogs(c actor.Context, m *messages.GetLogs) {
	e := a.leases[m.Lease]
	if e == nil || e.closed {
		// A closed or unknown lease may still have a stored failure capture.
		if capt, err := lease.LatestCapture(a.deps.Diag, m.Lease); err == nil && capt != nil {
			logs := map[string]string{}
			for _, cc := range capt.Containers {
				logs[fmt.Sprintf("%s/%d", cc.Service, cc.Index)] = cc.Logs
			}
			m.Reply <- messages.LogsReply{Logs: logs}
			return
		}
		m.Reply <- messages.LogsReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
		return
	}
	a.forward(c, m.Lease, m, func(err error) { m.Reply <- messages.LogsReply{Err: err} })
}

func (a *Actor) getProvision(id string) messages.ProvisionReply {
	if e := a.leases[id]; e != nil && !e.closed {
		info := a.view(e)
		return messages.ProvisionReply{Info: &info}
	}
	if r := a.st.Retentions[id]; r != nil {
		info := retainedView(r)
		return messages.ProvisionReply{Info: &info}
	}
	capt, err := lease.LatestCapture(a.deps.Diag, id)
	if err != nil || capt == nil {
		return messages.ProvisionReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
	}
	// The diagnostics fallback: the stored failure, without a terminal budget.
	return messages.ProvisionReply{Info: &messages.ProvisionInfo{
		LeaseUUID: id, Status: messages.StatusFailed, CreatedAt: capt.At, FailCount: capt.FailCount,
		Reason: capt.Reason, Message: capt.Message,
	}}
}

// view is a lease's record as last reported, or what the spec alone says.
func (a *Actor) view(e *entry) messages.ProvisionInfo {
	spec := e.spec.Load()
	var info messages.ProvisionInfo
	if e.reported && e.report.Admission == spec.Admission {
		info = e.report.Info
	} else {
		info = messages.ProvisionInfo{LeaseUUID: spec.Lease, ProviderUUID: spec.ProviderUUID,
			Status: messages.StatusProvisioning, CreatedAt: spec.AdmittedAt, Tenant: spec.Tenant,
			Quantity: spec.Instances(), Items: spec.Items, ServiceImages: spec.ServiceImages(),
			FailCount: e.report.Info.FailCount, TerminalBudget: e.report.Info.TerminalBudget}
		if info.TerminalBudget == nil {
			info.TerminalBudget = &messages.TerminalBudget{Verdict: "retry"}
		}
	}
	if e.stopped {
		info.Status = messages.StatusUnknown
	}
	return info
}

func (a *Actor) list(m *messages.ListProvisions) messages.ProvisionsReply {
	out := messages.ProvisionsReply{Provisions: []messages.ProvisionInfo{}}
	if len(m.Leases) > 0 {
		for _, id := range m.Leases {
			if e := a.leases[id]; e != nil && !e.closed {
				out.Provisions = append(out.Provisions, a.view(e))
			}
		}
		return out
	}
	ids := make([]string, 0, len(a.leases))
	for id, e := range a.leases {
		if !e.closed && id > m.Continue {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if m.Limit > 0 && len(ids) > m.Limit {
		ids = ids[:m.Limit]
		out.Continue = ids[len(ids)-1]
	}
	for _, id := range ids {
		out.Provisions = append(out.Provisions, a.view(a.leases[id]))
	}
	return out
}

func (a *Actor) running() int {
	n := 0
	for _, e := range a.leases {
		if !e.closed {
			n += e.report.Running
		}
	}
	return n
}

// leaseClosed journals the release of a closed lease's reservation, then stops its
// actor. The lease's own stream already holds the closed receipt and its callback.
func (a *Actor) leaseClosed(c actor.Context, m messages.LeaseClosed) {
	e := a.leases[m.Lease]
	if e == nil || e.closed {
		return
	}
	cur := a.st.Leases[m.Lease]
	switch {
	case cur == nil:
		a.markClosed(c, e, m)
	case cur.Admission != m.Admission:
		return // a newer admission superseded the closed one
	case m.Retention == nil:
		a.queueClosure(c, m) // committed with the closes behind it (closures.go)
	default:
		// A retained close may evict another record of its tenant: decided
		// against the committed records, alone.
		evs, evicted := a.closedEvents(m, a.deps.Now())
		if err := a.commit(evs); err != nil {
			return
		}
		a.closeCommitted(m, evicted)
		a.markClosed(c, e, m)
	}
}

// closeCommitted brings the pool and the retentions in line with a journaled close.
func (a *Actor) closeCommitted(m messages.LeaseClosed, evicted bool) {
	a.pool.Release(m.Lease)
	delete(a.retaining, m.Lease)
	touched := []string{m.Lease}
	if m.Requarantined != "" {
		touched = append(touched, m.Requarantined)
	}
	for id, r := range a.st.Retentions {
		if r.Status == RetentionReaping {
			touched = append(touched, id)
		}
	}
	a.afterCommitRetentions(touched...)
	if m.Retention != nil {
		a.log.Info().Str("lease_uuid", m.Lease).Time("retained_until", m.Retention.RetainedUntil).
			Int64("disk_mb", m.Retention.DiskMB()).Msg("lease closed; its data is retained")
	}
	if evicted {
		a.deps.Tree.Send(a.set.ReaperPath, messages.ReapNow{})
	}
}

// markClosed forgets a closed lease: the cleanup passes hear it is gone and its
// actor stops.
func (a *Actor) markClosed(c actor.Context, e *entry, m messages.LeaseClosed) {
	e.closed = true
	a.deps.Tree.Send(a.set.ReclaimerPath, &messages.LeaseGone{Lease: m.Lease})
	if a.set.NetpoolPath != "" {
		a.deps.Tree.Send(a.set.NetpoolPath, &messages.LeaseGone{Lease: m.Lease})
	}
	if e.pid != nil {
		c.Stop(e.pid)
	} else {
		delete(a.leases, m.Lease)
	}
}

func (a *Actor) terminated(c actor.Context, m *actor.Terminated) {
	e := a.byPID[m.Who.Id]
	if e == nil || a.stopping {
		return // a stopping registry's children stop with it; the next one respawns them
	}
	delete(a.byPID, m.Who.Id)
	e.pid = nil
	switch {
	case e.respawn:
		a.spawn(c, e.spec.Load())
	case e.closed:
		delete(a.leases, e.id)
	default:
		// Stopped past its restart limit: hold it as unknown, keep its reservation;
		// the reconciler's next pass retries it.
		e.stopped = true
		a.note(e, shownUnknown, "lease actor stopped after repeated failures")
		a.log.Error().Str("lease_uuid", e.id).Msg("lease actor stopped after repeated failures; lease shown unknown")
	}
}

func (a *Actor) retryStopped(c actor.Context) {
	for _, e := range a.leases {
		if e.stopped && !e.closed && e.pid == nil {
			a.log.Info().Str("lease_uuid", e.id).Msg("respawning stopped lease actor")
			a.spawn(c, e.spec.Load())
		}
	}
}

func (a *Actor) commit(events []persistence.Event) error {
	res, err := a.deps.Store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: Stream, Events: events}}})
	if err != nil {
		a.log.Error().Err(err).Msg("journal write failed")
		return err
	}
	due := a.journal.Advance(res, len(events))
	for _, ev := range events {
		if err := a.st.Apply(ev); err != nil {
			a.log.Error().Err(err).Msg("journaled event does not apply")
		}
	}
	if due {
		if err := a.journal.Snapshot(a.deps.Store, eventVersion, a.deps.Now(), a.st); err != nil {
			a.log.Warn().Err(err).Msg("registry snapshot")
		}
	}
	return nil
}

func (a *Actor) phase(name string, d time.Duration) {
	if a.deps.Phase != nil {
		a.deps.Phase(name, d)
	}
}
