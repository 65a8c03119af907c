package lease

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Decide chooses what an input does to a lease. It never changes st: the actor
// journals the events, applies them (Apply), then runs the effects.
func Decide(st *State, in Input, env Env) Decision {
	switch in := in.(type) {
	case Recover:
		return decideRecover(st, env)
	case Reprovision:
		if pendingAdmission(st, env) {
			return startProvision(st, env)
		}
	case Close:
		return decideClose(st, in, env)
	case Maintain:
		return decideMaintain(st, in, env)
	case Pinned:
		if r := st.Release(in.Version); r != nil && r.Status == messages.ReleaseDeploying && !slices.Equal(r.Images, in.Images) {
			return Decision{Events: []persistence.Event{event(EvReleasePinned, env.Now, ReleasePinned(in))}}
		}
	case Attempted:
		return decideAttempted(st, in, env)
	case TornDown:
		return decideTornDown(st, in, env)
	case HoldDone:
		if st.Status == Deprovisioning && env.Worker == "" {
			return effects(Work{Kind: WorkTeardown}) // a held volume is gone: finish the close
		}
	case ReconcileDomains:
		return decideReconcileDomains(st, in, env)
	case Captured:
		switch {
		case st.Status == Deprovisioning:
			return effects(Work{Kind: WorkTeardown})
		case st.Status.maintaining():
			return effects(Work{Kind: WorkReplace}) // a maintenance accepted while failing
		case st.Status == Provisioning:
			return effects(Work{Kind: WorkProvision}) // a re-provision accepted while failing
		case st.Status == Failed && st.Kept && in.Kept && in.Generation == st.Generation:
			// A failed attempt's evidence is still unwritten (or its containers
			// not removed): the cleanup is retried after the kit's backoff.
			return effects(Backoff{What: string(WorkCleanup), Attempt: in.Attempt + 1})
		case st.Status == Failing && in.Generation == st.Generation:
			ev := event(EvRuntimeFailed, env.Now, RuntimeFailed{Stamp: Stamp{st.Generation, env.Now},
				Cause: Cause{messages.ReasonContainerExited, "container exited unexpectedly"}})
			return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: messages.CallbackFailed,
				Error: callbackError(messages.ReasonContainerExited), Lifecycle: true}}}
		}
	case Replaced:
		return decideReplaced(st, in, env)
	case Listed:
		return decideListed(st, in, env)
	case Died:
		if _, ok := st.instance(in.ContainerID); ok && st.Status == Ready && in.Generation == st.Generation {
			return effects(Confirm{Death: in})
		}
	case Confirmed:
		inst, ok := st.instance(in.Death.ContainerID)
		if in.Exited == nil || st.Status != Ready || in.Generation != st.Generation || !ok {
			return Decision{}
		}
		f := RuntimeFailing{Stamp: Stamp{st.Generation, env.Now}, ContainerID: inst.ContainerID,
			Service: inst.Service, Index: inst.Index, ExitCode: in.Exited.ExitCode,
			OOMKilled: in.Exited.OOMKilled, Counted: in.Death.Counted && inst.Degraded == ""} // a degraded launch's death is ours
		return Decision{Events: []persistence.Event{event(EvRuntimeFailing, env.Now, f)}, Effects: []Effect{Work{Kind: WorkCapture}}}
	case Timer:
		switch {
		case st.Status == Deprovisioning:
			return effects(Work{Kind: WorkTeardown, Attempt: in.Attempt})
		case in.What == string(WorkResume) && st.Status == Provisioning:
			return effects(Work{Kind: WorkResume})
		case in.What == string(WorkReplaceResume) && st.Status.maintaining():
			return effects(Work{Kind: WorkReplaceResume})
		case in.What == string(WorkCleanup) && st.Status == Failed && st.Kept && env.Worker == "":
			return effects(Work{Kind: WorkCleanup, Attempt: in.Attempt})
		}
	}
	return Decision{}
}

func effects(e ...Effect) Decision { return Decision{Effects: e} }

// after starts kind now, or cancels the running worker: its completion starts kind.
func after(env Env, kind WorkKind) []Effect {
	if env.Worker != "" {
		return []Effect{Cancel{}}
	}
	return []Effect{Work{Kind: kind}}
}

