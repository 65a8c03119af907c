// Package reclaimer removes lease networks once no live lease owns them and Docker
// reports no attached container, and adopted fred v0.13 per-tenant networks once
// Docker lists no container on them in any state. Each candidate is re-inspected
// by its exact ID and its ownership labels re-verified right before removal. One
// pass runs every reconcile_interval and shortly after a close; each pass is
// bounded to 30 s and removes a few candidates at a time (dockerd takes ~0.3 s per
// removal under load); a pass that runs out of budget with candidates left starts
// the next at once, so a mass close is cleaned up in one go rather than one budget
// per interval.
package reclaimer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the reclaimer.
type Settings struct {
	Interval       time.Duration // reconcile_interval
	AfterClose     time.Duration // delay of the pass a close triggers
	Budget         time.Duration // 30 s per pass
	Parallel       int           // removals in flight at once; 0 = defaultParallel
	InstallationID string
	BackendName    string
	RegistryPath   messages.Address
}

// DefaultSettings are the reclaimer's fixed settings: a pass 5 s after a close,
// 30 s of budget a pass.
func DefaultSettings() Settings {
	return Settings{AfterClose: 5 * time.Second, Budget: 30 * time.Second, RegistryPath: messages.Registry}
}

// Docker is what the reclaimer asks of the Engine API (dockerio/engine).
type Docker interface {
	LeaseNetworks(ctx context.Context) ([]dockerio.Network, error)
	InspectNetwork(ctx context.Context, id string) (dockerio.Network, error)
	// AdoptedNetworks lists the adopted fred v0.13 per-tenant networks, each with
	// the containers Docker lists on it in any state (none without an adoption).
	AdoptedNetworks(ctx context.Context) ([]dockerio.Network, error)
	// RemoveNetwork removes this installation's lease or pool network, or an
	// adopted one, by exact ID; an adopted one only while nothing is attached.
	RemoveNetwork(ctx context.Context, id string) error
}

// Deps are the reclaimer's collaborators.
type Deps struct {
	supervisors.Env
	Engine   Docker
	Settings *Settings
	Metrics  *Metrics
}

// Actor is the reclaimer's pass; supervisors.PassActor runs it.
type Actor struct {
	*Deps
}

// defaultParallel is how many removals a pass keeps in flight.
const defaultParallel = 4

// New returns the producer of the reclaimer: a pass at start, every Interval,
// and AfterClose after a lease is gone.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		a := &Actor{Deps: deps}
		return &supervisors.PassActor{Spec: supervisors.PassSpec{Name: "reclaimer", Interval: a.Settings.Interval,
			Timeout: a.Settings.Budget, Begin: a.begin},
			On: func(loop *supervisors.Periodic, msg any) {
				if _, ok := msg.(*messages.LeaseGone); ok {
					loop.Soon(a.Settings.AfterClose)
				}
			}}
	}
}

// begin is one pass: a pass that runs out of budget with candidates left starts
// the next at once.
func (a *Actor) begin() func(ctx context.Context) supervisors.Outcome {
	return func(ctx context.Context) supervisors.Outcome {
		removed, err := a.run(ctx)
		if err != nil {
			a.Log.Warn().Err(err).Msg("network reclamation pass incomplete")
			return supervisors.Outcome{Err: err, Again: errors.Is(err, errBudget)}
		}
		return supervisors.Outcome{Detail: fmt.Sprintf("%d networks removed", removed)}
	}
}

var errBudget = errors.New("budget exhausted with candidates left")

