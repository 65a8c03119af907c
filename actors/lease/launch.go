package lease

// A launch's inputs: the release's images admitted, the lease network found or
// made, the stateful instances' volumes, then Compose's launch itself.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// launchInputs is what a launch needs beside the release: the admitted images, the
// verified lease network, the stateful instances' volume directories and each
// service's writable paths.
type launchInputs struct {
	images   map[string]dockerio.ImageInfo
	network  leaseNetwork
	dirs     map[string][]string
	writable map[string]writableService
}

// leaseNetwork is the network a launch attaches to: fred-<lease>, the warm
// pool network bound to the lease (pooled), or Docker's isolated default bridge
// (bridged: the lease is bound to it and the release runs one container). name
// is "" when the pool did not know it (the engine asks Docker).
type leaseNetwork struct {
	id, name string
	pooled   bool
	bridged  bool
}

// singleContainer reports whether r runs exactly one container (one service of
// quantity 1): only such a release may run on the default bridge, which has no
// DNS for a second container to find the first by.
func singleContainer(r Release) bool {
	return len(r.Services) == 1 && r.Services[0].Quantity == 1
}

// prepare admits the release's images and ensures the lease network, at once (they
// are independent), detecting the images' writable paths as soon as they are
// admitted; then the stateful instances' volumes (their mount points owned by the
// container's user) and the writable paths' seeds. A failure is returned as an
// Outcome with ok false: Failed for a definite one (not yet cleaned up), Canceled
// when ctx ended. A skipped step degrades the launch (j.degraded) instead.
func (j *job) prepare(ctx context.Context, r Release) (launchInputs, Outcome, bool) {
	j.degraded = ""
	images, network, det, out, ok := j.prepareImagesAndNetwork(ctx, r)
	if !ok {
		return launchInputs{}, out, false
	}
	found := det.wait()
	if err := notAdmissible(found); err != nil {
		j.log.Warn().Err(err).Msg("writable-path detection")
		return launchInputs{}, fail(messages.ReasonImagePullFailed, "image metadata is not admissible: the manifest's user is not in the image"), false
	}
	done := j.provisionPhase("volumes")
	dirs, err := j.ensureVolumes(ctx, r, images, found)
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
	return launchInputs{images: images, network: network, dirs: dirs, writable: j.seedWritable(ctx, r, found, dirs)}, Outcome{}, true
}

// ensureVolumes creates (or reuses, its quota updated) every stateful instance's
// volume, with a subdirectory per image VOLUME target.
func (j *job) ensureVolumes(ctx context.Context, r Release, images map[string]dockerio.ImageInfo, found map[string]detected) (map[string][]string, error) {
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
		d, detectedOK := found[svc.Name]
		uid, gid, err := j.owner(ctx, svc, img, d, detectedOK)
		if err != nil {
			return nil, fmt.Errorf("user %q of %s: %w", svc.Manifest.User, svc.Name, err)
		}
		for i := 0; i < svc.Quantity; i++ {
			path, err := j.vols.Ensure(ctx, messages.VolumeName(j.lease, svc.Name, i), svc.Profile.DiskMB, subdirs, uid, gid)
			if err != nil {
				return nil, fmt.Errorf("volume of %s/%d: %w", svc.Name, i, err)
			}
			dirs[svc.Name] = append(dirs[svc.Name], path)
		}
	}
	return dirs, nil
}

// prepareImagesAndNetwork admits the images while the network is made, and
// starts the writable-path detection as soon as the images are in.
func (j *job) prepareImagesAndNetwork(ctx context.Context, r Release) (map[string]dockerio.ImageInfo, leaseNetwork, *detection, Outcome, bool) {
	type netResult struct {
		net leaseNetwork
		err error
	}
	netDone := make(chan netResult, 1)
	go func() {
		done := j.provisionPhase("network")
		net, err := j.leaseNetwork(ctx, r)
		done()
		netDone <- netResult{net, err}
	}()
	done := j.provisionPhase("images")
	images, out, ok := j.admitImages(ctx, r)
	done()
	if !ok {
		<-netDone
		return nil, leaseNetwork{}, nil, out, false
	}
	det := j.detectWritable(ctx, r, images)
	net := <-netDone
	if out, ok := j.networkOutcome(ctx, net.err); !ok {
		det.abandon()
		return nil, leaseNetwork{}, nil, out, false
	}
	return images, net.net, det, Outcome{}, true
}

