package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// job is the Docker work of one lease, run on a worker goroutine. It holds copies
// of what it needs, never the actor's state.
type job struct {
	eng      dockerio.Engine
	diag     *persistence.Diagnostics
	set      *Settings
	spec     *Spec // identity, callback URLs
	lease    string
	log      zerolog.Logger
	now      func() time.Time
	metrics  *Metrics
	report   func(Input)        // sends an intermediate input (Pinned) to the actor
	hold     func(name string)  // hands a busy volume to the volumehold actor
	vols     dockerio.Volumes   // nil: no volume root configured
	pool     NetworkPool        // nil: every lease creates fred-<lease>
	quiet    *supervisors.Quiet // a provision waits out an admission burst (nil: never)
	close    *CloseRequested    // the close in progress (teardown)
	rel      Release            // the release this work deploys or runs
	source   *Release           // a maintenance's source release (nil: none)
	pins     map[string]messages.ImagePin
	launch   launch
	deadline time.Time
	maint    *Maintenance // the maintenance in flight (replace work)
	cohort   []Instance   // the running cohort recorded in the journal
	pending  *RuntimeFailing
}

func (a *Actor) job() *job {
	st := a.st
	j := &job{eng: a.deps.Engine, diag: a.deps.Diag, set: a.set, spec: a.spec.Load(), lease: a.id,
		log: *a.log(), now: a.deps.Now, metrics: a.deps.Metrics, report: a.reportInput, vols: a.deps.Volumes, pool: a.deps.Networks, quiet: a.deps.Quiet, hold: a.holdVolume,
		pins: knownPins(st), deadline: st.Deadline, cohort: cloneInstances(st.Containers),
		launch: launch{Generation: st.Generation, OperationID: st.OperationID, FailCount: st.FailCount}}
	if r := st.Running(); r != nil {
		j.rel = r.clone()
	}
	if st.PendingFailure != nil {
		pf := *st.PendingFailure
		j.pending = &pf
	}
	if st.Close != nil {
		c := *st.Close
		j.close = &c
	}
	if m := st.Maintenance; m != nil {
		mc := *m
		mc.Source = cloneInstances(m.Source)
		j.maint = &mc
		j.deadline = m.Deadline
		if src := st.Release(m.SourceVersion); src != nil && m.SourceVersion != 0 {
			c := src.clone()
			j.source = &c
		}
	}
	return j
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

func cloneInstances(in []Instance) []Instance {
	if in == nil {
		return nil
	}
	out := make([]Instance, len(in))
	copy(out, in)
	return out
}

// fail is a definite provision failure with a curated reason and message.
func fail(reason, message string) Outcome {
	return Outcome{Kind: OutcomeFailed, Reason: reason, Message: message}
}

var canceled = Outcome{Kind: OutcomeCanceled}

// --- provisioning ------------------------------------------------------------------

// provision runs one attempt within its deadline. A deadline that ends the attempt
// fails it (cleaned up); only a cancellation — a close or a drain — leaves the
// outcome to the actor.
func (j *job) provision(parent context.Context) Outcome {
	ctx, cancel := context.WithDeadline(parent, j.deadline)
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
		if err := j.eng.Down(ctx, j.lease, dockerio.DownOptions{StopTimeout: j.set.StopTimeout}); err != nil {
			return j.internal(ctx, "remove previous containers", err)
		}
	}
	if j.spec.Restore != nil {
		// A restore adopts the retained volumes before its first launch (idempotent:
		// a retry finds them adopted already).
		if out := j.adoptRetained(ctx); out.Kind != "" {
			if out.Kind == OutcomeFailed {
				return j.failAndClean(out, nil)
			}
			return out
		}
	}
	in, out, ok := j.prepare(ctx, j.rel)
	if !ok {
		if out.Kind == OutcomeFailed {
			return j.failAndClean(out, nil)
		}
		return out
	}
	done := j.provisionPhase("compose_up")
	cohort, upErr := j.up(ctx, &in.network, func(net leaseNetwork) dockerio.Plan {
		return plan(j.spec, &j.rel, j.launch, j.set, in.images, net, in.dirs)
	})
	done()
	if ctx.Err() != nil {
		return canceled
	}
	// A clean launch reports its cohort as listed (verification inspects every
	// container next); a refused one is inspected whole, for its failure capture.
	if upErr != nil {
		var err error
		if cohort, err = j.eng.Cohort(ctx, j.lease); err != nil {
			return j.internal(ctx, "list containers", err)
		}
	}
	if upErr != nil {
		j.log.Warn().Err(upErr).Msg("compose up failed")
		return j.failAndClean(classifyRejectedLaunch(upErr, cohort), cohort)
	}
	done = j.provisionPhase("verify")
	out = j.verify(ctx, cohort, &j.rel, j.deadline)
	done()
	if out.Kind == OutcomeReady || out.Kind == OutcomeCanceled {
		return out
	}
	return j.failAndClean(out, nil)
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

// launchInputs is what a launch needs beside the release: the admitted images, the
// verified lease network and the stateful instances' volume directories.
type launchInputs struct {
	images  map[string]dockerio.ImageInfo
	network leaseNetwork
	dirs    map[string][]string
}

// leaseNetwork is the network a launch attaches to: fred-<lease>, or the warm
// pool network bound to the lease (pooled).
type leaseNetwork struct {
	id     string
	pooled bool
}

// prepare admits the release's images and ensures the lease network, at once (they
// are independent), then the stateful instances' volumes (their mount points owned
// by the image's user). A failure is returned as an Outcome with ok false: Failed
// for a definite one (not yet cleaned up), Canceled when ctx ended.
func (j *job) prepare(ctx context.Context, r Release) (launchInputs, Outcome, bool) {
	images, network, out, ok := j.prepareImagesAndNetwork(ctx, r)
	if !ok {
		return launchInputs{}, out, false
	}
	done := j.provisionPhase("volumes")
	dirs, err := j.ensureVolumes(ctx, r, images)
	done()
	if err != nil {
		if ctx.Err() != nil {
			return launchInputs{}, canceled, false
		}
		j.log.Error().Err(err).Msg("managed volumes")
		if errors.Is(err, dockerio.ErrImageNotAdmissible) {
			return launchInputs{}, fail(messages.ReasonImagePullFailed, "image metadata is not admissible: the manifest's user is not in the image"), false
		}
		return launchInputs{}, fail(messages.ReasonInternal, "provisioning failed: managed volumes"), false
	}
	return launchInputs{images: images, network: network, dirs: dirs}, Outcome{}, true
}

// ensureVolumes creates (or reuses, its quota updated) every stateful instance's
// volume, with a subdirectory per image VOLUME target.
func (j *job) ensureVolumes(ctx context.Context, r Release, images map[string]dockerio.ImageInfo) (map[string][]string, error) {
	dirs := map[string][]string{}
	for _, svc := range r.Services {
		if svc.Profile.DiskMB <= 0 {
			continue
		}
		if j.vols == nil {
			return nil, fmt.Errorf("service %s is stateful but no volume root (volume_data_path) is configured", svc.Name)
		}
		img := images[svc.Name]
		subdirs := make([]string, 0, len(img.Volumes))
		for _, target := range img.Volumes {
			subdirs = append(subdirs, dockerio.VolumeSubdir(target))
		}
		// The mount points belong to whoever the container runs as: the
		// manifest's user override when it has one, else the image's USER.
		uid, gid := img.UID, img.GID
		if u := svc.Manifest.User; u != "" && len(subdirs) > 0 {
			var err error
			if uid, gid, err = j.eng.ImageUser(ctx, img.ID, u); err != nil {
				return nil, fmt.Errorf("user %q of %s: %w", u, svc.Name, err)
			}
		}
		for i := 0; i < svc.Quantity; i++ {
			path, err := j.vols.Ensure(ctx, dockerio.VolumeName(j.lease, svc.Name, i), svc.Profile.DiskMB, subdirs, uid, gid)
			if err != nil {
				return nil, fmt.Errorf("volume of %s/%d: %w", svc.Name, i, err)
			}
			dirs[svc.Name] = append(dirs[svc.Name], path)
		}
	}
	return dirs, nil
}

func (j *job) prepareImagesAndNetwork(ctx context.Context, r Release) (map[string]dockerio.ImageInfo, leaseNetwork, Outcome, bool) {
	type netResult struct {
		net leaseNetwork
		err error
	}
	netDone := make(chan netResult, 1)
	go func() {
		done := j.provisionPhase("network")
		net, err := j.leaseNetwork(ctx)
		done()
		netDone <- netResult{net, err}
	}()
	done := j.provisionPhase("images")
	images, out, ok := j.admitImages(ctx, r)
	done()
	net := <-netDone
	if !ok {
		return nil, leaseNetwork{}, out, false
	}
	if net.err != nil {
		if ctx.Err() != nil {
			return nil, leaseNetwork{}, canceled, false
		}
		if errors.Is(net.err, dockerio.ErrAddressPoolExhausted) {
			j.log.Error().Err(net.err).Msg("no network address space left")
			return nil, leaseNetwork{}, fail(messages.ReasonInternal, "insufficient resources: no network address space"), false
		}
		j.log.Error().Err(net.err).Msg("lease network")
		if errors.Is(net.err, dockerio.ErrForeignObject) || errors.Is(net.err, dockerio.ErrForeignNetwork) {
			return nil, leaseNetwork{}, fail(messages.ReasonInternal, "the lease network name is taken by another installation"), false
		}
		return nil, leaseNetwork{}, fail(messages.ReasonInternal, "provisioning failed: lease network"), false
	}
	return images, net.net, Outcome{}, true
}

// leaseNetwork finds this attempt's network: the pool's network bound to the
// lease (verified ours by its exact ID), else fred-<lease>, created when absent.
// Only a lease's first attempt takes a new network from the pool; a later one
// gets the pool network it already holds, or keeps fred-<lease>, so a lease
// never moves between networks.
func (j *job) leaseNetwork(ctx context.Context) (leaseNetwork, error) {
	if j.pool != nil {
		first := j.launch.Generation == 1 && j.maint == nil
		id, err := j.pool.Claim(ctx, j.lease, first)
		switch {
		case err != nil:
			if first { // a late binding must not outlive this attempt's choice
				j.pool.Drop(j.lease, "")
			}
			j.log.Warn().Err(err).Msg("network pool did not answer; using the lease's own network")
		case id != "":
			// Verified by ID, with our pool labels, where compose's launch starts
			// (up): a network gone by then is dropped and the launch runs again on
			// the lease's own.
			return leaseNetwork{id: id, pooled: true}, nil
		case first:
			return j.madePoolNetwork(ctx)
		}
	}
	return j.ownNetwork(ctx)
}

// madePoolNetwork is a first attempt's network when the pool had none free:
// the lease creates a pool network itself (the create it would have made for
// fred-<lease>) and has the pool bind it, so that when the lease closes the
// network goes back to the pool instead of being removed — a mass close then
// removes nothing on its leases' behalf. A crash between the create and the
// binding leaves an unbound pool network, which the pool adopts as free.
func (j *job) madePoolNetwork(ctx context.Context) (leaseNetwork, error) {
	n, err := j.eng.CreatePoolNetwork(ctx)
	if err != nil {
		return leaseNetwork{}, fmt.Errorf("create a pool network for the lease: %w", err)
	}
	id, err := j.pool.Bind(ctx, j.lease, n)
	switch {
	case err != nil:
		j.pool.Drop(j.lease, "") // a late binding must not outlive this attempt's choice
		j.log.Warn().Err(err).Msg("network pool did not bind the lease's network; using the lease's own network")
	case id != "":
		return leaseNetwork{id: id, pooled: true}, nil
	}
	return j.ownNetwork(ctx)
}

// ownNetwork is fred-<lease>, created when absent. Any attempt but a lease's
// first may race an earlier one's create (a process killed mid-create: dockerd
// carries the request out anyway).
func (j *job) ownNetwork(ctx context.Context) (leaseNetwork, error) {
	id, err := j.eng.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: j.lease, Tenant: j.spec.Tenant,
		BackendName: j.set.BackendName, InstallationID: j.set.InstallationID, Recheck: j.launch.Generation > 1})
	return leaseNetwork{id: id}, err
}