// pendingAdmission reports a newer admission (a re-provision the registry already
// answered 202) that has no provision.started yet. A closed lease has none: the
// close fences its UUID for good.
func pendingAdmission(st *State, env Env) bool {
	return env.Spec.Admission > st.Admission && (st.Status == Reserved || st.Status == Failing || st.Status == Failed)
}

// decideRecover settles the journal's unfinished intent when the actor starts.
func decideRecover(st *State, env Env) Decision {
	switch {
	case st.Status == Closed:
		return effects(TellClosed{})
	case st.Status == Deprovisioning:
		return effects(Work{Kind: WorkTeardown})
	case pendingAdmission(st, env):
		return startProvision(st, env)
	case st.Status == Provisioning:
		return effects(Work{Kind: WorkResume})
	case st.Status == Failing:
		return effects(Work{Kind: WorkCapture})
	case st.Status.maintaining():
		return effects(Work{Kind: WorkReplaceResume})
	}
	return Decision{}
}

// startProvision starts the latest admission's first attempt, with its release.
// A failing lease's capture finishes first (its evidence is kept): the attempt
// starts when the capture reports.
func startProvision(st *State, env Env) Decision {
	spec := env.Spec
	r := spec.release(env.Now, env.DomainsUngated)
	// A provision's protected releases (the active one and this) always fit: raw
	// manifests are capped at 1 MiB, the history at 32 MiB.
	prune, _ := pruneReleases(st, &r, env)
	ev := event(EvProvisionStarted, env.Now, ProvisionStarted{Admission: spec.Admission,
		Generation: st.nextGeneration(), OperationID: spec.OperationID, At: env.Now,
		Deadline: env.Now.Add(env.Limits.ProvisionTimeout), Release: &r})
	d := Decision{Events: append([]persistence.Event{ev}, prune...)}
	if env.Worker == "" {
		d.Effects = []Effect{Work{Kind: WorkProvision}}
	}
	return d
}

func decideAttempted(st *State, in Attempted, env Env) Decision {
	if st.Status == Deprovisioning {
		return effects(Work{Kind: WorkTeardown}) // the canceled attempt drained: tear down
	}
	if st.Status != Provisioning || in.Generation != st.Generation {
		return Decision{}
	}
	out := in.Outcome
	switch out.Kind {
	case OutcomeReady:
		ev := event(EvProvisionSucceeded, env.Now, ProvisionSucceeded{Stamp: Stamp{st.Generation, env.Now}, Containers: out.Containers})
		return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: messages.CallbackSuccess}}}
	case OutcomeFailed:
		d := provisionFailed(st, env, Cause{out.Reason, out.Message}, out.Kept)
		if out.Kept {
			d.Effects = []Effect{Backoff{What: string(WorkCleanup), Attempt: 1}}
		}
		return d
	case OutcomeRetry:
		if !env.Now.Before(st.Deadline) {
			return provisionFailed(st, env, Cause{messages.ReasonInternal, "provisioning did not complete in time"}, false)
		}
		// An interrupted attempt, its incomplete cohort removed: the same admission
		// starts again at once under a new generation, within the same deadline.
		ev := event(EvProvisionStarted, env.Now, ProvisionStarted{Admission: st.Admission, Generation: st.nextGeneration(),
			OperationID: st.OperationID, At: env.Now, Deadline: st.Deadline})
		return Decision{Events: []persistence.Event{ev}, Effects: []Effect{Work{Kind: WorkProvision}}}
	}
	return effects(Wait{D: env.Limits.ResumePoll, What: string(WorkResume)})
}

func provisionFailed(st *State, env Env, cause Cause, kept bool) Decision {
	ev := event(EvProvisionFailed, env.Now, ProvisionFailed{Stamp: Stamp{st.Generation, env.Now}, Cause: cause, Kept: kept})
	return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: messages.CallbackFailed, Error: callbackError(cause.Reason)}}}
}

