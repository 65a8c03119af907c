package lease

import (
	"context"
	"sort"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// verify is the seed's startup verification of a launched cohort of release r.
// Without any manifest health check it waits startup_verify_duration and inspects
// every container; with one it polls every HealthPoll until one pass sees the whole
// cohort ready (a health pass is sticky: a later flap does not fail it). Success is
// reported only when one pass sees every container ready. Only a definite finding
// fails: a container that exited (or vanished), a health check that failed before
// it ever passed or never passed while the container ran. Anything else — a
// cohort not listed whole, a container not running, inspects that keep failing —
// is pending: the attempt stays in flight and the resume settles it.
func (j *job) verify(ctx context.Context, cohort []messages.Container, r *Release, provisionDeadline time.Time) Outcome {
	if !complete(r, cohort) {
		j.log.Warn().Int("containers", len(cohort)).Msg("verification: the launched cohort is not listed whole; left to the resume")
		return pending
	}
	deadline := healthDeadline(j.now(), provisionDeadline)
	if !r.hasHealthCheck() {
		if err := steps.Sleep(ctx, j.set.VerifyDuration); err != nil {
			return canceled
		}
		pass, out, ok := j.inspectAll(ctx, cohort, deadline)
		if !ok {
			return out
		}
		for _, c := range pass {
			if c.State == "exited" || c.State == "dead" {
				return fail(messages.ReasonContainerExited, "container exited during startup")
			}
		}
		for _, c := range pass {
			if c.State != "running" {
				j.log.Warn().Str("container", shortID(c.ID)).Str("state", c.State).Msg("verification: container not running; left to the resume")
				return pending
			}
		}
		return Outcome{Kind: OutcomeReady, Containers: instances(r, pass)}
	}
	return j.verifyHealth(ctx, cohort, r, deadline)
}

// verifyHealth polls until every container is ready: healthy for services with an
// active check, running for startup_verify_duration for the others.
func (j *job) verifyHealth(ctx context.Context, cohort []messages.Container, r *Release, deadline time.Time) Outcome {
	checked := make(map[string]bool)
	for _, svc := range r.Services {
		checked[svc.Name] = svc.Manifest.HealthCheck.Active()
	}
	passed := make(map[string]bool)
	for {
		pass, out, ok := j.inspectAll(ctx, cohort, deadline)
		if !ok {
			return out
		}
		ready := true
		for _, c := range pass {
			switch {
			case c.State == "exited" || c.State == "dead":
				return fail(messages.ReasonContainerExited, "container exited during startup")
			case c.State != "running":
				ready = false
			case checked[c.Service]:
				if c.Health == "healthy" {
					passed[c.ID] = true
				} else if c.Health == "unhealthy" && !passed[c.ID] {
					return fail(messages.ReasonHealthCheckFailed, "health check failed during startup")
				}
				if !passed[c.ID] {
					ready = false
				}
			default:
				// Container start times are Docker's wall clock, not the lease clock.
				if c.StartedAt.IsZero() || time.Since(c.StartedAt) < j.set.VerifyDuration {
					ready = false
				}
			}
		}
		if ready {
			return Outcome{Kind: OutcomeReady, Containers: instances(r, pass)}
		}
		if !j.now().Before(deadline) {
			for _, c := range pass {
				if c.State == "running" && checked[c.Service] && !passed[c.ID] {
					return fail(messages.ReasonHealthCheckFailed, "health check did not pass in time")
				}
			}
			j.log.Warn().Msg("verification: containers not running at the verification deadline; left to the resume")
			return pending
		}
		if err := steps.Sleep(ctx, min(j.set.HealthPoll, time.Until(deadline)+time.Millisecond)); err != nil {
			return canceled
		}
	}
}

// healthDeadline ends polling one minute before the provision deadline, leaving time
// to roll the attempt back (half the remaining time when less than two remain).
func healthDeadline(now, provisionDeadline time.Time) time.Time {
	remaining := provisionDeadline.Sub(now)
	if remaining < 2*time.Minute {
		return now.Add(remaining / 2)
	}
	return provisionDeadline.Add(-time.Minute)
}

// inspectPatience bounds how long a failing inspect is retried before the attempt
// is left to the resume (which lists and verifies again every ResumePoll).
const inspectPatience = 10 * time.Second

// inspectAll inspects every container of the cohort once. A transient error is
// retried every HealthPoll for inspectPatience (at most until deadline); then the
// attempt is pending, never failed. A container Docker no longer has reads as dead.
func (j *job) inspectAll(ctx context.Context, cohort []messages.Container, deadline time.Time) ([]messages.Container, Outcome, bool) {
	out := make([]messages.Container, 0, len(cohort))
	giveUp := j.now().Add(inspectPatience)
	if deadline.Before(giveUp) {
		giveUp = deadline
	}
	for _, c := range cohort {
		for attempt := 1; ; attempt++ {
			got, err := j.eng.Inspect(ctx, c.ID)
			if err == nil {
				out = append(out, got)
				break
			}
			if ctx.Err() != nil {
				return nil, canceled, false
			}
			if errdefs.IsNotFound(err) {
				c.State = "dead" // removed under us: it did not keep running
				out = append(out, c)
				break
			}
			if !j.now().Before(giveUp) {
				j.log.Warn().Err(err).Msg("verification inspects keep failing; left to the resume")
				return nil, pending, false
			}
			j.log.Debug().Err(err).Int("attempt", attempt).Msg("verification inspect failed; retrying")
			if err := steps.Sleep(ctx, j.set.HealthPoll); err != nil {
				return nil, canceled, false
			}
		}
	}
	return out, Outcome{}, true
}

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
		if len(c.Ports) > 0 {
			inst.Ports = portsOf(c.Ports)
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