// up launches the plan build makes for net and returns the cohort it launched
// (as Launched reports it). A pool network found gone by the launch (nothing
// was created) is dropped from the pool, and the launch runs once more on the
// lease's own network; net is what it ran on.
func (j *job) up(ctx context.Context, net *leaseNetwork, build func(leaseNetwork) dockerio.Plan) ([]messages.Container, error) {
	cohort, err := j.eng.Launch(ctx, build(*net))
	if err == nil || !net.pooled || !errors.Is(err, dockerio.ErrPoolNetworkGone) {
		return cohort, err
	}
	j.log.Warn().Err(err).Str("network_id", net.id).Msg("the lease's pool network is gone; using the lease's own network")
	if j.pool != nil {
		j.pool.Drop(j.lease, net.id)
	}
	own, nerr := j.ownNetwork(ctx)
	if nerr != nil {
		return nil, fmt.Errorf("pool network gone, own network: %w", nerr)
	}
	*net = own
	return j.eng.Launch(ctx, build(own))
}

// admitImages admits every service image of r: the recorded content when the
// lease already ran this reference (never the tag again), else the registry's
// answer for the tag. It reports the pins to the actor, which journals them.
func (j *job) admitImages(ctx context.Context, r Release) (map[string]dockerio.ImageInfo, Outcome, bool) {
	byRef := map[string]dockerio.ImageInfo{}
	images := map[string]dockerio.ImageInfo{}
	var pins []ServiceImage
	for _, svc := range r.Services {
		ref := svc.Manifest.Image
		info, done := byRef[ref]
		if !done {
			pctx, pcancel := context.WithTimeout(ctx, j.set.PullTimeout)
			var err error
			if pin, ok := r.Pin(svc.Name); ok && pin.Ref == ref && pin.ID != "" {
				info, err = j.eng.PinnedImage(pctx, pin)
			} else if pin, ok := j.pins[ref]; ok {
				info, err = j.eng.PinnedImage(pctx, pin)
			} else {
				info, err = j.eng.ResolveImage(pctx, ref)
			}
			timedOut := pctx.Err() != nil
			pcancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil, canceled, false
				}
				j.log.Warn().Err(err).Str("image", ref).Msg("image admission failed")
				switch {
				case errors.Is(err, dockerio.ErrImageNotAdmissible):
					return nil, fail(messages.ReasonImagePullFailed, "image metadata is not admissible"), false
				case errors.Is(err, dockerio.ErrImagePull) || timedOut:
					return nil, fail(messages.ReasonImagePullFailed, "image could not be pulled"), false
				}
				return nil, fail(messages.ReasonInternal, "provisioning failed: image"), false
			}
			byRef[ref] = info
		}
		images[svc.Name] = info
		pins = append(pins, ServiceImage{Service: svc.Name, ImagePin: info.Pin(ref)})
	}
	if j.report != nil && !samePins(r.Images, pins) {
		j.report(Pinned{Version: r.Version, Images: pins})
	}
	return images, Outcome{}, true
}