// decideClose journals the close intent first (write-ahead), with the failed
// completion of whatever operation it pre-empts, then tears down once no worker runs.
func decideClose(st *State, in Close, env Env) Decision {
	switch st.Status {
	case Closed:
		return Decision{}
	case Deprovisioning:
		if env.CloseHeld != nil {
			return Decision{Reply: env.CloseHeld}
		}
		return Decision{Hold: true}
	}
	d := Decision{Hold: true}
	// A restore that never committed hands its adopted volumes back; only a lease
	// whose data is its own can be retained.
	requarantine := env.Spec.Restore != nil && (st.Status == Reserved || st.Status == Provisioning || pendingAdmission(st, env))
	d.Events = []persistence.Event{event(EvCloseRequested, env.Now, CloseRequested{Admission: max(st.Admission, env.Spec.Admission),
		At: env.Now, Retain: in.Retain && !requarantine, Requarantine: requarantine})}
	switch {
	case st.Status == Reserved || st.Status == Provisioning || pendingAdmission(st, env):
		d.Callbacks = []Callback{{Status: messages.CallbackFailed, Error: errCanceled}}
	case st.Status.maintaining():
		m := st.Maintenance
		d.Callbacks = []Callback{{Status: messages.CallbackFailed, Error: maintenanceError(m.Kind, reasonCanceled),
			Lifecycle: true, MaintenanceID: m.ID, AdmittedAt: m.AdmittedAt}}
	}
	// The close wins: teardown starts when the canceled work has drained, so no
	// late container of it can survive the teardown.
	d.Effects = after(env, WorkTeardown)
	return d
}

func decideTornDown(st *State, in TornDown, env Env) Decision {
	if st.Status != Deprovisioning {
		return Decision{}
	}
	if errors.Is(in.Err, dockerio.ErrVolumeRootUnproven) {
		// The volume root is not the one berthd opened (unmounted?): nothing was
		// destroyed or retained, so the close is held — no closed event, no
		// callback — and retried on the kit's backoff until the root is back.
		return effects(Backoff{What: string(WorkTeardown), Attempt: in.Attempt + 1},
			closeHeld("the volume root is not proven (is it mounted?); the close completes once it is", false))
	}
	if in.Err != nil {
		return effects(Wait{D: env.Limits.TeardownRetry, What: string(WorkTeardown)}, closeHeld("teardown failed and is retried", false))
	}
	if in.Judged != nil {
		if c := st.Close; c != nil && c.Retain && !c.Judged {
			return Decision{Events: []persistence.Event{event(EvCloseJudged, env.Now, *in.Judged)},
				Effects: []Effect{Work{Kind: WorkCloseVolumes}}}
		}
		return effects(Work{Kind: WorkTeardown}) // judged already: carry out the journaled verdict
	}
	if len(in.Held) > 0 {
		// A volume could not be destroyed yet: the volumehold actor retries it and
		// tells us when it is gone; the close stays pending (503 lifecycle_pending)
		// and looks again now and then.
		return effects(Wait{D: 6 * env.Limits.TeardownRetry, What: string(WorkTeardown)},
			closeHeld("a volume is in use outside berth; the close completes once it is released", true))
	}
	closed := ClosedEv{Admission: st.Admission, At: env.Now}
	if c := st.Close; c != nil && c.Requarantine && env.Spec.Restore != nil {
		closed.Requarantined = env.Spec.Restore.From
	}
	if len(in.Retained) > 0 {
		closed.Retention = retentionRecord(st, env, in.Retained)
	}
	if c := st.Close; c != nil && c.Judged {
		closed.Reclaimed = c.Reclaim
	}
	return Decision{
		Events:    []persistence.Event{event(EvClosed, env.Now, closed)},
		Callbacks: []Callback{{Status: messages.CallbackDeprovisioned, Lifecycle: true, Retained: closed.Retention != nil}},
		// The registry hears first: its mailbox then holds the release before any
		// request the deprovision's 200 lets the caller make (GET /stats, a provision
		// into the freed capacity).
		Effects: []Effect{TellClosed{}, Answer{}},
	}
}

// closeHeld answers the close's waiters now, and every close asked until an
// attempt succeeds at once: 503 lifecycle_pending, the one answer that a close
// whose intent is durable but whose teardown cannot finish yet may give.
func closeHeld(why string, onVolumes bool) Answer {
	return Answer{Err: messages.Refuse(messages.ErrLifecyclePending, "close held: %s", why), OnVolumes: onVolumes}
}