// run lists the networks first and asks which leases are live after: a network
// in the listing was created by a lease admitted before the listing, so the
// registry's later answer names it live (the fence: read the other way round, a
// lease admitted between the two reads loses the network it just created).
func (a *Actor) run(ctx context.Context) (int, error) {
	nets, err := a.Engine.LeaseNetworks(ctx)
	if err != nil {
		a.Metrics.outcome("list_error")
		return 0, fmt.Errorf("list networks: %w", err)
	}
	adopted, err := a.Engine.AdoptedNetworks(ctx)
	if err != nil {
		a.Metrics.outcome("list_error")
		return 0, fmt.Errorf("list adopted networks: %w", err)
	}
	isLive, err := supervisors.LiveLeases(ctx, a.Tree, a.Settings.RegistryPath, 10*time.Second)
	if err != nil {
		return 0, err
	}
	candidates := make([]candidate, 0, len(nets)+len(adopted))
	for _, n := range nets {
		candidates = append(candidates, candidate{net: n})
	}
	for _, n := range adopted {
		candidates = append(candidates, candidate{net: n, adopted: true})
	}
	var removed atomic.Int64
	work := make(chan candidate)
	var wg sync.WaitGroup
	parallel := a.Settings.Parallel
	if parallel <= 0 {
		parallel = defaultParallel
	}
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if a.reclaim(ctx, c) {
					removed.Add(1)
				}
			}
		}()
	}
	left := false
	for _, c := range candidates {
		if !c.adopted && isLive[c.net.Labels[dockerio.LabelLease]] {
			a.Metrics.outcome("lease_active")
			continue
		}
		select {
		case work <- c:
			continue
		case <-ctx.Done():
		}
		left = true
		break
	}
	close(work)
	wg.Wait()
	if left || ctx.Err() != nil {
		a.Metrics.outcome("budget_exhausted")
		return int(removed.Load()), fmt.Errorf("%w: %w", errBudget, ctx.Err())
	}
	return int(removed.Load()), nil
}

// candidate is a network a pass may remove.
type candidate struct {
	net     dockerio.Network
	adopted bool // an adopted fred v0.13 per-tenant network, not a lease network
}

// reclaim re-verifies one candidate by its exact ID and labels right before
// removing it; it reports whether the network was removed.
func (a *Actor) reclaim(ctx context.Context, c candidate) bool {
	if c.adopted {
		return a.reclaimAdopted(ctx, c.net)
	}
	n := c.net
	leaseID := n.Labels[dockerio.LabelLease]
	cur, err := a.Engine.InspectNetwork(ctx, n.ID)
	switch {
	case err != nil:
		a.Metrics.outcome("absent")
		return false
	case !owned(cur, leaseID, a.Settings):
		a.Metrics.outcome("error")
		a.Log.Warn().Str("network", n.ID).Msg("network no longer carries our ownership labels; left in place")
		return false
	case cur.Containers > 0:
		a.Metrics.outcome("in_use")
		return false
	}
	return a.remove(ctx, cur.ID)
}

// reclaimAdopted removes an adopted fred v0.13 per-tenant network once Docker
// lists no container on it, running or not: an adopted lease's containers stay
// on it until a relaunch moves the lease onto a network of its own, and nothing
// is ever put on it again. The engine knows the allow-list: it re-verifies the
// exact ID, the labels and that nothing is attached right before the removal.
func (a *Actor) reclaimAdopted(ctx context.Context, n dockerio.Network) bool {
	if n.Containers > 0 {
		a.Metrics.outcome("in_use")
		return false
	}
	return a.remove(ctx, n.ID)
}

// remove removes the verified network id; it reports whether it was removed.
func (a *Actor) remove(ctx context.Context, id string) bool {
	if err := a.Engine.RemoveNetwork(ctx, id); err != nil {
		a.Metrics.outcome("error")
		a.Log.Warn().Err(err).Str("network", id).Msg("remove network")
		return false
	}
	a.Metrics.outcome("removed")
	return true
}

func owned(n dockerio.Network, leaseID string, set *Settings) bool {
	l := n.Labels
	return n.Name == dockerio.ProjectName(leaseID) && l[dockerio.LabelManaged] == "true" &&
		l[dockerio.LabelNetworkScope] == "lease" && l[dockerio.LabelLease] == leaseID &&
		l[dockerio.LabelBackend] == set.BackendName && l[dockerio.LabelInstallation] == set.InstallationID
}

// Metrics of network reclamation.
type Metrics struct {
	outcomes *prometheus.CounterVec
}

// NewMetrics registers the reclaimer's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_network_reclamation_total",
		Help: "Network candidates by outcome (removed, absent, in_use, lease_active, error) and pass outcomes (list_error, budget_exhausted)."},
		[]string{"outcome"})}
	if reg != nil {
		reg.MustRegister(m.outcomes)
	}
	return m
}

func (m *Metrics) outcome(o string) { m.outcomes.WithLabelValues(o).Inc() }
