package lease

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// verify is the seed's startup verification of a launched cohort. Without any
// manifest health check it waits startup_verify_duration and inspects every
// container once; with one it polls every HealthPoll until one pass sees the whole
// cohort ready. Success is reported only when one pass sees every container ready.
func (j *job) verify(ctx context.Context, cohort []dockerio.Container) outcome {
	if !complete(j.spec, cohort) {
		return fail(messages.ReasonInternal, "launched cohort is incomplete")
	}
	if !j.spec.HasHealthCheck() {
		if err := sleep(ctx, j.set.VerifyDuration); err != nil {
			return outcome{canceled: true}
		}
		pass, err := j.inspectAll(ctx, cohort)
		if err != nil {
			return j.verifyError(ctx, err)
		}
		for _, c := range pass {
			if c.State == "exited" || c.State == "dead" {
				return fail(messages.ReasonContainerExited, "container exited during startup")
			}
		}
		for _, c := range pass {
			if c.State != "running" {
				return fail(messages.ReasonInternal, "container not running after startup")
			}
		}
		return outcome{ok: true, containers: instances(j.spec, pass)}
	}
	return j.verifyHealth(ctx, cohort)
}

// verifyHealth polls until every container is ready: healthy for services with an
// active check (a pass is sticky: a later flap does not fail the provision), running
// for startup_verify_duration for the others.
func (j *job) verifyHealth(ctx context.Context, cohort []dockerio.Container) outcome {
	checked := make(map[string]bool)
	for _, svc := range j.spec.Services {
		checked[svc.Name] = svc.Manifest.HealthCheck.Active()
	}
	deadline := healthDeadline(j.now(), j.st.Deadline)
	passed := make(map[string]bool)
	for {
		pass, err := j.inspectAll(ctx, cohort)
		if err != nil {
			return j.verifyError(ctx, err)
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
			return outcome{ok: true, containers: instances(j.spec, pass)}
		}
		if !j.now().Before(deadline) {
			for _, c := range pass {
				if c.State == "running" && checked[c.Service] && !passed[c.ID] {
					return fail(messages.ReasonHealthCheckFailed, "health check did not pass in time")
				}
			}
			return fail(messages.ReasonInternal, "containers did not start in time")
		}
		if err := sleep(ctx, min(j.set.HealthPoll, time.Until(deadline)+time.Millisecond)); err != nil {
			return outcome{canceled: true}
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

func (j *job) inspectAll(ctx context.Context, cohort []dockerio.Container) ([]dockerio.Container, error) {
	out := make([]dockerio.Container, 0, len(cohort))
	for _, c := range cohort {
		got, err := j.eng.Inspect(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, got)
	}
	return out, nil
}

func (j *job) verifyError(ctx context.Context, err error) outcome {
	if ctx.Err() != nil {
		return outcome{canceled: true}
	}
	j.log.Warn().Err(err).Msg("verification inspect failed")
	return fail(messages.ReasonInternal, "containers could not be inspected")
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