// classifyRejectedLaunch reads a cohort Compose refused to finish launching: the
// definite failures of the seed, else Internal.
func classifyRejectedLaunch(upErr error, cohort []messages.Container) Outcome {
	if errors.Is(upErr, dockerio.ErrForeignObject) {
		return fail(messages.ReasonInternal, "a container of another installation holds this lease's name")
	}
	for _, c := range cohort {
		if c.State == "exited" || c.State == "dead" {
			return fail(messages.ReasonContainerExited, "container exited during startup")
		}
	}
	for _, c := range cohort {
		if c.Health == "unhealthy" {
			return fail(messages.ReasonHealthCheckFailed, "health check failed during startup")
		}
	}
	for _, c := range cohort {
		if c.State == "created" {
			return fail(messages.ReasonContainerStartFailed, "container could not be started")
		}
	}
	return fail(messages.ReasonInternal, "container creation failed")
}

// internal is an attempt that failed for a reason that is ours, not the tenant's.
func (j *job) internal(ctx context.Context, step string, err error) Outcome {
	if ctx.Err() != nil {
		return canceled
	}
	j.log.Error().Err(err).Str("step", step).Msg("provision step failed")
	return j.failAndClean(fail(messages.ReasonInternal, "provisioning failed: "+step), nil)
}