// retentionRecord is what a retaining close keeps: the lease's identity, its
// running release (manifest, items, images as they ran) and the retained volumes.
func retentionRecord(st *State, env Env, vols []messages.RetainedVolume) *messages.RetentionRecord {
	rec := &messages.RetentionRecord{Lease: env.Spec.Lease, Tenant: env.Spec.Tenant, ProviderUUID: env.Spec.ProviderUUID,
		Items: env.Spec.Items, Manifest: env.Spec.Manifest, Volumes: vols, RetainedAt: env.Now,
		FredLayout: st.FredLayout || env.Spec.Restore != nil && env.Spec.Restore.FredLayout}
	if r := st.Running(); r != nil {
		if len(r.Items) > 0 {
			rec.Items = r.Items
		}
		if len(r.Manifest) > 0 {
			rec.Manifest = r.Manifest
		}
		for _, si := range r.Images {
			rec.Images = append(rec.Images, messages.ServicePin{Service: si.Service, ImagePin: si.ImagePin})
		}
	}
	if env.Limits.RetentionMaxAge > 0 {
		rec.RetainedUntil = env.Now.Add(env.Limits.RetentionMaxAge)
	}
	return rec
}

// decideMaintain admits a restart or an update: guards, then the intent with its
// target release, journaled before the 202.
func decideMaintain(st *State, in Maintain, env Env) Decision {
	refuse := func(format string, args ...any) Decision {
		return Decision{Reply: messages.Refuse(messages.ErrInvalidState, format, args...)}
	}
	switch {
	case st.Status != Ready && st.Status != Failing && st.Status != Failed:
		return refuse("lease is %s; %s needs a ready or failed lease", st.Status.Wire(), in.Kind)
	case in.Kind == KindRuntimeRefresh && (st.Status != Ready || !runsAny(st, in.Stale)):
		// Checked again under the lease's fence: a tenant's restart may have won.
		return refuse("lease is %s and runs no container under an older runtime contract", st.Status.Wire())
	case pendingAdmission(st, env):
		return refuse("lease is being re-provisioned; %s needs a ready or failed lease", in.Kind)
	case st.hasMaintenance(in.ID):
		return refuse("maintenance_id %s already names a release of this lease; send a new key", in.ID)
	case env.Fenced:
		return refuse("an earlier maintenance completion of this lease is still being delivered; retry shortly")
	}
	source := st.Running()
	if source == nil {
		return refuse("lease has no release to %s", in.Kind)
	}
	target := source.clone()
	if in.Target != nil {
		target = in.Target.clone()
		if target.Domains == nil { // an update keeps the routed custom domains
			target.Domains = maps.Clone(source.Domains)
		}
		target.Images = nil
		for _, svc := range target.Services { // unchanged references keep their recorded content
			if pin, ok := source.Pin(svc.Name); ok && pin.Ref == svc.Manifest.Image {
				target.Images = append(target.Images, ServiceImage{Service: svc.Name, ImagePin: pin})
			}
		}
	}
	target.Kind, target.MaintenanceID, target.OperationID, target.CreatedAt = in.Kind, in.ID, "", env.Now
	target.Reason, target.Message = "", ""
	prune, ok := pruneReleases(st, &target, env)
	if !ok {
		return refuse("release history of this lease is full")
	}
	gen := st.nextGeneration()
	m := Maintenance{ID: in.ID, Kind: in.Kind, AdmittedAt: in.AdmittedAt.UTC(), At: env.Now,
		Deadline: env.Now.Add(env.Limits.ProvisionTimeout), SourceVersion: source.Version,
		SourceStatus: Ready, SourceGen: st.Generation, Source: slices.Clone(st.Containers),
		Generation: gen, CompensateGen: gen + 1}
	if st.Status != Ready {
		m.SourceStatus, m.Source = Failed, nil
	}
	if source.Status != messages.ReleaseActive {
		m.SourceVersion = 0 // a lease that never became ready has no source to return to
	}
	// A failure capture still running is canceled: the replacement starts when it drained.
	return Decision{Events: append([]persistence.Event{event(EvMaintenanceStarted, env.Now, MaintenanceStarted{Maintenance: m, Release: target})}, prune...),
		Effects: after(env, WorkReplace)}
}

