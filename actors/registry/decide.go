package registry

// The registry is decided like a lease (actors/lease/machine.go). Decide is the
// only code that chooses what the registry does: given the directory, an input
// (a request, a lease's report or close, an actor's termination, a batch due for
// its commit, the reaper's asks) and the environment, it returns the events to
// journal in one commit and the effects to run once they are, as data — or those
// to run instead when the commit fails. It changes nothing and touches no actor,
// store or Docker: decide_test.go tables every input from every entry status.
// The actor only runs decisions (actor.go).

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Env is what Decide may know beyond the directory.
type Env struct {
	Now         time.Time
	Incarnation uint64                // this registry instance's: its RecoverNow carries it
	Stopping    bool                  // the registry restarts or stops: its children stop because it does
	Queued      []admission           // the admission batch waiting for its commit
	Busy        func(*actor.PID) bool // whether a lease actor's backlog is over its limit (nil: never)
	// Used reports whether a lease UUID the directory holds no live spec of has
	// a lease stream: a closed lease (its closed receipt is permanent), never to
	// be provisioned or restored into again (nil: none has).
	Used func(lease string) (bool, error)
}

// fenced is the refusal of a provision or restore into id when it is not live
// but was a lease here once (or the store cannot tell), nil when it is free.
func (d *Directory) fenced(id string, env Env) error {
	if d.entries[id] != nil {
		return errClosedUUID // closed; its actor still stops
	}
	if env.Used == nil {
		return nil
	}
	switch used, err := env.Used(id); {
	case err != nil:
		return errStoreUnavailable
	case used:
		return errClosedUUID
	}
	return nil
}

var errClosedUUID = messages.Refuse(messages.ErrAlreadyProvisioned, "lease already provisioned and closed; a lease UUID is never provisioned again")

// Decision is what one input does: Events journaled in one commit, then Effects
// run in order; Failed run instead when the commit fails (the kit runs it).
type Decision = supervisors.Decided[Effect]

// Effect is one thing the actor does for a decision, in order: a lease actor
// spawned (Admitted here: its first report is its admission in the ring), sent
// a command (none running: Reply hears "not found") or stopped, a sibling told
// (Path "": none), a request answered, an item queued for its group commit, a
// line logged, a demote refusal counted — and the directory's changes: an entry's status (To "":
// forgotten), its last report, the status it shows (a transition unless From is
// untold), a pool reservation (Use nil: none), a close's retained footprint.
type Effect any

type (
	Spawn struct {
		Spec     *lease.Spec
		Admitted bool
	}
	Send struct {
		Lease string
		Msg   any
		Reply chan<- error
	}
	Stop struct{ Lease string }
	Tell struct {
		Path messages.Address
		Msg  any
	}
	Answer struct {
		Reply chan<- error
		Err   error
	}
	Queue         struct{ Item any }
	DemoteRefused struct{} // a restore refused demote_exceeds_tier, counted
	Log           struct {
		Lease string
		Level zerolog.Level
		Msg   string
	}

	Move struct {
		Lease string
		To    Status
	}
	Report  struct{ Report messages.LeaseReport }
	Note    struct{ Lease, From, To, Reason string }
	Reserve struct {
		Lease string
		Use   *leaseUse
	}
	Retain struct {
		Lease string
		MB    int64 // 0: no longer retaining
	}
	// CloseSent counts deprovisions forwarded to a lease's actor (N -1: one it
	// refused because its asker had given up).
	CloseSent struct {
		Lease string
		N     int
	}
)

// spawnFailed is the registry's own input when Tree.Spawn refused a lease's
// actor (its name still taken).
type spawnFailed struct {
	Lease string
	Err   error
}

// started is the registry's own input when it (re)starts with its State loaded.
type started struct{}

