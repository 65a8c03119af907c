package lease

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// job is the Docker work of one lease, run on a worker goroutine. It holds copies
// of what it needs, never the actor's state.
type job struct {
	eng         steps.Docker
	diag        Diagnostics
	set         *Settings
	spec        *Spec // identity, callback URLs
	lease       string
	log         zerolog.Logger
	now         func() time.Time
	metrics     *Metrics
	report      func(msg any)      // sends an intermediate input (Pinned) to the actor
	hold        func(name string)  // hands a busy volume to the volumehold actor
	vols        dockerio.Volumes   // nil: no volume root configured
	pool        steps.NetworkPool  // nil: every lease creates fred-<lease>
	quiet       *supervisors.Quiet // a provision waits out an admission burst (nil: never)
	close       *CloseRequested    // the close in progress (teardown)
	rel         Release            // the release this work deploys or runs
	source      *Release           // a maintenance's source release (nil: none)
	pins        map[string]messages.ImagePin
	launch      launch
	deadline    time.Time
	maint       *Maintenance // the maintenance in flight (replace work)
	pending     *RuntimeFailing
	degraded    string   // why this launch's preparation was degraded ("" = it was not)
	failure     Cause    // why the lease failed (a failed attempt's cleanup captures it)
	retry       int      // which retry of a failed attempt's cleanup this is
	fredLayout  bool     // the volumes may still hold fred v0.13's nested layout
	fredScratch []string // fred v0.13's volumes of diskless instances (destroyed at close)

	// The images a launch may admit, held against the image collector (holdImages).
	holds     *dockerio.ImageHolds
	imageKeys []string
}

func (a *Actor) job() *job {
	st := a.st
	j := &job{eng: a.deps.Engine, diag: a.deps.Diag, set: a.set, spec: a.spec.Load(), lease: a.id,
		log: *a.log(), now: a.now, metrics: a.deps.Metrics, report: a.tasked().Send, vols: a.deps.Volumes, pool: a.deps.Networks, quiet: a.deps.Quiet, hold: a.holdVolume,
		pins: knownPins(st), deadline: st.Deadline, failure: Cause{st.Reason, st.Message},
		launch: launch{Generation: st.Generation, OperationID: st.OperationID, FailCount: st.FailCount}, fredLayout: st.FredLayout, fredScratch: st.FredScratch}
	if sp := j.spec; sp != nil && sp.Restore != nil && sp.Restore.FredLayout {
		j.fredLayout = true // the restored record's volumes: fred's layout until unnested
	}
	if r := st.Running(); r != nil {
		j.rel = r.clone()
	}
	if st.PendingFailure != nil {
		pf := *st.PendingFailure
		j.pending = &pf
		j.degraded = degradedOf(st.Containers) // the dead cohort's capture says so
	}
	if st.Close != nil {
		c := *st.Close
		j.close = &c
	}
	if m := st.Maintenance; m != nil {
		mc := *m
		mc.Source = slices.Clone(m.Source)
		j.maint = &mc
		j.deadline = m.Deadline
		if src := st.Release(m.SourceVersion); src != nil && m.SourceVersion != 0 {
			c := src.clone()
			j.source = &c
		}
	}
	if j.holds = a.deps.ImageHolds; j.holds != nil {
		j.imageKeys = imageKeys(j.spec, st)
	}
	return j
}

// The steps of the job's Docker work (steps/), over its ports.
func (j *job) images() steps.Images {
	return steps.Images{API: j.eng, PullTimeout: j.set.PullTimeout, Log: &j.log}
}

func (j *job) network() steps.Network {
	return steps.Network{API: j.eng, Pool: j.pool, NoWarmPool: j.set.NoWarmPool, Log: &j.log,
		Own: dockerio.NetworkSpec{Lease: j.lease, Tenant: j.spec.Tenant, BackendName: j.set.BackendName,
			InstallationID: j.set.InstallationID, Recheck: j.launch.Generation > 1}}
}

