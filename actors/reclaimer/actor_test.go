package reclaimer

// The reclaimer in a real supervision tree against the fake engine and a stub
// registry: a mass close whose removals do not fit in one pass's budget is still
// cleaned up at once — a pass that runs out of budget starts the next — and the
// networks of live leases are never touched; an adopted fred v0.13 per-tenant
// network goes once Docker lists nothing on it.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

const (
	installation = "inst-reclaimer-test"
	backend      = "berth-test"
	regPath      = supervisors.RootPath + "/registry"
)

// stubRegistry answers ListLeases with its set of live leases.
type stubRegistry struct {
	mu   sync.Mutex
	live []string
}

func (s *stubRegistry) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.ListLeases); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		m.Reply <- messages.LeasesReply{Leases: slices.Clone(s.live)}
	}
}

func (s *stubRegistry) admit(lease string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = append(s.live, lease)
}

// startReclaimer runs the reclaimer on eng in a tree whose registry knows the
// live leases; its first pass starts at once, the next only when one runs out of
// budget.
func startReclaimer(t *testing.T, eng Docker, live []string, budget time.Duration) *Metrics {
	t.Helper()
	return startReclaimerWith(t, eng, &stubRegistry{live: live}, budget)
}

func startReclaimerWith(t *testing.T, eng Docker, reg *stubRegistry, budget time.Duration) *Metrics {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			deps := &Deps{Env: supervisors.Env{Tree: tree, Log: zerolog.Nop()}, Engine: eng, Metrics: m, Settings: &Settings{
				Interval: time.Hour, AfterClose: time.Hour, Budget: budget,
				InstallationID: installation, BackendName: backend, RegistryPath: regPath}}
			return []supervisors.Spec{
				{Name: "registry", Kind: "stub", Producer: func() actor.Actor { return reg }},
				{Name: "reclaimer", Kind: "reclaimer", Producer: New(deps)},
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	return m
}

func TestReclaimer_MassCloseBeyondOnePassBudget_AllRemovedWithoutWaitingAnInterval(t *testing.T) {
	eng := fake.New(fake.Options{InstallationID: installation})
	ctx := context.Background()
	var closed, live []string
	for i := 0; i < 60; i++ {
		id := uuid.NewString()
		if _, err := eng.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: id, Tenant: "t", BackendName: backend, InstallationID: installation}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			live = append(live, id)
		} else {
			closed = append(closed, id)
		}
	}
	// 54 removals at 40 ms each: about 2.2 s serially, 0.55 s four at a time — far
	// more than one 150 ms pass can do.
	eng.Delay(fake.OpRemoveNetwork, 40*time.Millisecond)
	m := startReclaimer(t, eng, live, 150*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		nets, err := eng.LeaseNetworks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(nets) == len(live) {
			for _, n := range nets {
				if !slices.Contains(live, n.Labels[dockerio.LabelLease]) {
					t.Fatalf("network of closed lease %s left while a live one went", n.Labels[dockerio.LabelLease])
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lease networks left after 10 s (want the %d live leases'); passes out of budget: %v",
				len(nets), len(live), testutil.ToFloat64(m.outcomes.WithLabelValues("budget_exhausted")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := testutil.ToFloat64(m.outcomes.WithLabelValues("removed")); got != float64(len(closed)) {
		t.Fatalf("removed = %v, want %d", got, len(closed))
	}
	if testutil.ToFloat64(m.outcomes.WithLabelValues("budget_exhausted")) == 0 {
		t.Fatal("every pass finished within its budget: the test did not exercise the reschedule")
	}
}

// adoptingEngine is the fake with adopted fred v0.13 per-tenant networks, which
// the fake itself never holds, each with the containers Docker lists on it; the
// real engine's side (exact ID, labels, attachment re-verified) is proven in
// dockerio/engine.
type adoptingEngine struct {
	*fake.Engine
	mu      sync.Mutex
	adopted map[string]dockerio.Network
}

func (e *adoptingEngine) AdoptedNetworks(context.Context) ([]dockerio.Network, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []dockerio.Network
	for _, n := range e.adopted {
		out = append(out, n)
	}
	return out, nil
}

func (e *adoptingEngine) RemoveNetwork(ctx context.Context, id string) error {
	e.mu.Lock()
	n, ok := e.adopted[id]
	if ok && n.Containers == 0 {
		delete(e.adopted, id)
	}
	e.mu.Unlock()
	switch {
	case !ok:
		return e.Engine.RemoveNetwork(ctx, id)
	case n.Containers > 0:
		return fmt.Errorf("remove adopted network %s: %d containers attached", n.Name, n.Containers)
	}
	return nil
}

func (e *adoptingEngine) holds(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.adopted[id]
	return ok
}

func TestReclaimer_AdoptedTenantNetwork_RemovedOnlyWithNothingAttached(t *testing.T) {
	eng := &adoptingEngine{Engine: fake.New(fake.Options{InstallationID: installation}), adopted: map[string]dockerio.Network{
		"free":  {ID: "free", Name: "fred-tenant-0000000000000001"},
		"inuse": {ID: "inuse", Name: "fred-tenant-0000000000000002", Containers: 1},
	}}
	ctx := context.Background()
	closed, live := uuid.NewString(), uuid.NewString()
	for _, lease := range []string{closed, live} {
		if _, err := eng.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: lease, Tenant: "t", BackendName: backend, InstallationID: installation}); err != nil {
			t.Fatal(err)
		}
	}
	m := startReclaimer(t, eng, []string{live}, 5*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	outcome := func(o string) float64 { return testutil.ToFloat64(m.outcomes.WithLabelValues(o)) }
	for outcome("removed") < 2 || outcome("in_use") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: removed %v, in_use %v; want 2 and 1", outcome("removed"), outcome("in_use"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if eng.holds("free") || !eng.holds("inuse") {
		t.Errorf("adopted networks held: free %v, inuse %v; want only the one with a container on it", eng.holds("free"), eng.holds("inuse"))
	}
	nets, err := eng.LeaseNetworks(ctx)
	if err != nil || len(nets) != 1 || nets[0].Labels[dockerio.LabelLease] != live {
		t.Errorf("lease networks left = %+v, %v; want the live lease's only", nets, err)
	}
}

// admittingEngine admits a lease and creates its network while the pass lists
// networks: the admission lands between the reclaimer's two reads.
type admittingEngine struct {
	*fake.Engine
	reg   *stubRegistry
	lease string
	once  sync.Once
}

func (e *admittingEngine) LeaseNetworks(ctx context.Context) ([]dockerio.Network, error) {
	var err error
	e.once.Do(func() {
		e.reg.admit(e.lease)
		_, err = e.Engine.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: e.lease, Tenant: "t", BackendName: backend, InstallationID: installation})
	})
	if err != nil {
		return nil, err
	}
	return e.Engine.LeaseNetworks(ctx)
}

func (e *admittingEngine) AdoptedNetworks(context.Context) ([]dockerio.Network, error) {
	return nil, nil
}

// A lease admitted while a pass runs keeps the network it just created (no
// container on it yet): the pass asks which leases are live after it listed.
func TestReclaimer_LeaseAdmittedDuringThePass_KeepsItsNewNetwork(t *testing.T) {
	ctx := context.Background()
	reg := &stubRegistry{}
	closed, admitted := uuid.NewString(), uuid.NewString()
	eng := &admittingEngine{Engine: fake.New(fake.Options{InstallationID: installation}), reg: reg, lease: admitted}
	if _, err := eng.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: closed, Tenant: "t", BackendName: backend, InstallationID: installation}); err != nil {
		t.Fatal(err)
	}
	m := startReclaimerWith(t, eng, reg, 5*time.Second)
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(m.outcomes.WithLabelValues("removed")) < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the closed lease's network was never removed")
		}
	}
	time.Sleep(100 * time.Millisecond) // the pass's other removals, if it made any
	nets, err := eng.Engine.LeaseNetworks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) != 1 || nets[0].Labels[dockerio.LabelLease] != admitted {
		t.Fatalf("networks left %v, want the admitted lease's alone", nets)
	}
}
