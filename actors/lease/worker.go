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
)

// job is the Docker work of one lease, run on a worker goroutine. It holds copies
// of what it needs, never the actor's state.
type job struct {
	eng   dockerio.Engine
	diag  *persistence.Diagnostics
	set   *Settings
	spec  *Spec
	st    State // copy at start
	log   zerolog.Logger
	now   func() time.Time
	lease string
}

func (a *Actor) job(spec *Spec) *job {
	return &job{eng: a.deps.Engine, diag: a.deps.Diag, set: a.set, spec: spec, st: *a.st,
		log: *a.log(), now: a.deps.Now, lease: a.id}
}

// fail is a definite provision failure with a curated reason and message.
func fail(reason, message string) outcome {
	return outcome{reason: reason, message: message}
}

// provision runs one attempt within its deadline. A deadline that ends the attempt
// fails it (cleaned up); only a cancellation — a close or a drain — leaves the
// outcome to the actor.
func (j *job) provision(parent context.Context) outcome {
	ctx, cancel := context.WithDeadline(parent, j.st.Deadline)
	defer cancel()
	return j.timedOut(parent, j.attempt(ctx))
}

// timedOut turns an attempt cut off by its deadline into a definite failure.
func (j *job) timedOut(parent context.Context, out outcome) outcome {
	if out.canceled && parent.Err() == nil {
		return j.failAndClean(parent, fail(messages.ReasonInternal, "provisioning did not complete in time"), nil)
	}
	return out
}

// attempt cleans up what a previous attempt left, pulls and inspects images, makes
// the lease network, composes up, then verifies the cohort.
func (j *job) attempt(ctx context.Context) outcome {

	// A re-provision starts from nothing: old containers go, volumes stay. The
	// first attempt of a lease has nothing to remove.
	if j.st.Generation > 1 {
		if err := j.eng.Down(ctx, j.lease, dockerio.DownOptions{StopTimeout: j.set.StopTimeout}); err != nil {
			return j.internal(ctx, "remove previous containers", err)
		}
	}

	// The lease network and the images are independent: prepare them at once.
	type netResult struct {
		id  string
		err error
	}
	netDone := make(chan netResult, 1)
	go func() {
		id, err := j.eng.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: j.lease, Tenant: j.spec.Tenant,
			BackendName: j.set.BackendName, InstallationID: j.set.InstallationID})
		netDone <- netResult{id, err}
	}()
	images, out, failed := j.prepareImages(ctx)
	net := <-netDone
	if failed {
		return out
	}
	networkID, err := net.id, net.err
	if err != nil {
		if errors.Is(err, dockerio.ErrAddressPoolExhausted) {
			j.log.Error().Err(err).Msg("no network address space left")
			return j.failAndClean(ctx, fail(messages.ReasonInternal, "insufficient resources: no network address space"), nil)
		}
		return j.internal(ctx, "lease network", err)
	}

	plan := j.spec.plan(&j.st, j.set, images, networkID)
	upErr := j.eng.Up(ctx, plan)
	if ctx.Err() != nil {
		return outcome{canceled: true}
	}
	cohort, err := j.eng.Cohort(ctx, j.lease)
	if err != nil {
		return j.internal(ctx, "list containers", err)
	}
	if upErr != nil {
		j.log.Warn().Err(upErr).Msg("compose up failed")
		return j.failAndClean(ctx, classifyRejectedLaunch(cohort), cohort)
	}
	out = j.verify(ctx, cohort)
	if out.ok || out.canceled {
		return out
	}
	return j.failAndClean(ctx, out, nil)
}

// prepareImages pulls and inspects every distinct image of the lease. On failure
// it returns the attempt's outcome and failed=true.
func (j *job) prepareImages(ctx context.Context) (map[string]dockerio.ImageInfo, outcome, bool) {
	images := make(map[string]dockerio.ImageInfo)
	for _, svc := range j.spec.Services {
		ref := svc.Manifest.Image
		if _, done := images[ref]; done {
			continue
		}
		pctx, pcancel := context.WithTimeout(ctx, j.set.PullTimeout)
		info, err := j.eng.ResolveImage(pctx, ref)
		pcancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, outcome{canceled: true}, true
			}
			j.log.Warn().Err(err).Str("image", ref).Msg("image pull failed")
			if errors.Is(err, dockerio.ErrImagePull) || pctx.Err() != nil {
				return nil, j.failAndClean(ctx, fail(messages.ReasonImagePullFailed, "image could not be pulled"), nil), true
			}
			return nil, j.internal(ctx, "pull image", err), true
		}
		images[ref] = info
	}
	return images, outcome{}, false
}