// runsAny reports whether one of ids is a container of the lease's cohort.
func runsAny(st *State, ids []string) bool {
	return slices.ContainsFunc(st.Containers, func(c Instance) bool { return slices.Contains(ids, c.ContainerID) })
}

func decideReplaced(st *State, in Replaced, env Env) Decision {
	if st.Status == Deprovisioning {
		return effects(Work{Kind: WorkTeardown})
	}
	m := st.Maintenance
	if !st.Status.maintaining() || m == nil || in.ID != m.ID {
		return Decision{}
	}
	res := in.Result
	done := func(ev persistence.Event, status, errText string) Decision {
		return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: status, Error: errText,
			Lifecycle: true, MaintenanceID: m.ID, AdmittedAt: m.AdmittedAt}}}
	}
	failReason := maintenanceReason(m.Kind)
	switch res.Kind {
	case ReplaceCompleted:
		return done(event(EvMaintenanceDone, env.Now, MaintenanceDone{ID: m.ID, Stamp: Stamp{m.Generation, env.Now},
			Containers: res.Containers}), messages.CallbackSuccess, "")
	case ReplaceRecovered:
		return done(event(EvMaintenanceRestored, env.Now, MaintenanceRestored{ID: m.ID, Stamp: Stamp{m.CompensateGen, env.Now},
			Containers: res.Containers, Compensated: true, Cause: Cause{failReason, res.Message}}),
			messages.CallbackFailed, maintenanceError(m.Kind, "rolled-back"))
	case ReplaceIntact:
		if m.SourceStatus == Ready {
			return done(event(EvMaintenanceRestored, env.Now, MaintenanceRestored{ID: m.ID, Stamp: Stamp{m.SourceGen, env.Now},
				Containers: m.Source, Cause: Cause{cmp.Or(res.Reason, failReason), res.Message}}),
				messages.CallbackFailed, maintenanceError(m.Kind, cmp.Or(res.Reason, "unchanged")))
		}
		return done(event(EvMaintenanceFailed, env.Now, MaintenanceFailed{ID: m.ID, Stamp: Stamp{m.SourceGen, env.Now},
			Cause: Cause{failReason, res.Message}}), messages.CallbackFailed, maintenanceError(m.Kind, res.Reason))
	case ReplaceFailed:
		gen := res.Generation
		if gen != m.SourceGen && gen != m.Generation {
			gen = m.CompensateGen
		}
		return done(event(EvMaintenanceFailed, env.Now, MaintenanceFailed{ID: m.ID, Stamp: Stamp{gen, env.Now},
			Cause: Cause{failReason, res.Message}}), messages.CallbackFailed, maintenanceError(m.Kind, ""))
	}
	return effects(Wait{D: env.Limits.ResumePoll, What: string(WorkReplaceResume)})
}

// decideListed reads reconciliation's inventory of this lease: a Ready cohort
// with a container gone or not running is confirmed dead (attributed unknown: only
// the live stream can prove a tenant's own crash); a running cohort that is not
// the journaled one (an unexpected or duplicate instance, another image) diverged
// and fails the lease; containers of settled generations go to gentle cleanup.
// The dead cohort of a failed lease stays for the operator until a re-provision or
// close. Work in flight owns its containers, so nothing is swept then.
func decideListed(st *State, in Listed, env Env) Decision {
	var d Decision
	stale := func(keep func(c messages.Container) bool) {
		var ids []string
		for _, c := range in.Containers {
			if !keep(c) {
				ids = append(ids, c.ID)
			}
		}
		if len(ids) > 0 {
			d.Effects = append(d.Effects, Sweep{IDs: ids})
		}
	}
	switch st.Status {
	case Ready:
		if msg := diverged(st, in.Containers); msg != "" {
			d.Events = []persistence.Event{event(EvCohortDiverged, env.Now, CohortDiverged{Stamp: Stamp{st.Generation, env.Now}, Message: msg})}
			d.Callbacks = []Callback{{Status: messages.CallbackFailed, Error: errDiverged, Lifecycle: true}}
			return d
		}
		for _, inst := range st.Containers {
			if c, ok := findContainer(in.Containers, inst.ContainerID); ok && c.State == "running" {
				continue
			}
			// The listing is only a hint — it may predate this cohort's start — so
			// the same inspect that confirms a streamed death confirms this one.
			d.Effects = append(d.Effects, Confirm{Death: Died{ContainerID: inst.ContainerID, Generation: st.Generation}})
		}
		stale(func(c messages.Container) bool { return c.Generation == st.Generation })
		d.Events, _ = pruneReleases(st, nil, env) // the history expires on idle leases too
	case Failed:
		stale(func(c messages.Container) bool { return c.Generation == st.Generation })
		d.Events, _ = pruneReleases(st, nil, env)
		// A failed attempt whose containers were kept (its diagnostics unwritten,
		// or their removal failed): its cleanup is retried while they are listed.
		if st.Kept && env.Worker == "" && slices.ContainsFunc(in.Containers, func(c messages.Container) bool { return c.Generation == st.Generation }) {
			d.Effects = append(d.Effects, Work{Kind: WorkCleanup})
		}
	case Provisioning:
		stale(func(c messages.Container) bool { return c.Generation >= st.Generation })
	}
	return d
}