// failAndClean captures the attempt's diagnostics, then removes its containers.
// Cleanup runs on a fresh context: the attempt's deadline may be what failed it.
func (j *job) failAndClean(out Outcome, cohort []messages.Container) Outcome {
	cctx, cancel := context.WithTimeout(context.Background(), j.set.StopTimeout+time.Minute)
	defer cancel()
	if cohort == nil {
		cohort, _ = j.eng.Cohort(cctx, j.lease)
	}
	j.capture(cctx, captureOf{kind: CaptureProvision, reason: out.Reason, message: out.Message, generation: j.launch.Generation}, cohort)
	if err := j.eng.Down(cctx, j.lease, dockerio.DownOptions{StopTimeout: j.set.StopTimeout}); err != nil {
		j.log.Warn().Err(err).Msg("remove failed attempt's containers")
	}
	if j.spec.Restore != nil {
		// A restore that fails before it commits hands the data back to its record.
		if err := j.requarantine(cctx); err != nil {
			j.log.Error().Err(err).Msg("restore failed and its volumes could not be handed back yet; retried by the close or the next attempt")
		}
		out.Reason, out.Message = messages.ReasonRestoreFailed, "restore failed: "+cmpOr(out.Message, "the restored lease did not become ready")
	}
	return out
}

// adoptRetained renames the restore's retained volumes into this lease's names. A
// volume already adopted (a retry after a crash) is accepted; one that exists in
// neither namespace fails the restore: its data is gone.
func (j *job) adoptRetained(ctx context.Context) Outcome {
	if j.vols == nil {
		return fail(messages.ReasonInternal, "no volume root is configured")
	}
	for _, v := range j.spec.Restore.Volumes {
		name := dockerio.VolumeName(j.lease, v.Service, v.Index)
		err := j.vols.Rename(ctx, v.Retained, name)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return canceled
		}
		if errors.Is(err, dockerio.ErrNotFound) {
			if ok, xerr := j.vols.Exists(ctx, name); xerr == nil && ok {
				continue // adopted by an earlier attempt
			}
			return fail(messages.ReasonRestoreFailed, "retained data of "+v.Service+" is missing")
		}
		j.log.Error().Err(err).Str("volume", v.Retained).Msg("adopt retained volume")
		return fail(messages.ReasonInternal, "provisioning failed: adopting retained data")
	}
	return Outcome{}
}