// networkOutcome classifies a failure to get the lease network.
func (j *job) networkOutcome(ctx context.Context, err error) (Outcome, bool) {
	switch {
	case err == nil:
		return Outcome{}, true
	case ctx.Err() != nil:
		return canceled, false
	case errdefs.IsResourceExhausted(err):
		j.log.Error().Err(err).Msg("no network address space left")
		return fail(messages.ReasonInternal, "insufficient resources: no network address space"), false
	}
	j.log.Error().Err(err).Msg("lease network")
	if errors.Is(err, dockerio.ErrForeignObject) { // ErrForeignNetwork too
		return fail(messages.ReasonInternal, "the lease network name is taken by another installation"), false
	}
	return fail(messages.ReasonInternal, "provisioning failed: lease network"), false
}

// leaseNetwork finds the network of this attempt to launch r: the pool's
// network bound to the lease (verified ours by its exact ID), the default
// bridge when the lease is bound to it and r runs one container, else
// fred-<lease>, created when absent. Only a lease's first attempt takes a new
// network (or a slot of the bridge) from the pool; a later one gets what it
// already holds, or keeps fred-<lease>, so a lease never moves between
// networks — but for a bridged lease whose release runs more than one
// container (an update added one): that release runs on fred-<lease>, and a
// release of one container again (a rollback) on the bridge. The choice
// follows from the lease's binding and r alone, so every attempt, restart and
// compensation makes the same one.
func (j *job) leaseNetwork(ctx context.Context, r Release) (leaseNetwork, error) {
	if j.pool != nil {
		first, single := j.launch.Generation == 1 && j.maint == nil, singleContainer(r)
		n, err := j.pool.Claim(ctx, j.lease, first, single)
		switch {
		case err != nil:
			if first { // a late binding must not outlive this attempt's choice
				j.pool.Drop(j.lease, "")
			}
			j.log.Warn().Err(err).Msg("network pool did not answer; using the lease's own network")
		case n.Bridged && single:
			// Verified to isolate still where compose's launch starts (up).
			return leaseNetwork{id: n.ID, name: n.Name, bridged: true}, nil
		case n.Bridged: // more than one container: never on the bridge
		case n.ID != "":
			// Verified by ID, with our pool labels, where compose's launch starts
			// (up): a network gone by then is dropped and the launch runs again on
			// the lease's own.
			return leaseNetwork{id: n.ID, name: n.Name, pooled: true}, nil
		case first && !j.set.NoWarmPool:
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
	bound, err := j.pool.Bind(ctx, j.lease, n)
	switch {
	case err != nil:
		j.pool.Drop(j.lease, "") // a late binding must not outlive this attempt's choice
		j.log.Warn().Err(err).Msg("network pool did not bind the lease's network; using the lease's own network")
	case bound.ID != "":
		return leaseNetwork{id: bound.ID, name: bound.Name, pooled: true}, nil
	}
	return j.ownNetwork(ctx)
}

// ownNetwork is fred-<lease>, created when absent. Any attempt but a lease's
// first may race an earlier one's create (a process killed mid-create: dockerd
// carries the request out anyway).
func (j *job) ownNetwork(ctx context.Context) (leaseNetwork, error) {
	id, err := j.eng.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: j.lease, Tenant: j.spec.Tenant,
		BackendName: j.set.BackendName, InstallationID: j.set.InstallationID, Recheck: j.launch.Generation > 1})
	return leaseNetwork{id: id, name: dockerio.ProjectName(j.lease)}, err
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
					return nil, fail(messages.ReasonImagePullFailed, notAdmissibleMessage(err)), false
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
	if j.report != nil && !slices.Equal(r.Images, pins) {
		j.report(Pinned{Version: r.Version, Images: pins})
	}
	return images, Outcome{}, true
}

// classifyRejectedLaunch reads a cohort Compose refused to finish launching. Only
// an exchange Docker answered can hold a definite finding (seed: an exited or
// unhealthy container, or one still created after its start was refused); a
// launch cut off unanswered — a create or start past its timeout, Docker
// unreachable — holds none, whatever its containers show yet: under load
// dockerd may still carry the start out. Compose's error text is never read. No
// definite finding leaves the attempt pending, for the resume.
func classifyRejectedLaunch(upErr error, cohort []messages.Container) Outcome {
	if errors.Is(upErr, dockerio.ErrForeignObject) {
		return fail(messages.ReasonInternal, "a container of another installation holds this lease's name")
	}
	if errors.Is(upErr, dockerio.ErrBridgeNotIsolated) {
		return fail(messages.ReasonInternal, "not started: the host's default bridge no longer isolates containers (icc is on)")
	}
	if unanswered(upErr) {
		return pending
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
	return pending
}

// unanswered reports a Docker exchange that ended without Docker's answer: a
// timeout, a cancellation, an unreachable engine.
func unanswered(err error) bool {
	var timeout interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, dockerio.ErrUnavailable) || errors.As(err, &timeout) && timeout.Timeout()
}
