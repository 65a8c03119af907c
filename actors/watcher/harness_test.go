package watcher_test

// The harness: the watcher hosted in a real supervisors.Tree, reading the event
// stream of the in-memory dockerio/dockertest/fake engine, with stand-ins at the registry and
// reconciler paths that hand what they receive to the test.
//
// The fake emits kill before every die (Kill, OOMKill, Down, RemoveContainers are
// all docker kill/stop/rm), so it has no way to show a process that exits on its
// own, which Docker reports as a bare die. crashingEngine adds that: crash(id)
// drops the kill event of that one stop, leaving the start … die a real crash shows.
// It also records when each Events subscription was made.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/watcher"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/supervisors"
)

const (
	registryPath   = supervisors.RootPath + "/registry"
	reconcilerPath = supervisors.RootPath + "/reconciler"
	installation   = "3b8f3c1e-6a43-4f0e-9a5d-2f1f0c7d9e11"
	patience       = 30 * time.Second
	testImage      = "127.0.0.1:5000/berth/workload:test"
)

// crashingEngine is the fake engine with bare-die crashes and subscription timing.
type crashingEngine struct {
	*fake.Engine

	mu            sync.Mutex
	crashing      map[string]bool // container ID → drop the kill event of its next stop
	calls         []time.Time     // when Events was called, in order
	returned      atomic.Int64    // Events calls that have returned (subscription made or refused)
	subscriptions atomic.Int64    // Events calls that subscribed
}

func newCrashingEngine() *crashingEngine {
	return &crashingEngine{Engine: fake.New(fake.Options{InstallationID: installation}), crashing: map[string]bool{}}
}

// crash makes a running container exit on its own with exitCode: die without kill.
func (e *crashingEngine) crash(t *testing.T, id string, exitCode int) {
	t.Helper()
	e.mu.Lock()
	e.crashing[id] = true
	e.mu.Unlock()
	if err := e.Kill(id, exitCode); err != nil {
		t.Fatalf("crash %s: %v", id, err)
	}
}

func (e *crashingEngine) takeCrash(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.crashing[id] {
		delete(e.crashing, id)
		return true
	}
	return false
}

func (e *crashingEngine) callTimes() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.calls...)
}

// Events passes the fake's stream through in order, minus the kills of crashes; the
// stream ends with the fake's own error.
func (e *crashingEngine) Events(ctx context.Context) (<-chan dockerio.Event, <-chan error) {
	e.mu.Lock()
	e.calls = append(e.calls, time.Now())
	e.mu.Unlock()
	in, inErr := e.Engine.Events(ctx)
	out, outErr := make(chan dockerio.Event), make(chan error, 1)
	select {
	case err := <-inErr: // refused at once (the fake sends the error before returning)
		close(out)
		outErr <- err
		close(outErr)
		e.returned.Add(1)
		return out, outErr
	default:
		e.subscriptions.Add(1)
		e.returned.Add(1)
	}
	go func() {
		defer close(outErr)
		defer close(out)
		for ev := range in {
			if ev.Action == "kill" && e.takeCrash(ev.ContainerID) {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
		outErr <- <-inErr
	}()
	return out, outErr
}

// standInRegistry hands every Deliver to the test; drop decides which ones it
// reports undeliverable (as the registry does for a busy or unknown lease).
type standInRegistry struct {
	out  chan *messages.Deliver
	drop func(n int) bool
	n    int
}

func (s *standInRegistry) Receive(c actor.Context) {
	d, ok := c.Message().(*messages.Deliver)
	if !ok {
		return
	}
	s.n++
	if s.drop != nil && s.drop(s.n) && d.Dropped != nil {
		d.Dropped()
	}
	s.out <- d
}

// standInReconciler counts the passes it is asked for.
type standInReconciler struct{ asked *atomic.Int64 }

func (s *standInReconciler) Receive(c actor.Context) {
	if _, ok := c.Message().(messages.RecoverNow); ok {
		s.asked.Add(1)
	}
}

type options struct {
	settings   watcher.Settings
	engine     watcher.Docker          // default: h.crashing
	noRegistry bool                    // no stand-in actor at the registry path
	drop       func(n int) bool        // see standInRegistry
	before     func(h *watcherHarness) // runs before the tree starts
}

type watcherHarness struct {
	t          *testing.T
	tree       *supervisors.Tree
	crashing   *crashingEngine
	fake       *fake.Engine
	reg        *prometheus.Registry
	deliveries chan *messages.Deliver
	recovers   atomic.Int64
}

func newWatcherHarness(t *testing.T, o options) *watcherHarness {
	t.Helper()
	h := &watcherHarness{t: t, crashing: newCrashingEngine(), reg: prometheus.NewRegistry(),
		deliveries: make(chan *messages.Deliver, 100000)}
	h.fake = h.crashing.Engine
	var eng watcher.Docker = h.crashing
	if o.engine != nil {
		eng = o.engine
		if f, ok := o.engine.(*fake.Engine); ok {
			h.fake = f
		}
	}
	set := o.settings
	set.InstallationID = installation
	set.RegistryPath = registryPath
	set.ReconcilerPath = reconcilerPath
	if o.before != nil {
		o.before(h)
	}
	deps := &watcher.Deps{Env: supervisors.Env{Log: zerolog.Nop()}, Engine: eng, Settings: &set, Metrics: watcher.NewMetrics(h.reg)}
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			deps.Tree = tree
			var specs []supervisors.Spec
			if !o.noRegistry {
				specs = append(specs, supervisors.Spec{Name: "registry", Kind: "registry",
					Producer: func() actor.Actor { return &standInRegistry{out: h.deliveries, drop: o.drop} }})
			}
			return append(specs,
				supervisors.Spec{Name: "reconciler", Kind: "reconciler",
					Producer: func() actor.Actor { return &standInReconciler{asked: &h.recovers} }},
				supervisors.Spec{Name: "watcher", Kind: "watcher", Producer: watcher.New(deps)})
		},
	})
	if err != nil {
		t.Fatalf("start tree: %v", err)
	}
	h.tree = tree
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := tree.Stop(ctx); err != nil {
			t.Errorf("stop tree: %v", err)
		}
	})
	return h
}