func (j *job) volumes() steps.Volumes {
	return steps.Volumes{API: j.vols, Images: j.eng, Lease: j.lease, Hold: j.hold, Log: &j.log, FredLayout: j.fredLayout}
}

func (j *job) writable() steps.Writable {
	return steps.Writable{API: j.eng, Volumes: j.volumes(), ReadonlyRootfs: j.set.ReadonlyRootfs, TmpfsSizeMB: j.set.TmpfsSizeMB,
		MinAvgFileBytes: j.set.MinAvgFileBytes, Degrade: j.degrade, Log: &j.log}
}

func (j *job) compose() steps.Compose {
	return steps.Compose{API: j.eng, Network: j.network(), StopTimeout: j.set.StopTimeout, Log: &j.log}
}

// imageKeys are the hold keys of every image a launch of the lease may admit:
// the admission's references (a tag before it is resolved) and every image its
// release history recorded (a retry, a compensation, a restore run those).
func imageKeys(spec *Spec, st *State) []string {
	var refs []string
	for _, ref := range spec.ServiceImages() {
		refs = append(refs, ref)
	}
	for _, si := range spec.Images {
		refs = append(refs, si.Ref, si.ID, si.Digest)
	}
	for i := range st.Releases {
		for _, svc := range st.Releases[i].Services {
			if svc.Manifest != nil {
				refs = append(refs, svc.Manifest.Image)
			}
		}
		for _, si := range st.Releases[i].Images {
			refs = append(refs, si.Ref, si.ID, si.Digest)
		}
	}
	keys := dockerio.ImageKeys(refs...)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// holdGrace bounds how long a worker's image hold outlives it when its actor
// never takes its result (restarted meanwhile): the actor releases it sooner.
const holdGrace = 30 * time.Second

// holdImages holds, for a launching kind, every image the lease may admit,
// from before the worker's first look at one. The hold ends once the actor has
// journaled and reported what the worker pinned (workerDone), so the registry
// holds the pins before the collector may remove the images; at the latest
// holdGrace after the worker returned.
func (j *job) holdImages(kind WorkKind) (release func()) {
	switch kind {
	case WorkProvision, WorkResume, WorkReplace, WorkReplaceResume:
		release = j.holds.Hold(j.imageKeys)
	default:
		return func() {}
	}
	return release
}

// work is the worker function of kind (nil: none to run).
func (j *job) work(kind WorkKind) func(ctx context.Context) Input {
	gen := j.launch.Generation
	switch kind {
	case WorkProvision:
		return func(ctx context.Context) Input { return Attempted{Generation: gen, Outcome: j.provision(ctx)} }
	case WorkResume:
		return func(ctx context.Context) Input { return Attempted{Generation: gen, Outcome: j.resume(ctx)} }
	case WorkTeardown:
		return func(ctx context.Context) Input {
			out := j.teardown(ctx)
			out.Attempt = j.retry
			if out.Err != nil && ctx.Err() == nil {
				// The close stays pending (503 lifecycle_pending) and retries; say why.
				j.log.Warn().Err(out.Err).Msg("close's teardown failed; retried")
			}
			return out
		}
	case WorkCloseVolumes:
		return func(ctx context.Context) Input {
			out := j.closeVolumesOf(ctx)
			if out.Err != nil && ctx.Err() == nil {
				j.log.Warn().Err(out.Err).Msg("close's volumes failed; retried")
			}
			return out
		}
	case WorkCapture:
		return func(ctx context.Context) Input { j.captureRuntimeFailure(ctx); return Captured{Generation: gen} }
	case WorkCleanup:
		return func(ctx context.Context) Input {
			return Captured{Generation: gen, Kept: j.cleanFailed(ctx), Attempt: j.retry}
		}
	case WorkReplace, WorkReplaceResume:
		if j.maint == nil {
			return nil
		}
		id, run := j.maint.ID, j.replace
		if kind == WorkReplaceResume {
			run = j.replaceResume
		}
		return func(ctx context.Context) Input { return Replaced{ID: id, Result: run(ctx)} }
	}
	return nil
}

// knownPins maps every image reference the lease ever recorded to its content,
// newest release winning: a retry, re-provision or restart of the same reference
// runs exactly that content.
func knownPins(st *State) map[string]messages.ImagePin {
	out := map[string]messages.ImagePin{}
	for _, r := range st.Releases {
		for _, si := range r.Images {
			if si.Ref != "" && si.ID != "" {
				out[si.Ref] = si.ImagePin
			}
		}
	}
	return out
}

// fail is a definite provision failure with a curated reason and message.
func fail(reason, message string) Outcome {
	return Outcome{Kind: OutcomeFailed, Reason: reason, Message: message}
}

var canceled = Outcome{Kind: OutcomeCanceled}

// provision runs one attempt within its deadline. A deadline that ends the attempt
// fails it (cleaned up); only a cancellation — a close or a drain — leaves the
// outcome to the actor.
func (j *job) provision(parent context.Context) Outcome {
	ctx, cancel := j.until(parent, j.deadline)
	defer cancel()
	j.quiet.Wait(ctx)
	return j.timedOut(parent, j.attempt(ctx))
}

// timedOut turns an attempt cut off by its deadline into a definite failure.
func (j *job) timedOut(parent context.Context, out Outcome) Outcome {
	if out.Kind == OutcomeCanceled && parent.Err() == nil {
		return j.failAndClean(fail(messages.ReasonInternal, "provisioning did not complete in time"), nil)
	}
	return out
}

// attempt removes what earlier attempts left, admits the images, makes the lease
// network, composes up, then verifies the cohort.
func (j *job) attempt(ctx context.Context) Outcome {
	// A re-provision or retry starts from nothing: old containers go, volumes stay.
	// The first attempt of a lease has nothing to remove.
	if j.launch.Generation > 1 {
		if err := j.compose().Down(ctx); err != nil {
			return j.uncertain(ctx, "remove previous containers", err)
		}
	}
	if j.spec.Restore != nil {
		// A restore adopts the retained volumes before its first launch (idempotent:
		// a retry finds them adopted already).
		if err := j.volumes().Adopt(ctx, j.spec.Restore.Volumes); err != nil {
			return j.cleanUp(stepOutcome(ctx, err))
		}
	}
	p, out, ok := j.prepare(ctx, j.rel, j.launch)
	if !ok {
		return j.cleanUp(out)
	}
	done := j.provisionPhase("compose_up")
	cohort, upErr := j.compose().Up(ctx, p)
	done()
	if ctx.Err() != nil {
		return canceled
	}
	// A clean launch reports its cohort as listed (verification inspects every
	// container next); a refused one is inspected whole, for its failure capture.
	if upErr != nil {
		j.log.Warn().Err(upErr).Msg("compose up failed")
		var err error
		if cohort, err = j.eng.Cohort(ctx, j.lease); err != nil {
			return j.uncertain(ctx, "list containers", err)
		}
		if out = failure(steps.Rejected(upErr, cohort)); out.Kind == OutcomeFailed {
			return j.failAndClean(out, cohort)
		}
		return out
	}
	done = j.provisionPhase("verify")
	out = j.verify(ctx, cohort, &j.rel, j.deadline)
	done()
	if out.Kind == OutcomeReady {
		markDegraded(out.Containers, j.degraded)
	}
	return j.cleanUp(out)
}

// provisionPhase times one phase of a provision attempt for
// berth_provision_phase_seconds (a maintenance's shared steps are timed by its
// own berth_replace_phase_duration_seconds).
func (j *job) provisionPhase(phase string) func() {
	if j.maint != nil {
		return func() {}
	}
	start := time.Now()
	return func() { j.metrics.provisionPhaseDone(phase, time.Since(start)) }
}

// uncertain is an attempt whose Docker step failed without a finding: it stays in
// flight for the resume (which lists the lease again and settles it).
func (j *job) uncertain(ctx context.Context, step string, err error) Outcome {
	if ctx.Err() != nil {
		return canceled
	}
	j.log.Warn().Err(err).Str("step", step).Msg("provision step failed; left to the resume")
	return pending
}

// cleanUp cleans up after a definite failure (failAndClean); a ready or canceled
// outcome stands.
func (j *job) cleanUp(out Outcome) Outcome {
	if out.Kind == OutcomeFailed {
		return j.failAndClean(out, nil)
	}
	return out
}

// failAndClean captures the attempt's diagnostics, then removes its containers.
// Cleanup runs on a fresh context: the attempt's deadline may be what failed it.
// Diagnostics that could not be written keep the containers — they are the
// evidence — and so does a removal that failed: the outcome says Kept, and the
// failed lease's cleanup is retried (WorkCleanup, after the kit's backoff, and
// whenever an inventory lists them). A restore is the exception:
// its adopted data goes back to its record, which needs the containers gone.
func (j *job) failAndClean(out Outcome, cohort []messages.Container) Outcome {
	cctx, cancel := context.WithTimeout(context.Background(), j.set.StopTimeout+time.Minute)
	defer cancel()
	if cohort == nil {
		cohort, _ = j.eng.Cohort(cctx, j.lease)
	}
	err := j.capture(cctx, Capture{Kind: CaptureProvision, Stamp: Stamp{Generation: j.launch.Generation}, Cause: Cause{out.Reason, out.Message}}, cohort)
	if err != nil && j.spec.Restore == nil && len(cohort) > 0 {
		j.log.Warn().Err(err).Msg("diagnostics of the failed attempt not written; its containers are kept and their cleanup retried")
		out.Kept = true
		return out
	}
	if err := j.compose().Down(cctx); err != nil {
		j.log.Warn().Err(err).Msg("remove failed attempt's containers; retried")
		out.Kept = j.spec.Restore == nil
	}
	if j.spec.Restore != nil {
		// A restore that fails before it commits hands the data back to its record.
		if err := j.volumes().HandBack(cctx, j.spec.Restore.Volumes); err != nil {
			j.log.Error().Err(err).Msg("restore failed and its volumes could not be handed back yet; retried by the close or the next attempt")
		}
		out.Reason, out.Message = messages.ReasonRestoreFailed, "restore failed: "+cmp.Or(out.Message, "the restored lease did not become ready")
	}
	return out
}

// resume decides a provision whose worker never reported (a restart of the actor
// or the process): a complete, running cohort of this generation resumes
// verification; one with a dead container cannot finish and is failed; an
// incomplete one — an interrupted launch — is removed by exact ID and the
// provision starts again at once under a new generation, so every interrupted
// provision settles within seconds, never at its deadline.
func (j *job) resume(ctx context.Context) Outcome {
	if !j.now().Before(j.deadline) {
		return j.failAndClean(fail(messages.ReasonInternal, "provisioning did not complete in time"), nil)
	}
	cohort, err := j.eng.Cohort(ctx, j.lease)
	if err != nil {
		return j.uncertain(ctx, "resume: list containers", err)
	}
	current := ofGeneration(cohort, j.launch.Generation)
	for _, c := range current {
		if c.State == "exited" || c.State == "dead" {
			return j.failAndClean(fail(messages.ReasonContainerExited, "container exited during startup"), current)
		}
	}
	if complete(&j.rel, current) && allRunning(current) {
		dctx, cancel := j.until(ctx, j.deadline)
		defer cancel()
		return j.cleanUp(j.timedOut(ctx, j.verify(dctx, current, &j.rel, j.deadline)))
	}
	if err := j.compose().RemoveExact(ctx, cohort); err != nil {
		return j.uncertain(ctx, "resume: remove the interrupted launch", err)
	}
	j.log.Info().Int("containers", len(cohort)).Uint64("generation", j.launch.Generation).
		Msg("interrupted provision: incomplete cohort removed; starting again")
	return Outcome{Kind: OutcomeRetry}
}

func ofGeneration(cs []messages.Container, gen uint64) []messages.Container {
	var out []messages.Container
	for _, c := range cs {
		if c.Generation == gen {
			out = append(out, c)
		}
	}
	return out
}