// Decide chooses what an input does. It never changes the directory: the actor
// journals the events, then runs the effects (directory changes among them).
func Decide(d *Directory, in any, env Env) Decision {
	switch m := in.(type) {
	case started:
		return d.start(env)
	case *messages.Admit:
		return d.admit(m, env)
	case admissionBatch:
		return d.commitAdmissions(m)
	case *messages.Restore:
		return d.restore(m, env)
	case *messages.Deprovision:
		return d.deprovision(m, env)
	case lease.CloseDropped:
		return d.closeDropped(m)
	case *messages.Maintain:
		return d.maintain(m, env)
	case *messages.ReconcileDomains:
		return d.reconcileDomains(m, env)
	case *messages.DomainsReconciled:
		return d.domainsReconciled(m)
	case messages.LeaseReport:
		return d.report(m, env.Now)
	case messages.LeaseClosed:
		return d.leaseClosed(m, env.Now)
	case closeBatch:
		return d.commitCloses(m, env.Now)
	case *actor.Terminated:
		return d.terminated(m, env)
	case spawnFailed:
		return d.spawnFailed(m, env)
	case messages.RetryStopped:
		return d.retryStopped()
	case messages.Recovered:
		return d.lingering(m.Lingering, env.Now)
	case *messages.RetentionSweep:
		return d.sweep(m.Now)
	case *messages.RetentionReaped:
		return d.retentionGone(m.Lease, RetentionReaping, EvRetentionDeleted, env.Now)
	case *messages.RetentionOrphaned:
		return d.retentionGone(m.Lease, RetentionActive, EvRetentionPruned, env.Now)
	case *messages.HoldDone:
		return d.holdDone(m)
	}
	return Decision{}
}

func answer(reply chan<- error, err error) Decision {
	return Decision{Effects: []Effect{Answer{reply, err}}}
}

var errRecovering = messages.Refuse(messages.ErrUnavailable, "recovering state, retry shortly")

// start spawns every live lease's actor and asks the reconciler for a recovery
// pass for this incarnation (asked again until one answers: recovery.go).
func (d *Directory) start(env Env) Decision {
	var out Decision
	for _, id := range d.St.Sorted() {
		out.Effects = append(out.Effects, Spawn{Spec: d.St.Leases[id]})
	}
	out.Effects = append(out.Effects, Tell{d.set.ReconcilerPath, messages.RecoverNow{For: env.Incarnation}})
	return out
}

// admit validates and reserves, then queues the admission for its batch's one
// journal commit (batches.go); a refused request is answered at once, nothing
// reserved. A failed or failing lease is replaced, keeping its fail_count; a
// closed one never is.
func (d *Directory) admit(m *messages.Admit, env Env) Decision {
	if !d.Ready {
		return answer(m.Reply, errRecovering)
	}
	spec, err := d.set.prepare(m.Req, env.Now)
	if err != nil {
		return answer(m.Reply, err)
	}
	replacing := false
	for _, q := range env.Queued {
		if q.spec.Lease == spec.Lease {
			return answer(m.Reply, messages.Refuse(messages.ErrAlreadyProvisioned, "lease already provisioned"))
		}
	}
	switch e, live := d.entries[spec.Lease], d.St.Leases[spec.Lease] != nil; {
	case !live:
		if err := d.fenced(spec.Lease, env); err != nil {
			return answer(m.Reply, err)
		}
	case e == nil || e.status != Reported || (e.report.Status != string(lease.Failed) && e.report.Status != string(lease.Failing)):
		return answer(m.Reply, messages.Refuse(messages.ErrAlreadyProvisioned, "lease already provisioned"))
	default:
		replacing = true
	}
	if err := d.domainClaimed(spec, env.Queued); err != nil {
		return answer(m.Reply, err)
	}
	need := Need(spec)
	if err := d.Pool.Check(spec.Lease, spec.Tenant, need); err != nil {
		return answer(m.Reply, err)
	}
	if err := d.checkImagePins(spec.Lease, spec.Tenant, imageRefs(spec.Services), env.Queued); err != nil {
		return answer(m.Reply, err)
	}
	spec.Admission = d.St.Admissions + 1 + uint64(len(env.Queued))
	ad := admission{spec: spec, event: AdmittedEvent(spec, env.Now), reply: m.Reply, ticket: m.Ticket, replacing: replacing}
	if u, ok := d.Pool.byLease[spec.Lease]; ok {
		ad.before = &u
	}
	// Reserved now: later requests of the batch see it taken.
	return Decision{Effects: []Effect{Queue{ad}, Reserve{spec.Lease, &leaseUse{spec.Tenant, need}}}}
}

