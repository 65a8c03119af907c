package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Compose launches a release as the lease's Compose project (Up) and removes
// the lease's containers (Down, RemoveExact, Sweep: each idempotent, an absent
// container being success). Containers are removed by labels and exact IDs,
// never by compose ps/down; their volumes stay.
type Compose struct {
	API         ContainersAPI
	Network     Network // where a launch goes when its pool network is gone
	StopTimeout time.Duration
	Log         *zerolog.Logger
}

// Up launches p and returns the cohort it launched (as Launch reports it). A
// pool network found gone by the launch (nothing was created) is dropped from
// the pool, and p is launched once more on the lease's own network. A refused
// launch is classified by Rejected, from Docker's answers.
func (s Compose) Up(ctx context.Context, p dockerio.Plan) ([]messages.Container, error) {
	cohort, err := s.API.Launch(ctx, p)
	if err == nil || !p.NetworkPooled || !errors.Is(err, dockerio.ErrPoolNetworkGone) {
		return cohort, err
	}
	s.Log.Warn().Err(err).Str("network_id", p.NetworkID).Msg("the lease's pool network is gone; using the lease's own network")
	if s.Network.Pool != nil {
		s.Network.Pool.Drop(s.lease(), p.NetworkID)
	}
	own, nerr := s.Network.own(ctx)
	if nerr != nil {
		return nil, fmt.Errorf("pool network gone, own network: %w", nerr)
	}
	own.Attach(&p)
	return s.API.Launch(ctx, p)
}

// Rejected reads a cohort Compose refused to finish launching: a *Failed for a
// definite finding, else nil. Only an exchange Docker answered can hold one
// (seed: an exited or unhealthy container, or one still created after the
// daemon refused its start — not one Compose never started); a launch cut off unanswered — a create or start past its
// timeout, Docker unreachable — holds none, whatever its containers show yet:
// under load dockerd may still carry the start out. Compose's error text is
// never read.
func Rejected(upErr error, cohort []messages.Container) error {
	if errors.Is(upErr, dockerio.ErrForeignObject) {
		return fail(messages.ReasonInternal, "a container of another installation holds this lease's name", upErr)
	}
	if errors.Is(upErr, dockerio.ErrBridgeNotIsolated) {
		return fail(messages.ReasonInternal, "not started: the host's default bridge no longer isolates containers (icc is on)", upErr)
	}
	if unanswered(upErr) {
		return nil
	}
	for _, c := range cohort {
		if c.State == "exited" || c.State == "dead" {
			return fail(messages.ReasonContainerExited, "container exited during startup", upErr)
		}
	}
	for _, c := range cohort {
		if c.Health == "unhealthy" {
			return fail(messages.ReasonHealthCheckFailed, "health check failed during startup", upErr)
		}
	}
	for _, c := range cohort {
		if c.State == "created" && c.StartRefused {
			return fail(messages.ReasonContainerStartFailed, "container could not be started", upErr)
		}
	}
	// Created but never started (Compose gave up on a dependency that flapped):
	// no finding; the attempt stays in flight for recovery.
	return nil
}

// Down removes every container of the lease's project, gently.
func (s Compose) Down(ctx context.Context) error {
	return s.API.Down(ctx, s.lease(), dockerio.DownOptions{StopTimeout: s.StopTimeout})
}

// RemoveExact stops and removes exactly these containers, gently.
func (s Compose) RemoveExact(ctx context.Context, cs []messages.Container) error {
	var errs []error
	for _, c := range cs {
		if err := s.API.StopRemove(ctx, c.ID, s.StopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sweep removes the lease's stragglers (this installation's, by exact ID)
// until two listings in a row half a second apart are empty, so a create that
// was in flight when a close won is caught too.
func (s Compose) Sweep(ctx context.Context) error {
	for clean := 0; clean < 2; {
		left, err := s.leftovers(ctx)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			clean++
		} else {
			clean = 0
			if err := s.API.RemoveContainers(ctx, left); err != nil {
				return fmt.Errorf("remove stragglers: %w", err)
			}
		}
		if err := Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func (s Compose) leftovers(ctx context.Context) ([]string, error) {
	all, err := s.API.ListManaged(ctx)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var ids []string
	for _, c := range all {
		if c.Lease == s.lease() {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

func (s Compose) lease() string { return s.Network.Own.Lease }

// Sleep waits d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
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
