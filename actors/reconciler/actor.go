// Package reconciler joins the journals with Docker's inventory: once when the
// registry (re)starts — before /health turns healthy and admissions open — and then
// every reconcile_interval, so a death the event stream missed is still reported.
// It hands each live lease the containers Docker lists for it (the lease actor
// classifies them), removes containers of closed leases by their closed receipt,
// and counts — never adopts, removes or reassigns — managed containers no journal
// explains.
package reconciler

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the reconciler.
type Settings struct {
	Interval       time.Duration // reconcile_interval
	PassTimeout    time.Duration // one pass, Docker list included
	AckTimeout     time.Duration // how long leases have to act on their inventory
	InstallationID string
	RegistryPath   string
}

// Deps are the reconciler's collaborators.
type Deps struct {
	Store    *persistence.Store
	Engine   dockerio.Engine
	Tree     *supervisors.Tree
	Settings *Settings
	Metrics  *Metrics
	Log      zerolog.Logger
	Now      func() time.Time
}

// Actor is the reconciler.
type Actor struct {
	deps   *Deps
	set    *Settings
	log    zerolog.Logger
	epoch  uint64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	passes supervisors.Passes
	done   int // passes completed
	last   string
}

var epochs atomic.Uint64

// New returns the producer of the reconciler.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{deps: deps, set: deps.Settings, log: deps.Log.With().Str("actor", "reconciler").Logger()}
	}
}

type tick struct{ epoch uint64 }

type passDone struct {
	epoch uint64
	res   Result
	err   error
}

// Result summarises one pass.
type Result struct {
	Leases      int
	Containers  int
	Removed     int // containers of closed leases removed
	Unaccounted int
	Undelivered int // leases whose inventory could not be delivered or acknowledged
}

// Receive handles the reconciler's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.epoch = epochs.Add(1)
		a.ctx, a.cancel = context.WithCancel(context.Background())
		supervisors.Tick(c, a.ctx, &a.wg, a.set.Interval, tick{epoch: a.epoch})
		a.pass(c) // a restarted reconciler re-establishes the registry's readiness too
	case *actor.Restarting, *actor.Stopping:
		a.cancel()
		a.wg.Wait()
	case registry.RecoverNow:
		a.pass(c)
	case tick:
		if m.epoch == a.epoch {
			a.pass(c)
		}
	case passDone:
		if m.epoch != a.epoch {
			return
		}
		a.done++
		a.deps.Metrics.observe(m.res, m.err, a.deps.Now())
		if m.err != nil {
			a.last = "error: " + m.err.Error()
			a.log.Warn().Err(m.err).Msg("reconciliation pass failed")
		} else {
			a.last = fmt.Sprintf("ok: %d leases, %d containers, %d removed, %d unaccounted",
				m.res.Leases, m.res.Containers, m.res.Removed, m.res.Unaccounted)
			// Only a complete pass makes accounting whole.
			a.deps.Tree.Send(a.set.RegistryPath, registry.Recovered{})
		}
		a.deps.Tree.Send(a.set.RegistryPath, registry.RetryStopped{})
		if a.passes.Done() {
			a.pass(c)
		}
	}
}

// Describe summarises the reconciler for /debug/actors.
func (a *Actor) Describe() (string, int) {
	return fmt.Sprintf("%d passes, last %s", a.done, a.last), a.passes.InFlight()
}

func (a *Actor) pass(c actor.Context) {
	epoch, parent := a.epoch, a.ctx
	a.passes.Start(c, &a.wg, func() any {
		ctx, cancel := context.WithTimeout(parent, a.set.PassTimeout)
		defer cancel()
		res, err := a.run(ctx)
		return passDone{epoch: epoch, res: res, err: err}
	})
}