// classifyRejectedLaunch reads a cohort Compose refused to finish launching: the
// definite failures of the seed, else Internal.
func classifyRejectedLaunch(cohort []dockerio.Container) outcome {
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
func (j *job) internal(ctx context.Context, step string, err error) outcome {
	if ctx.Err() != nil {
		return outcome{canceled: true}
	}
	j.log.Error().Err(err).Str("step", step).Msg("provision step failed")
	return j.failAndClean(ctx, fail(messages.ReasonInternal, "provisioning failed: "+step), nil)
}

// failAndClean captures the attempt's diagnostics, then removes its containers.
// Cleanup runs on a fresh context: the attempt's deadline may be what failed it.
func (j *job) failAndClean(ctx context.Context, out outcome, cohort []dockerio.Container) outcome {
	cctx, cancel := context.WithTimeout(context.Background(), j.set.StopTimeout+time.Minute)
	defer cancel()
	if cohort == nil {
		cohort, _ = j.eng.Cohort(cctx, j.lease)
	}
	j.capture(cctx, out.reason, out.message, cohort)
	if err := j.eng.Down(cctx, j.lease, dockerio.DownOptions{StopTimeout: j.set.StopTimeout}); err != nil {
		j.log.Warn().Err(err).Msg("remove failed attempt's containers")
	}
	out.cleaned = true
	return out
}

// resume decides a provision whose worker never reported (restart of the actor or
// the process): a complete, running cohort of this generation resumes verification;
// a cohort with a dead container cannot finish and is failed; anything else is left
// pending until the provision deadline, then cleaned up and failed.
func (j *job) resume(ctx context.Context) outcome {
	if !j.now().Before(j.st.Deadline) {
		return j.failAndClean(ctx, fail(messages.ReasonInternal, "provisioning did not complete in time"), nil)
	}
	cohort, err := j.eng.Cohort(ctx, j.lease)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{canceled: true}
		}
		j.log.Warn().Err(err).Msg("resume: list containers")
		return outcome{pending: true}
	}
	var current []dockerio.Container
	for _, c := range cohort {
		if c.Generation == j.st.Generation {
			current = append(current, c)
		}
	}
	for _, c := range current {
		if c.State == "exited" || c.State == "dead" {
			return j.failAndClean(ctx, fail(messages.ReasonContainerExited, "container exited during startup"), current)
		}
	}
	if complete(j.spec, current) && allRunning(current) {
		dctx, cancel := context.WithDeadline(ctx, j.st.Deadline)
		defer cancel()
		out := j.timedOut(ctx, j.verify(dctx, current))
		if out.ok || out.canceled || out.cleaned {
			return out
		}
		return j.failAndClean(ctx, out, nil)
	}
	return outcome{pending: true} // before the deadline (checked above)
}

// teardown removes every container of the lease (Compose down, then exact-ID
// removal of stragglers) and its volumes, then checks twice that none is left, so
// a create that was in flight when the close won is caught too.
func (j *job) teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, j.set.StopTimeout+2*time.Minute)
	defer cancel()
	if err := j.eng.Down(ctx, j.lease, dockerio.DownOptions{StopTimeout: j.set.StopTimeout, RemoveVolumes: true}); err != nil {
		return fmt.Errorf("compose down: %w", err)
	}
	for clean := 0; clean < 2; {
		left, err := j.leftovers(ctx)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			clean++
		} else {
			clean = 0
			if err := j.eng.RemoveContainers(ctx, left); err != nil {
				return fmt.Errorf("remove stragglers: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
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

// confirmExited inspects a container the event stream reported dead; it returns
// the container only when Docker confirms it is no longer running.
func (j *job) confirmExited(ctx context.Context, id string) *dockerio.Container {
	c, err := j.eng.Inspect(ctx, id)
	if errors.Is(err, dockerio.ErrNotFound) {
		return &dockerio.Container{ID: id, State: "removed", ExitCode: -1}
	}
	if err != nil || c.State == "running" || c.State == "restarting" {
		return nil
	}
	return &c
}

// captureRuntimeFailure records the dead cohort's state and logs for diagnostics.
func (j *job) captureRuntimeFailure(ctx context.Context, f RuntimeFailing) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cohort, _ := j.eng.Cohort(ctx, j.lease)
	msg := fmt.Sprintf("container %s/%d exited with code %d", f.Service, f.Index, f.ExitCode)
	if f.OOMKilled {
		msg += " (out of memory)"
	}
	j.capture(ctx, messages.ReasonContainerExited, msg, cohort)
}

func complete(spec *Spec, cohort []dockerio.Container) bool {
	want := spec.Expected()
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

func allRunning(cohort []dockerio.Container) bool {
	for _, c := range cohort {
		if c.State != "running" {
			return false
		}
	}
	return true
}

// instances records a verified cohort for the Ready transition.
func instances(spec *Spec, cohort []dockerio.Container) []Instance {
	images := spec.ServiceImages()
	out := make([]Instance, 0, len(cohort))
	for _, c := range cohort {
		inst := Instance{Service: c.Service, Index: c.Index, ContainerID: c.ID, Image: images[c.Service]}
		if len(c.Ports) > 0 {
			inst.Ports = make(map[string]messages.PortBinding, len(c.Ports))
			for k, b := range c.Ports {
				inst.Ports[k] = messages.PortBinding{HostIP: b.HostIP, HostPort: b.HostPort}
			}
		}
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