// requarantine hands adopted volumes back to the retention namespace with their
// source quota (idempotent: one already back is accepted).
func (j *job) requarantine(ctx context.Context) error {
	if j.vols == nil || j.spec.Restore == nil {
		return nil
	}
	var errs []error
	for _, v := range j.spec.Restore.Volumes {
		name := dockerio.VolumeName(j.lease, v.Service, v.Index)
		err := j.vols.Rename(ctx, name, v.Retained)
		switch {
		case err == nil, errors.Is(err, dockerio.ErrNotFound):
		default:
			errs = append(errs, fmt.Errorf("hand back %s: %w", name, err))
			continue
		}
		if ok, xerr := j.vols.Exists(ctx, v.Retained); xerr == nil && ok {
			if err := j.vols.SetQuota(ctx, v.Retained, v.SourceQuotaMB); err != nil {
				errs = append(errs, fmt.Errorf("restore the quota of %s: %w", v.Retained, err))
			}
		}
	}
	return errors.Join(errs...)
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
		if ctx.Err() != nil {
			return canceled
		}
		j.log.Warn().Err(err).Msg("resume: list containers")
		return Outcome{Kind: OutcomePending}
	}
	current := ofGeneration(cohort, j.launch.Generation)
	for _, c := range current {
		if c.State == "exited" || c.State == "dead" {
			return j.failAndClean(fail(messages.ReasonContainerExited, "container exited during startup"), current)
		}
	}
	if complete(&j.rel, current) && allRunning(current) {
		dctx, cancel := context.WithDeadline(ctx, j.deadline)
		defer cancel()
		out := j.timedOut(ctx, j.verify(dctx, current, &j.rel, j.deadline))
		if out.Kind == OutcomeReady || out.Kind == OutcomeCanceled {
			return out
		}
		return j.failAndClean(out, nil)
	}
	if err := j.removeExact(ctx, cohort); err != nil {
		if ctx.Err() != nil {
			return canceled
		}
		j.log.Warn().Err(err).Msg("resume: remove the interrupted launch")
		return Outcome{Kind: OutcomePending}
	}
	j.log.Info().Int("containers", len(cohort)).Uint64("generation", j.launch.Generation).
		Msg("interrupted provision: incomplete cohort removed; starting again")
	return Outcome{Kind: OutcomeRetry}
}

