package steps

import (
	"context"
	"errors"
	"time"

	"github.com/containerd/errdefs"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/messages"
)

// Verify is the seed's startup verification of a launched cohort. It has no
// Down: it changes nothing.
type Verify struct {
	API        ContainersAPI
	Now        func() time.Time // the lease clock
	Duration   time.Duration    // startup_verify_duration
	HealthPoll time.Duration
	Log        *zerolog.Logger
}

// errUnsettled is a verification that found nothing definite: the attempt
// stays in flight and the resume settles it.
var errUnsettled = errors.New("verification unsettled")

// Up verifies cohort, checked naming the services with an active health check,
// and answers it as one pass saw it, every container ready. Without any check
// it waits Duration and inspects every container; with one it polls every
// HealthPoll until one pass sees the whole cohort ready (a health pass is
// sticky: a later flap does not fail it), running for Duration for the
// services without one. Only a definite finding fails, as a *Failed: a
// container that exited (or vanished), a health check that failed before it
// ever passed or never passed while the container ran. Anything else — a
// container not running, inspects that keep failing — found nothing definite;
// ctx ending answers its error.
func (s Verify) Up(ctx context.Context, cohort []messages.Container, checked map[string]bool, provisionDeadline time.Time) ([]messages.Container, error) {
	deadline := healthDeadline(s.Now(), provisionDeadline)
	health := false
	for _, on := range checked {
		health = health || on
	}
	if !health {
		if err := Sleep(ctx, s.Duration); err != nil {
			return nil, err
		}
		pass, err := s.inspectAll(ctx, cohort, deadline)
		if err != nil {
			return nil, err
		}
		for _, c := range pass {
			if c.State == "exited" || c.State == "dead" {
				return nil, exitedDuringStartup
			}
		}
		for _, c := range pass {
			if c.State != "running" {
				s.Log.Warn().Str("container", c.ID[:min(12, len(c.ID))]).Str("state", c.State).Msg("verification: container not running; left to the resume")
				return nil, errUnsettled
			}
		}
		return pass, nil
	}
	return s.health(ctx, cohort, checked, deadline)
}

var exitedDuringStartup = fail(messages.ReasonContainerExited, "container exited during startup", nil)

// health polls until every container is ready: healthy for services with an
// active check, running for Duration for the others.
func (s Verify) health(ctx context.Context, cohort []messages.Container, checked map[string]bool, deadline time.Time) ([]messages.Container, error) {
	passed := make(map[string]bool)
	for {
		pass, err := s.inspectAll(ctx, cohort, deadline)
		if err != nil {
			return nil, err
		}
		ready := true
		for _, c := range pass {
			switch {
			case c.State == "exited" || c.State == "dead":
				return nil, exitedDuringStartup
			case c.State != "running":
				ready = false
			case checked[c.Service]:
				if c.Health == "healthy" {
					passed[c.ID] = true
				} else if c.Health == "unhealthy" && !passed[c.ID] {
					return nil, fail(messages.ReasonHealthCheckFailed, "health check failed during startup", nil)
				}
				if !passed[c.ID] {
					ready = false
				}
			default:
				// Container start times are Docker's wall clock, not the lease clock.
				if c.StartedAt.IsZero() || time.Since(c.StartedAt) < s.Duration {
					ready = false
				}
			}
		}
		if ready {
			return pass, nil
		}
		if !s.Now().Before(deadline) {
			for _, c := range pass {
				if c.State == "running" && checked[c.Service] && !passed[c.ID] {
					return nil, fail(messages.ReasonHealthCheckFailed, "health check did not pass in time", nil)
				}
			}
			s.Log.Warn().Msg("verification: containers not running at the verification deadline; left to the resume")
			return nil, errUnsettled
		}
		if err := Sleep(ctx, min(s.HealthPoll, deadline.Sub(s.Now())+time.Millisecond)); err != nil {
			return nil, err
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
// attempt is unsettled, never failed. A container Docker no longer has reads as dead.
func (s Verify) inspectAll(ctx context.Context, cohort []messages.Container, deadline time.Time) ([]messages.Container, error) {
	out := make([]messages.Container, 0, len(cohort))
	giveUp := s.Now().Add(inspectPatience)
	if deadline.Before(giveUp) {
		giveUp = deadline
	}
	for _, c := range cohort {
		for attempt := 1; ; attempt++ {
			got, err := s.API.Inspect(ctx, c.ID)
			if err == nil {
				out = append(out, got)
				break
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errdefs.IsNotFound(err) {
				c.State = "dead" // removed under us: it did not keep running
				out = append(out, c)
				break
			}
			if !s.Now().Before(giveUp) {
				s.Log.Warn().Err(err).Msg("verification inspects keep failing; left to the resume")
				return nil, errUnsettled
			}
			s.Log.Debug().Err(err).Int("attempt", attempt).Msg("verification inspect failed; retrying")
			if err := Sleep(ctx, s.HealthPoll); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
