package reclaimer

// The reclaimer in a real supervision tree against the fake engine and a stub
// registry: a mass close whose removals do not fit in one pass's budget is still
// cleaned up at once — a pass that runs out of budget starts the next — and the
// networks of live leases are never touched.

import (
	"context"
	"slices"
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

// stubRegistry answers ListLeases with a fixed set of live leases.
type stubRegistry struct{ live []string }

func (s *stubRegistry) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.ListLeases); ok {
		m.Reply <- messages.LeasesReply{Leases: s.live}
	}
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
	m := NewMetrics(prometheus.NewRegistry())
	reg := &stubRegistry{live: live}
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			deps := &Deps{Env: supervisors.Env{Tree: tree, Log: zerolog.Nop()}, Engine: eng, Metrics: m, Settings: &Settings{
				Interval: time.Hour, AfterClose: time.Hour, Budget: 150 * time.Millisecond,
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