// removeExact stops and removes exactly these containers, gently.
func (j *job) removeExact(ctx context.Context, cs []messages.Container) error {
	var errs []error
	for _, c := range cs {
		if err := j.eng.StopRemove(ctx, c.ID, j.set.StopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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

// --- teardown ----------------------------------------------------------------------

// teardown removes every container of the lease (our own, by exact ID, then the
// stragglers) and checks twice that none is left, so a create that was in flight
// when the close won is caught too. Only then are the volumes dealt with, as the
// journaled close decided: handed back to a restore's record, retained, or
// destroyed (a busy one handed to the volumehold actor; the close waits for it).
func (j *job) teardown(ctx context.Context) TornDown {
	ctx, cancel := context.WithTimeout(ctx, j.set.StopTimeout+2*time.Minute)
	defer cancel()
	if err := j.eng.Down(ctx, j.lease, dockerio.DownOptions{StopTimeout: j.set.StopTimeout}); err != nil {
		return TornDown{Err: fmt.Errorf("compose down: %w", err)}
	}
	for clean := 0; clean < 2; {
		left, err := j.leftovers(ctx)
		if err != nil {
			return TornDown{Err: err}
		}
		if len(left) == 0 {
			clean++
		} else {
			clean = 0
			if err := j.eng.RemoveContainers(ctx, left); err != nil {
				return TornDown{Err: fmt.Errorf("remove stragglers: %w", err)}
			}
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return TornDown{Err: err}
		}
	}
	return j.closeVolumes(ctx)
}

// leaseVolumes are the managed volumes the lease's stateful services own.
func (j *job) leaseVolumes() []messages.RetainedVolume {
	var out []messages.RetainedVolume
	for _, svc := range j.rel.Services {
		if svc.Profile.DiskMB <= 0 {
			continue
		}
		for i := 0; i < svc.Quantity; i++ {
			out = append(out, messages.RetainedVolume{Name: dockerio.VolumeName(j.lease, svc.Name, i),
				Service: svc.Name, Index: i, QuotaMB: svc.Profile.DiskMB})
		}
	}
	return out
}

func (j *job) closeVolumes(ctx context.Context) TornDown {
	vols := j.leaseVolumes()
	if len(vols) == 0 || j.vols == nil {
		return TornDown{}
	}
	c := j.close
	if c != nil && c.Requarantine {
		if err := j.requarantine(ctx); err != nil {
			return TornDown{Err: err}
		}
		return TornDown{}
	}
	var out TornDown
	for _, v := range vols {
		retained := dockerio.RetainedVolumeName(j.lease, v.Service, v.Index)
		if c != nil && c.Retain {
			err := j.vols.Rename(ctx, v.Name, retained)
			if errors.Is(err, dockerio.ErrNotFound) {
				ok, xerr := j.vols.Exists(ctx, retained)
				if xerr != nil {
					return TornDown{Err: xerr}
				}
				if !ok {
					continue // never created (the lease never launched): nothing to keep
				}
				err = nil // renamed by an earlier attempt of this close
			}
			if err != nil {
				return TornDown{Err: fmt.Errorf("retain %s: %w", v.Name, err)}
			}
			used, err := j.vols.Usage(ctx, retained)
			if err != nil {
				return TornDown{Err: fmt.Errorf("measure %s: %w", retained, err)}
			}
			v.Name, v.UsedBytes = retained, used
			out.Retained = append(out.Retained, v)
			continue
		}
		err := j.vols.Destroy(ctx, v.Name)
		if errors.Is(err, dockerio.ErrVolumeBusy) {
			j.log.Warn().Str("volume", v.Name).Msg("volume busy: its deletion is held and retried")
			if j.hold != nil {
				j.hold(v.Name)
			}
			out.Held = append(out.Held, v.Name)
			continue
		}
		if err != nil {
			return TornDown{Err: fmt.Errorf("destroy %s: %w", v.Name, err)}
		}
	}
	return out
}

func (j *job) leftovers(ctx context.Context) ([]string, error) {
	all, err := j.eng.ListManaged(ctx)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var ids []string
	for _, c := range all {
		if c.Lease == j.lease {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

// --- runtime failure ---------------------------------------------------------------

// confirmExited inspects a container the event stream reported dead; it returns
// the container only when Docker confirms it is no longer running.
func (j *job) confirmExited(ctx context.Context, id string) *messages.Container {
	c, err := j.eng.Inspect(ctx, id)
	if errors.Is(err, dockerio.ErrNotFound) {
		return &messages.Container{ID: id, State: "removed", ExitCode: -1}
	}
	if err != nil || c.State == "running" || c.State == "restarting" {
		return nil
	}
	return &c
}

// captureRuntimeFailure records the dead cohort's state and logs for diagnostics.
func (j *job) captureRuntimeFailure(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	f := j.pending
	if f == nil {
		return
	}
	cohort, _ := j.eng.Cohort(ctx, j.lease)
	msg := fmt.Sprintf("container %s/%d exited with code %d", f.Service, f.Index, f.ExitCode)
	if f.OOMKilled {
		msg += " (out of memory)"
	}
	j.capture(ctx, captureOf{kind: CaptureRuntime, reason: messages.ReasonContainerExited, message: msg, generation: j.launch.Generation}, cohort)
}

// --- cohorts -------------------------------------------------------------------------

// complete reports whether cohort is exactly r's instances, each once.
func complete(r *Release, cohort []messages.Container) bool {
	want := r.expected()
	seen := make(map[dockerio.InstanceKey]bool)
	for _, c := range cohort {
		k := dockerio.InstanceKey{Service: c.Service, Index: c.Index}
		if !want[k] || seen[k] {
			return false // foreign or duplicate instance: not a cohort we launched
		}
		seen[k] = true
	}
	return len(seen) == len(want)
}

func allRunning(cohort []messages.Container) bool {
	for _, c := range cohort {
		if c.State != "running" {
			return false
		}
	}
	return true
}

// instances records a verified cohort for the Ready transition.
func instances(r *Release, cohort []messages.Container) []Instance {
	images := serviceImages(r.Services)
	out := make([]Instance, 0, len(cohort))
	for _, c := range cohort {
		inst := Instance{Service: c.Service, Index: c.Index, ContainerID: c.ID, Image: images[c.Service]}
		inst.Ports = portsOf(c.Ports)
		out = append(out, inst)
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].Service != out[k].Service {
			return out[i].Service < out[k].Service
		}
		return out[i].Index < out[k].Index
	})
	return out
}