// deprovision forwards a close to the lease's actor, with the retention decision
// made when the close is first asked for. Only a lease the journal proves gone —
// never admitted, or its lease.closed journaled — is answered at once: a 200 to
// a close means it is durable. A live lease without an actor (stopped, or no
// entry) gets one to own its close.
func (d *Directory) deprovision(m *messages.Deprovision, env Env) Decision {
	if !messages.ValidLeaseID(m.Lease) {
		return answer(m.Reply, messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID"))
	}
	e, spec := d.entries[m.Lease], d.St.Leases[m.Lease]
	switch {
	case spec == nil:
		return answer(m.Reply, nil)
	case e != nil && e.status == Respawning:
		return answer(m.Reply, messages.Refuse(messages.ErrLifecyclePending, "lease is being replaced, retry shortly"))
	}
	var out Decision
	cmd := *m
	orphan := e == nil || e.status == Stopped
	if orphan {
		out.Effects = append(out.Effects, Spawn{Spec: spec}) // another chance to own its close
	}
	if e == nil || e.status != Closing {
		var log []Effect
		if cmd.Retain, log = d.retainDecision(spec); cmd.Retain {
			out.Effects = append(out.Effects, Retain{m.Lease, durableFootprint(spec)})
		}
		out.Effects = append(out.Effects, log...)
	}
	var fwd Effect = Send{m.Lease, &cmd, m.Reply}
	if !orphan {
		fwd = d.forward(e, m.Lease, &cmd, m.Reply, env)
	}
	out.Effects = append(out.Effects, Move{m.Lease, Closing}, fwd)
	if _, sent := fwd.(Send); sent {
		out.Effects = append(out.Effects, CloseSent{m.Lease, 1})
	}
	return out
}

// closeDropped settles a forwarded deprovision the lease's actor refused: its
// asker had given up (and answered an error), so it never takes effect. Once
// no other forwarded close is pending, the lease is no longer closing here.
func (d *Directory) closeDropped(m lease.CloseDropped) Decision {
	e := d.entries[m.Lease]
	if e == nil || e.closes == 0 {
		return Decision{}
	}
	fx := []Effect{CloseSent{m.Lease, -1}}
	if e.closes == 1 && e.status == Closing {
		fx = append(fx, Move{m.Lease, Reported}, Retain{m.Lease, 0})
	}
	return Decision{Effects: fx}
}

// forward hands a command to the lease's actor, or refuses it at once.
func (d *Directory) forward(e *entry, id string, msg any, reply chan<- error, env Env) Effect {
	if err := d.reach(e, env.Busy); err != nil {
		return Answer{reply, err}
	}
	return Send{id, msg, reply}
}

// maintain validates a restart or update and hands it to the lease's actor,
// which decides it and journals the intent before answering. An update's
// manifest passes the provision rules, keeps the lease's services and its
// frozen profiles. Until the lease reports after deciding, its last report
// (maybe "failed") must not admit a replacement behind the maintenance's back.
func (d *Directory) maintain(m *messages.Maintain, env Env) Decision {
	if !d.Ready {
		return answer(m.Reply, errRecovering)
	}
	id := m.Req.LeaseUUID
	e, spec := d.entries[id], d.St.Leases[id]
	if e == nil || spec == nil || e.status == Closed || e.status == Closing {
		return answer(m.Reply, messages.Refuse(messages.ErrNotFound, "lease not provisioned"))
	}
	in := lease.Maintain{Kind: m.Kind, ID: m.MaintenanceID, AdmittedAt: m.AdmittedAt, Stale: m.Stale}
	if m.Kind == messages.MaintenanceUpdate {
		target, err := d.set.prepareUpdate(spec, m.Req.Payload)
		if err != nil {
			return answer(m.Reply, err)
		}
		// The lease's current images stay pinned by its release history: an
		// update adds the references its spec does not hold yet.
		if err := d.checkImagePins("", spec.Tenant, imageRefs(target.Services), env.Queued); err != nil {
			return answer(m.Reply, err)
		}
		in.Target = target
	}
	fx := d.forward(e, id, &lease.MaintainCommand{Maintain: in, Reply: m.Reply, Ticket: m.Ticket}, m.Reply, env)
	if _, sent := fx.(Send); sent && e.status == Reported {
		return Decision{Effects: []Effect{Move{id, Maintaining}, fx}}
	}
	return Decision{Effects: []Effect{fx}}
}

// report keeps a lease's report and the transition it makes. A report of its
// current admission moves an admitted or maintaining entry to reported; one of
// an older admission from a live actor means that actor runs a spec it was
// re-provisioned past (restarted before it took the Reprovision): sent again.
// A restore's destination settles its source record on ready or failed.
func (d *Directory) report(m messages.LeaseReport, now time.Time) Decision {
	e := d.entries[m.Lease]
	if e == nil || m.Admission < e.report.Admission {
		return Decision{}
	}
	var fx []Effect
	to := m.Status
	if m.Info.Status == messages.StatusUnknown {
		to = messages.StatusUnknown // a lease whose journal could not be read
	}
	if to != e.shown {
		fx = append(fx, Note{m.Lease, e.shown, to, m.Info.Reason})
	}
	fx = append(fx, Report{m})
	spec := d.St.Leases[m.Lease]
	switch {
	case spec == nil:
	case m.Admission == spec.Admission && (e.status == Admitted || e.status == Maintaining):
		fx = append(fx, Move{m.Lease, Reported})
	case m.Admission < spec.Admission && e.pid != nil && (e.status == Admitted || e.status == Reported):
		fx = append(fx, Send{Lease: m.Lease, Msg: lease.ReprovisionCommand{Spec: spec}})
	}
	out := d.settleRestore(m, spec, now)
	if len(out.Events) > 0 {
		out.Failed = fx // the report is kept either way
	}
	out.Effects = append(fx, out.Effects...)
	return out
}

// commitAdmissions journals a batch's admissions in one commit, then spawns each
// lease's actor (or has the failed one re-provision) and answers each request.
func (d *Directory) commitAdmissions(items admissionBatch) Decision {
	out := Decision{Failed: undo(items, errStoreUnavailable)}
	for _, ad := range items {
		out.Events = append(out.Events, ad.event)
		spec := ad.spec
		if ad.replacing {
			// Until the lease reports on the new admission it is not "failed" any
			// more: a second request behind this one is already provisioned.
			out.Effects = append(out.Effects, Move{spec.Lease, Admitted}, Send{Lease: spec.Lease, Msg: lease.ReprovisionCommand{Spec: spec}})
		} else {
			out.Effects = append(out.Effects, Spawn{Spec: spec, Admitted: true})
		}
		out.Effects = append(out.Effects, Log{spec.Lease, zerolog.InfoLevel,
			fmt.Sprintf("lease admitted (admission %d, %d instances, replacing %t)", spec.Admission, spec.Instances(), ad.replacing)}, Answer{ad.reply, nil})
	}
	return out
}

// commitCloses journals a batch's closes in one commit, then forgets each lease.
// A close settled since it was queued is left out.
func (d *Directory) commitCloses(items closeBatch, now time.Time) Decision {
	var out Decision
	seen := map[string]bool{}
	for _, m := range items {
		e, cur := d.entries[m.Lease], d.St.Leases[m.Lease]
		if e == nil || e.status == Closed || seen[m.Lease] || cur == nil || cur.Admission != m.Admission {
			continue
		}
		seen[m.Lease] = true
		out.Events = append(out.Events, ClosedEvent(m, now))
		out.Effects = append(out.Effects, d.markClosed(e, m.Lease)...)
	}
	return out
}

// leaseClosed settles a lease's close: a plain close joins the close batch
// (batches.go); a retaining one may evict another record of its tenant, so it
// is decided alone against the committed records. A close of an admission
// since superseded changes nothing.
func (d *Directory) leaseClosed(m messages.LeaseClosed, now time.Time) Decision {
	e, cur := d.entries[m.Lease], d.St.Leases[m.Lease]
	switch {
	case e == nil || e.status == Closed:
		return Decision{}
	case cur == nil:
		return Decision{Effects: d.markClosed(e, m.Lease)}
	case cur.Admission != m.Admission:
		return Decision{}
	case m.Retention == nil:
		return Decision{Effects: []Effect{Queue{m}}}
	}
	out := d.closedEvents(m, now)
	out.Effects = append(out.Effects, Log{m.Lease, zerolog.InfoLevel, fmt.Sprintf("lease closed; its data is retained until %s (%d MB)",
		m.Retention.RetainedUntil.Format(time.RFC3339), m.Retention.DiskMB())})
	out.Effects = append(out.Effects, d.markClosed(e, m.Lease)...)
	return out
}

// markClosed forgets a closed lease: the cleanup passes hear it is gone and its
// actor stops.
func (d *Directory) markClosed(e *entry, id string) []Effect {
	fx := []Effect{Tell{d.set.ReclaimerPath, &messages.LeaseGone{Lease: id}}, Tell{d.set.NetpoolPath, &messages.LeaseGone{Lease: id}}}
	if e.pid == nil {
		return append(fx, Move{id, ""})
	}
	return append(fx, Move{id, Closed}, Stop{id})
}

// terminated settles a lease actor that stopped: a closed lease is forgotten, a
// respawning one spawned anew; any other stopped past its restart limit and is
// held as unknown, its reservation kept, until retried. A stopping registry's
// children stop with it; the next incarnation spawns them.
func (d *Directory) terminated(m *actor.Terminated, env Env) Decision {
	id, e := d.actorOf(m.Who)
	if e == nil || env.Stopping {
		return Decision{}
	}
	switch e.status {
	case Respawning:
		return Decision{Effects: []Effect{Spawn{Spec: d.St.Leases[id]}}}
	case Closed:
		return Decision{Effects: []Effect{Move{id, ""}}}
	}
	return Decision{Effects: d.stopped(id, e, "lease actor stopped after repeated failures")}
}

// spawnFailed settles an entry whose actor could not be spawned. One
// respawning behind a predecessor that still stops waits for that Terminated,
// one spawned since runs, a lease closed meanwhile is forgotten; any other has
// no actor and none coming, so it is held as a lease stopped past its restart
// limit is — shown unknown, its reservation kept — until the reconciler's
// retry spawns it.
func (d *Directory) spawnFailed(m spawnFailed, env Env) Decision {
	e := d.entries[m.Lease]
	switch {
	case e == nil || e.pid != nil || env.Stopping:
		return Decision{}
	case d.St.Leases[m.Lease] == nil:
		return Decision{Effects: []Effect{Move{m.Lease, ""}}}
	}
	return Decision{Effects: d.stopped(m.Lease, e, fmt.Sprintf("lease actor could not be spawned (%v)", m.Err))}
}

// stopped holds a live lease without an actor as unknown, its reservation
// kept, for the reconciler's retry (retryStopped).
func (d *Directory) stopped(id string, e *entry, why string) []Effect {
	fx := []Effect{Move{id, Stopped}}
	if e.shown != messages.StatusUnknown {
		fx = append(fx, Note{id, e.shown, messages.StatusUnknown, why})
	}
	return append(fx, Log{id, zerolog.ErrorLevel, why + "; lease shown unknown"})
}

// retryStopped spawns every stopped lease's actor again (the reconciler asks).
func (d *Directory) retryStopped() Decision {
	var out Decision
	var ids []string
	for id, e := range d.entries {
		if e.status == Stopped {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		out.Effects = append(out.Effects, Log{id, zerolog.InfoLevel, "respawning stopped lease actor"}, Spawn{Spec: d.St.Leases[id]})
	}
	return out
}

// closedGrace is how long after its close a lease's use is remembered at least
// (a pass runs 2 minutes at most).
const closedGrace = 10 * time.Minute

// lingering holds the reservation of every closed lease whose containers the
// reconciler's pass still listed, and frees those it no longer lists. The close
// itself frees a reservation only once the teardown confirmed its containers
// gone; a container found afterwards (a late create, a failed removal) is real
// use again until a pass sees it gone. What a closed lease held is journaled
// (State.Closed), so this holds across a restart too; it is forgotten
// (closed.settled) once a pass lists none of its containers closedGrace or
// more after the close — longer than any pass runs, so that pass began after
// the close, and long enough for a late create to have shown.
func (d *Directory) lingering(ids []string, now time.Time) Decision {
	var out Decision
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
		if c := d.St.Closed[id]; c != nil && d.St.Leases[id] == nil {
			if _, held := d.Pool.byLease[lingeringKey(id)]; !held {
				out.Effects = append(out.Effects, Reserve{lingeringKey(id), &leaseUse{c.Tenant, c.resources()}},
					Log{id, zerolog.WarnLevel, "containers of a closed lease still run; its reservation is held until they are gone"})
			}
		}
	}
	for _, id := range d.lingeringLeases() {
		if !seen[id] {
			out.Effects = append(out.Effects, Reserve{lingeringKey(id), nil})
		}
	}
	var settled []string
	for _, id := range slices.Sorted(maps.Keys(d.St.Closed)) {
		if !seen[id] && !now.Before(d.St.Closed[id].At.Add(closedGrace)) {
			settled = append(settled, id)
		}
	}
	if len(settled) > 0 {
		out.Events, out.Failed = []persistence.Event{closedSettledEvent(settled, now)}, out.Effects
	}
	return out
}

// holdDone routes a finished held deletion to its owner.
func (d *Directory) holdDone(m *messages.HoldDone) Decision {
	kind, id, _ := strings.Cut(m.Owner, ":")
	switch kind {
	case "lease":
		if d.reach(d.entries[id], nil) == nil {
			return Decision{Effects: []Effect{Send{Lease: id, Msg: &messages.VolumeHoldDone{Name: m.Name}}}}
		}
	case "retention":
		return Decision{Effects: []Effect{Tell{d.set.ReaperPath, messages.ReapNow{}}}}
	}
	return Decision{}
}
