package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Network finds the network a launch attaches to, or makes it. It has no Down:
// a lease's network outlives its containers, and goes back to the pool or to
// the reclaimer once the lease is closed.
type Network struct {
	API  NetworksAPI
	Pool NetworkPool // nil: every lease creates fred-<lease>
	// Own is fred-<lease> (Recheck: any attempt but the lease's first may race
	// an earlier one's create — a process killed mid-create: dockerd carries
	// the request out anyway).
	Own        dockerio.NetworkSpec
	NoWarmPool bool
	Log        *zerolog.Logger
}

// Net is the network a launch attaches to: fred-<lease>, the warm pool network
// bound to the lease (Pooled), or Docker's isolated default bridge (Bridged:
// the lease is bound to it and the release runs one container). Name is ""
// when the pool did not know it (the engine asks Docker).
type Net struct {
	ID, Name string
	Pooled   bool
	Bridged  bool
}

// Attach makes n the network of p.
func (n Net) Attach(p *dockerio.Plan) {
	p.NetworkID, p.NetworkName, p.NetworkPooled, p.NetworkBridged = n.ID, n.Name, n.Pooled, n.Bridged
}

// Up finds the network of an attempt: the pool's network bound to the lease
// (verified ours by its exact ID), the default bridge when the lease is bound
// to it and the release is single (runs one container), else fred-<lease>,
// created when absent. Only a lease's first attempt takes a new network (or a
// slot of the bridge) from the pool; a later one gets what it already holds,
// or keeps fred-<lease>, so a lease never moves between networks — but for a
// bridged lease whose release runs more than one container (an update added
// one): that release runs on fred-<lease>, and a release of one container
// again (a rollback) on the bridge. The choice follows from the lease's
// binding and the release alone, so every attempt, restart and compensation
// makes the same one. A failure is a *Failed.
func (s Network) Up(ctx context.Context, first, single bool) (Net, error) {
	n, err := s.find(ctx, first, single)
	if err == nil || ctx.Err() != nil {
		return n, err
	}
	if errdefs.IsResourceExhausted(err) {
		s.Log.Error().Err(err).Msg("no network address space left")
		return Net{}, fail(messages.ReasonInternal, "insufficient resources: no network address space", err)
	}
	s.Log.Error().Err(err).Msg("lease network")
	if errors.Is(err, dockerio.ErrForeignObject) { // ErrForeignNetwork too
		return Net{}, fail(messages.ReasonInternal, "the lease network name is taken by another installation", err)
	}
	return Net{}, fail(messages.ReasonInternal, "provisioning failed: lease network", err)
}

func (s Network) find(ctx context.Context, first, single bool) (Net, error) {
	if s.Pool != nil {
		lease := s.Own.Lease
		n, err := s.Pool.Claim(ctx, lease, first, single)
		switch {
		case err != nil:
			if first { // a late binding must not outlive this attempt's choice
				s.Pool.Drop(lease, "")
			}
			s.Log.Warn().Err(err).Msg("network pool did not answer; using the lease's own network")
		case n.Bridged && single:
			// Verified to isolate still where compose's launch starts (Compose.Up).
			return Net{ID: n.ID, Name: n.Name, Bridged: true}, nil
		case n.Bridged: // more than one container: never on the bridge
		case n.ID != "":
			// Verified by ID, with our pool labels, where compose's launch starts
			// (Compose.Up): a network gone by then is dropped and the launch runs
			// again on the lease's own.
			return Net{ID: n.ID, Name: n.Name, Pooled: true}, nil
		case first && !s.NoWarmPool:
			return s.madePool(ctx)
		}
	}
	return s.own(ctx)
}

// madePool is a first attempt's network when the pool had none free: the
// lease creates a pool network itself (the create it would have made for
// fred-<lease>) and has the pool bind it, so that when the lease closes the
// network goes back to the pool instead of being removed — a mass close then
// removes nothing on its leases' behalf. A crash between the create and the
// binding leaves an unbound pool network, which the pool adopts as free.
func (s Network) madePool(ctx context.Context) (Net, error) {
	n, err := s.API.CreatePoolNetwork(ctx)
	if err != nil {
		return Net{}, fmt.Errorf("create a pool network for the lease: %w", err)
	}
	bound, err := s.Pool.Bind(ctx, s.Own.Lease, n)
	switch {
	case err != nil:
		s.Pool.Drop(s.Own.Lease, "") // a late binding must not outlive this attempt's choice
		s.Log.Warn().Err(err).Msg("network pool did not bind the lease's network; using the lease's own network")
	case bound.ID != "":
		return Net{ID: bound.ID, Name: bound.Name, Pooled: true}, nil
	}
	return s.own(ctx)
}

// own is fred-<lease>, created when absent.
func (s Network) own(ctx context.Context) (Net, error) {
	id, err := s.API.EnsureNetwork(ctx, s.Own)
	return Net{ID: id, Name: dockerio.ProjectName(s.Own.Lease)}, err
}