func (h *watcherHarness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// subscribed waits until n Events calls have returned (for the crashing engine).
func (h *watcherHarness) subscribed(n int64) {
	h.t.Helper()
	h.eventually(fmt.Sprintf("%d event subscriptions", n), func() bool { return h.crashing.returned.Load() >= n })
}

// metric reads a counter or gauge of the watcher by name and one label pair.
func (h *watcherHarness) metric(name, label, value string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 {
				return m.GetGauge().GetValue()
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func (h *watcherHarness) waitMetric(name, label, value string, want float64) {
	h.t.Helper()
	h.eventually(fmt.Sprintf("%s{%s=%q} = %v", name, label, value, want), func() bool {
		return h.metric(name, label, value) >= want
	})
	if got := h.metric(name, label, value); got != want {
		h.t.Fatalf("%s{%s=%q} = %v, want %v", name, label, value, got, want)
	}
}

// connected waits until the watcher describes itself connected: its Events call has
// returned, so the subscription is registered with the engine.
func (h *watcherHarness) connected() {
	h.t.Helper()
	h.eventually("watcher connected", func() bool {
		info, err := supervisors.Ask(context.Background(), h.tree, supervisors.RootPath+"/watcher", 5*time.Second,
			func(r chan<- messages.NodeInfo) any { return &messages.Describe{Reply: r} })
		return err == nil && strings.HasPrefix(info.State, "connected=true")
	})
}

// startContainers launches quantity running containers of a new lease in the fake.
func (h *watcherHarness) startContainers(leaseID string, generation uint64, quantity int) []messages.Container {
	h.t.Helper()
	ctx := context.Background()
	netID, err := h.fake.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: leaseID, Tenant: "t", BackendName: "berth-test",
		InstallationID: installation})
	if err != nil {
		h.t.Fatalf("network: %v", err)
	}
	plan := h.plan(leaseID, generation, quantity, netID)
	if err := h.fake.Up(ctx, plan); err != nil {
		h.t.Fatalf("up: %v", err)
	}
	cs, err := h.fake.Cohort(ctx, leaseID)
	if err != nil || len(cs) != quantity {
		h.t.Fatalf("cohort: %d containers, %v", len(cs), err)
	}
	return cs
}

func (h *watcherHarness) plan(leaseID string, generation uint64, quantity int, netID string) dockerio.Plan {
	return dockerio.Plan{Lease: leaseID, Tenant: "t", BackendName: "berth-test", InstallationID: installation,
		OperationID: "op-" + leaseID, Generation: generation, NetworkID: netID, HostBindIP: "127.0.0.1",
		Services: []dockerio.ServicePlan{{Name: "app", SKU: "docker-small", Quantity: quantity, Service: manifest.Service{Image: testImage}, ImageID: "sha256:" + uuid.NewString()}}}
}

// nextDeath waits for the next Deliver and checks it carries a ContainerDied.
func (h *watcherHarness) nextDeath() (*messages.Deliver, *messages.ContainerDied) {
	h.t.Helper()
	select {
	case d := <-h.deliveries:
		died, ok := d.Msg.(*messages.ContainerDied)
		if !ok {
			h.t.Fatalf("delivered %T, want *messages.ContainerDied", d.Msg)
		}
		return d, died
	case <-time.After(patience):
		h.t.Fatalf("no death delivered within %s", patience)
	}
	return nil, nil
}

// expectDeath checks the next delivery is exactly this death.
func (h *watcherHarness) expectDeath(leaseID string, want messages.ContainerDied) {
	h.t.Helper()
	d, died := h.nextDeath()
	if d.Lease != leaseID || *died != want {
		h.t.Fatalf("delivered %s %+v, want %s %+v", d.Lease, *died, leaseID, want)
	}
	if d.Dropped == nil {
		h.t.Fatalf("Deliver without a Dropped callback: an undeliverable death would go uncounted")
	}
}