// diverged compares the running cohort of the live generation with the journal:
// every container must be an expected (service, index), once, running the
// recorded image. "" when it agrees.
func diverged(st *State, listed []messages.Container) string {
	r := st.Running()
	if r == nil {
		return ""
	}
	want := r.expected()
	seen := map[dockerio.InstanceKey]bool{}
	for _, c := range listed {
		if c.Generation != st.Generation {
			continue
		}
		k := dockerio.InstanceKey{Service: c.Service, Index: c.Index}
		switch {
		case !want[k]:
			return fmt.Sprintf("unexpected instance %s/%d", c.Service, c.Index)
		case seen[k]:
			return fmt.Sprintf("instance %s/%d runs twice", c.Service, c.Index)
		}
		seen[k] = true
		if pin, ok := r.Pin(c.Service); ok && c.ImageID != "" && pin.ID != "" && c.ImageID != pin.ID {
			return fmt.Sprintf("instance %s/%d runs another image than its release", c.Service, c.Index)
		}
	}
	return ""
}

func findContainer(cs []messages.Container, id string) (messages.Container, bool) {
	for _, c := range cs {
		if c.ID == id {
			return c, true
		}
	}
	return messages.Container{}, false
}

func maintenanceReason(kind string) string {
	if kind == KindUpdate {
		return messages.ReasonUpdateFailed
	}
	return messages.ReasonRestartFailed
}

// Curated, on-chain-safe callback error texts (never logs or runtime data).
const (
	errCanceled = "Canceled: the lease was closed before provisioning completed"
	errDiverged = "Internal: the running containers no longer match the lease's deployment"
)

// callbackError is the curated error text of a provision or runtime failure reason.
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
	case messages.ReasonRestoreFailed:
		return "RestoreFailed: the retained data could not be restored; it is retained again"
	}
	return "Internal: provisioning failed on the provider"
}

// maintenanceError is the curated error text of a failed restart or update; cause
// is a reason code of the target's failure, "rolled-back", "unchanged" or "".
func maintenanceError(kind, cause string) string {
	prefix, what := messages.ReasonRestartFailed, "the restart"
	if kind == KindUpdate {
		prefix, what = messages.ReasonUpdateFailed, "the update"
	}
	switch cause {
	case "rolled-back":
		return prefix + ": " + what + " failed and the previous deployment was restored"
	case "unchanged":
		return prefix + ": " + what + " failed; the lease is unchanged"
	case reasonCanceled:
		return prefix + ": the lease was closed before " + what + " completed"
	case messages.ReasonImagePullFailed:
		return prefix + ": ImagePullFailed: an image could not be pulled; the lease is unchanged"
	case messages.ReasonContainerExited, messages.ReasonHealthCheckFailed, messages.ReasonContainerStartFailed:
		return prefix + ": " + cause + ": " + what + " did not become ready"
	}
	return prefix + ": " + what + " failed"
}

// reasonCanceled is the release reason of an operation a close pre-empted.
const reasonCanceled = "Canceled"