// run is one pass, off the actor goroutine.
func (a *Actor) run(ctx context.Context) (Result, error) {
	var res Result
	isLive, err := registry.LiveLeases(ctx, a.deps.Tree, a.set.RegistryPath, a.set.AckTimeout)
	if err != nil {
		return res, err
	}
	containers, err := a.deps.Engine.ListManaged(ctx)
	if err != nil {
		return res, fmt.Errorf("list containers: %w", err)
	}
	res.Leases, res.Containers = len(isLive), len(containers)
	byLease := make(map[string][]dockerio.Container)
	for _, ctr := range containers {
		byLease[ctr.Lease] = append(byLease[ctr.Lease], ctr)
	}

	// Live leases classify their own containers; wait for every one to act.
	acks := make([]chan struct{}, 0, len(isLive))
	for id := range isLive {
		ack := make(chan struct{})
		var once sync.Once
		acks = append(acks, ack)
		a.deps.Tree.Send(a.set.RegistryPath, &registry.Deliver{
			Lease:   id,
			Msg:     &lease.Inventory{Containers: byLease[id], Reply: ack},
			Dropped: func() { once.Do(func() { close(ack) }); a.deps.Metrics.undelivered.Inc() },
		})
	}
	timeout := time.NewTimer(a.set.AckTimeout)
	defer timeout.Stop()
wait:
	for i, ack := range acks {
		select {
		case <-ack:
		case <-timeout.C:
			// A lease that closed meanwhile never acts on it; the next pass looks again.
			res.Undelivered = len(acks) - i
			a.log.Warn().Int("leases", res.Undelivered).Msg("leases did not act on their inventory in time")
			break wait
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}

	// Containers of leases no live lease owns: removed only by a closed receipt.
	var orphans []string
	for id := range byLease {
		if !isLive[id] {
			orphans = append(orphans, id)
		}
	}
	sort.Strings(orphans)
	for _, id := range orphans {
		ctrs := byLease[id]
		closed, err := a.closedReceipt(id)
		if err != nil {
			return res, err
		}
		if !closed {
			res.Unaccounted += len(ctrs)
			for _, ctr := range ctrs {
				a.log.Warn().Str("lease_uuid", id).Str("container", ctr.ID).Str("name", ctr.Name).
					Msg("managed container no journal explains; left for an operator")
			}
			continue
		}
		ids := make([]string, 0, len(ctrs))
		for _, ctr := range ctrs {
			ids = append(ids, ctr.ID)
		}
		if err := a.deps.Engine.RemoveContainers(ctx, ids); err != nil {
			return res, fmt.Errorf("remove containers of closed lease %s: %w", id, err)
		}
		res.Removed += len(ids)
		a.log.Info().Str("lease_uuid", id).Int("containers", len(ids)).Msg("removed containers of a closed lease")
	}
	return res, nil
}

// closedReceipt reports whether the lease's journal ends in a closed receipt. A
// lease without any stream is not ours to remove.
func (a *Actor) closedReceipt(id string) (bool, error) {
	if !registry.ValidLeaseID(id) {
		return false, nil
	}
	st, seq, err := lease.Load(a.deps.Store, id)
	if err != nil {
		return false, fmt.Errorf("read lease %s: %w", id, err)
	}
	return seq > 0 && st.Status == lease.Closed, nil
}

// Metrics of reconciliation.
type Metrics struct {
	passes      *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	unaccounted prometheus.Gauge
	removed     prometheus.Counter
	undelivered prometheus.Counter
}

// NewMetrics registers the reconciler's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_reconciliation_total",
			Help: "Reconciliation passes, by outcome (ok, error)."}, []string{"outcome"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_reconciliation_last_success_timestamp_seconds",
			Help: "Unix time of the last successful reconciliation pass (0 before the first)."}),
		unaccounted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_unaccounted_containers",
			Help: "Managed containers of this installation that no journal explains, from the last pass. Never removed automatically."}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_reconciliation_removed_containers_total",
			Help: "Containers of closed leases removed by reconciliation."}),
		undelivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_reconciliation_undelivered_total",
			Help: "Lease inventories the registry could not deliver (lease gone, stopped or busy)."}),
	}
	m.passes.WithLabelValues("ok")
	m.passes.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(m.passes, m.lastSuccess, m.unaccounted, m.removed, m.undelivered)
	}
	return m
}

func (m *Metrics) observe(res Result, err error, now time.Time) {
	if err != nil {
		m.passes.WithLabelValues("error").Inc()
		return
	}
	m.passes.WithLabelValues("ok").Inc()
	m.lastSuccess.Set(float64(now.Unix()))
	m.unaccounted.Set(float64(res.Unaccounted))
	m.removed.Add(float64(res.Removed))
}
