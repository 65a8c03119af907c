package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// liveRegistry answers ListLeases with one live lease.
type liveRegistry struct{ live string }

func (r *liveRegistry) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.ListLeases); ok {
		m.Reply <- messages.LeasesReply{Leases: []string{r.live}}
	}
}

// A cleanup observation says not_closed for a live lease, pending while a
// closed one's objects remain, observed_clear once none do, and unknown with
// complete false — never clear — when Docker cannot be read.
func TestObserveCleanup_StatesByLivenessAndResidue_UnknownWhenDockerFails(t *testing.T) {
	eng := fake.New(fake.Options{InstallationID: installation})
	ids := launch(t, eng, 2)
	live, closed := "00000000-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000001"
	set := DefaultSettings()
	set.Interval, set.RegistryPath = time.Hour, "root/registry"
	deps := &Deps{Engine: eng, Settings: &set, Metrics: NewMetrics(nil)}
	tree, err := supervisors.Start(supervisors.Options{Logger: zerolog.Nop(), Children: func(tr *supervisors.Tree) []supervisors.Spec {
		deps.Env = supervisors.Env{Tree: tr, Log: zerolog.Nop(), Now: time.Now}
		return []supervisors.Spec{
			{Name: "registry", Kind: "registry", Producer: func() actor.Actor { return &liveRegistry{live: live} }},
			{Name: "reconciler", Kind: "reconciler", Producer: New(deps)},
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Stop(t.Context())
	waitUntil(t, "the reconciler spawned", func() bool { _, ok := tree.Dir.Get("root/reconciler"); return ok })
	observe := func(lease string) messages.CleanupObservation {
		t.Helper()
		rep, err := supervisors.Ask(t.Context(), tree, "root/reconciler", 10*time.Second, func(c chan<- messages.CleanupReply) any {
			return &messages.GetCleanup{Lease: lease, Reply: c}
		})
		if err != nil || rep.Err != nil {
			t.Fatalf("GetCleanup: %v %v", err, rep.Err)
		}
		return rep.Observation
	}
	if o := observe(live); o.State != messages.CleanupNotClosed || !o.Complete || len(o.Remaining) != 2 { // its container and network
		t.Fatalf("the live lease: %+v", o)
	}
	if o := observe(closed); o.State != messages.CleanupPending || !o.Complete || len(o.Remaining) != 2 {
		t.Fatalf("a closed lease whose objects remain: %+v", o)
	}
	if err := eng.StopRemove(context.Background(), ids[1], time.Second); err != nil {
		t.Fatal(err)
	}
	nets, _ := eng.LeaseNetworks(context.Background())
	for _, n := range nets {
		if n.Labels["fred.lease_uuid"] == closed {
			if err := eng.RemoveNetwork(context.Background(), n.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if o := observe(closed); o.State != messages.CleanupObservedClear || !o.Complete || len(o.Remaining) != 0 {
		t.Fatalf("a closed lease with nothing left: %+v", o)
	}
	eng.SetUnavailable(true)
	if o := observe(closed); o.State != messages.CleanupUnknown || o.Complete || o.Error != "docker_unavailable" {
		t.Fatalf("Docker unreachable: %+v, want unknown, incomplete, docker_unavailable", o)
	}
}
