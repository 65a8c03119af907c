package domaingate

// The gate actor in a real supervision tree, on the real store, asking real DNS
// servers on 127.0.0.x: nothing reaches the owner before the quorum sees the
// domain at the host; once it does, the opening is journaled and the owner told;
// a crash of the actor after the opening tells it again (the lease may not have
// recorded it), until the lease forgets the domain.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

const gatePath = supervisors.RootPath + "/domaingate"

// ownerProbe stands for the registry: it records every CustomDomainReady.
type ownerProbe struct {
	mu    sync.Mutex
	ready []messages.CustomDomainReady
}

func (p *ownerProbe) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.CustomDomainReady); ok {
		p.mu.Lock()
		p.ready = append(p.ready, *m)
		p.mu.Unlock()
	}
}

func (p *ownerProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startGate(t *testing.T, store supervisors.JournalStore, settings *Settings) (*supervisors.Tree, *ownerProbe) {
	t.Helper()
	owner := &ownerProbe{}
	settings.OwnerPath = supervisors.RootPath + "/registry"
	tree, err := supervisors.Start(supervisors.Options{
		Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(), Chaos: true,
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{
				{Name: "registry", Kind: "probe", Producer: func() actor.Actor { return owner }},
				{Name: "domaingate", Kind: "domaingate", Producer: New(&Deps{
					Env: supervisors.Env{Tree: tree, Log: zerolog.Nop(), Now: time.Now}, Store: store, Settings: settings})},
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
	eventually(t, "domaingate spawned", func() bool { _, ok := tree.Dir.Get(gatePath); return ok })
	return tree, owner
}

func openStore(t *testing.T) *persistence.Store {
	t.Helper()
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func TestGate_OpensOnlyAtQuorum_ToldAgainAfterACrash_UntilForgotten(t *testing.T) {
	store := openStore(t)
	z1 := startZone(t, "127.0.0.2", true, domain+". 60 IN A "+otherIP)
	z2 := startZone(t, "127.0.0.3", true, domain+". 60 IN A "+otherIP)
	z3 := startZone(t, "127.0.0.4", true, domain+". 60 IN A "+otherIP)
	settings := &Settings{Resolvers: resolvers(0, z1.Addr, z2.Addr, z3.Addr), CheckTimeout: 2 * time.Second,
		BackoffBase: 20 * time.Millisecond, BackoffCap: 40 * time.Millisecond}
	tree, owner := startGate(t, store, settings)

	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l1, Domain: domain})
	misses := func() int {
		st, _, err := Load(store)
		if err != nil || st.Gates[key(l1, domain)] == nil {
			return 0
		}
		return st.Gates[key(l1, domain)].Misses
	}
	eventually(t, "several journaled misses while the domain points elsewhere", func() bool { return misses() >= 3 })
	z1.Set(t, domain+". 60 IN A "+hostIP) // one of three: still short of the majority
	n := misses()
	eventually(t, "more misses with one resolver agreeing", func() bool { return misses() >= n+3 })
	if owner.count() != 0 {
		t.Fatalf("the owner was told before the quorum: %+v", owner.ready)
	}
	z2.Set(t, domain+". 60 IN CNAME edge.provider.example.", "edge.provider.example. 60 IN A "+hostIP)
	eventually(t, "the owner told", func() bool { return owner.count() == 1 })
	if r := owner.ready[0]; r.Lease != l1 || r.Domain != domain {
		t.Fatalf("ready %+v", r)
	}
	st, _, err := Load(store)
	if err != nil || !st.Gates[key(l1, domain)].Open {
		t.Fatalf("the opening is not journaled: %+v %v", st, err)
	}
	time.Sleep(150 * time.Millisecond) // several backoffs: an open gate is not checked again
	if owner.count() != 1 {
		t.Fatalf("%d readies, want 1", owner.count())
	}

	// A crash between the opening and the lease recording it: told again.
	tree.Send(gatePath, &messages.Crash{})
	eventually(t, "told again after the restart", func() bool { return owner.count() == 2 })

	tree.Send(gatePath, &messages.ForgetCustomDomain{Lease: l1})
	eventually(t, "the gate forgotten", func() bool { st, _, _ := Load(store); return len(st.Gates) == 0 })
	tree.Send(gatePath, &messages.Crash{})
	time.Sleep(150 * time.Millisecond)
	if owner.count() != 2 {
		t.Fatalf("%d readies after the gate was forgotten, want 2", owner.count())
	}
}

func TestGate_WaitingGateSurvivesRestart_OpensFromJournal(t *testing.T) {
	store := openStore(t)
	z := startZone(t, "127.0.0.2", false, domain+". 60 IN A "+otherIP)
	settings := &Settings{Resolvers: resolvers(1, z.Addr), CheckTimeout: 2 * time.Second,
		BackoffBase: time.Hour, BackoffCap: time.Hour} // no retry within the test: only a restart checks again
	tree, owner := startGate(t, store, settings)
	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l2, Domain: domain})
	eventually(t, "a journaled miss", func() bool {
		st, _, _ := Load(store)
		return st.Gates[key(l2, domain)] != nil && st.Gates[key(l2, domain)].Misses == 1
	})
	z.Set(t, domain+". 60 IN A "+hostIP)
	tree.Send(gatePath, &messages.Crash{})
	eventually(t, "opened on the restart's check", func() bool { return owner.count() == 1 })
}

func TestGate_CheckDisabled_OpensAtOnceWithoutDNS(t *testing.T) {
	store := openStore(t)
	settings := &Settings{Resolvers: resolvers(0, silentServer(t, "127.0.0.2")), CheckDisabled: true,
		BackoffBase: time.Hour, BackoffCap: time.Hour}
	tree, owner := startGate(t, store, settings)
	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l1, Domain: domain})
	eventually(t, "ready", func() bool { return owner.count() == 1 })
	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l1, Domain: domain}) // asked again: told again
	eventually(t, "ready again", func() bool { return owner.count() == 2 })
}

// A watch whose commit fails is neither checked nor reported.
func TestGate_FailedCommit_NothingChecked(t *testing.T) {
	store := &supervisors.FaultyStore{Store: openStore(t)}
	z := startZone(t, "127.0.0.2", true, domain+". 60 IN A "+hostIP)
	tree, owner := startGate(t, store, &Settings{Resolvers: resolvers(1, z.Addr), BackoffBase: time.Hour, BackoffCap: time.Hour})
	store.FailCommits(nil, nil)
	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l1, Domain: domain})
	info, err := supervisors.Ask(context.Background(), tree, gatePath, 5*time.Second, func(r chan<- messages.NodeInfo) any {
		return &messages.Describe{Reply: r}
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if store.Failed() != 1 || info.State != "0 custom domains, 0 open" || owner.count() != 0 {
		t.Fatalf("after a failed watch commit: %d failed, %+v, %d readies", store.Failed(), info, owner.count())
	}
}

// gates asks the gate actor what the debug API shows of lease's gates.
func gates(t *testing.T, tree *supervisors.Tree, lease string) []messages.DomainGateView {
	t.Helper()
	rep, err := supervisors.Ask(context.Background(), tree, gatePath, 5*time.Second, func(r chan<- messages.DomainGatesReply) any {
		return &messages.DebugDomainGates{Lease: lease, Reply: r}
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Gates
}

// The read the debug API serves: a waiting gate's attempts, last verdict and
// when, and its next check from the backoff; an open one without a next check;
// one lease's gates or all, in order; a forgotten gate is gone — and none of
// it changes what the gate decides (the opening is told once).
func TestGate_DebugRead_WaitingWithNextCheck_OpenAfterTheCheck_GoneWhenForgotten(t *testing.T) {
	store := openStore(t)
	z := startZone(t, "127.0.0.2", true, domain+". 60 IN A "+otherIP)
	settings := &Settings{Resolvers: resolvers(1, z.Addr), CheckTimeout: 2 * time.Second,
		BackoffBase: time.Hour, BackoffCap: time.Hour} // only a restart checks again
	tree, owner := startGate(t, store, settings)
	before := time.Now()
	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l2, Domain: domain})
	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l1, Domain: "blog.example.org"})
	tree.Send(gatePath, &messages.WatchCustomDomain{Lease: l1, Domain: domain})
	eventually(t, "three gates checked once", func() bool {
		all := gates(t, tree, "")
		return len(all) == 3 && all[0].Attempts == 1 && all[1].Attempts == 1 && all[2].Attempts == 1
	})
	all := gates(t, tree, "")
	if all[0].LeaseUUID != l1 || all[0].Domain != "blog.example.org" || all[1].Domain != domain || all[2].LeaseUUID != l2 {
		t.Fatalf("order: %+v", all)
	}
	for _, g := range all {
		if g.State != messages.GateWaiting || g.LastResult == "" || g.LastCheckAt == nil || g.LastCheckAt.Before(before) ||
			g.NextCheckAt == nil || !g.NextCheckAt.After(*g.LastCheckAt) || g.NextCheckAt.After(time.Now().Add(2*time.Hour)) ||
			g.Since.Before(before.Add(-time.Second)) || g.Checking {
			t.Fatalf("waiting gate %+v", g)
		}
	}
	if got := gates(t, tree, l2); len(got) != 1 || got[0].LeaseUUID != l2 {
		t.Fatalf("gates of %s: %+v", l2, got)
	}

	z.Set(t, domain+". 60 IN A "+hostIP)
	tree.Send(gatePath, &messages.Crash{}) // the restart checks every waiting gate
	eventually(t, "both gates of the domain open, every gate checked again", func() bool {
		all := gates(t, tree, "")
		return owner.count() == 2 && len(all) == 3 && all[0].Attempts == 2 && all[1].Attempts == 2 && all[2].Attempts == 2
	})
	for _, g := range gates(t, tree, "") {
		open := g.Domain == domain
		if open && (g.State != messages.GateOpen || g.Attempts != 2 || g.NextCheckAt != nil || !strings.Contains(g.LastResult, "at "+hostIP)) ||
			!open && (g.State != messages.GateWaiting || g.Attempts != 2 || g.NextCheckAt == nil) {
			t.Fatalf("after the restart's checks: %+v", g)
		}
	}
	tree.Send(gatePath, &messages.ForgetCustomDomain{Lease: l1})
	eventually(t, "the lease's gates gone", func() bool { return len(gates(t, tree, l1)) == 0 })
	if got := gates(t, tree, ""); len(got) != 1 || got[0].LeaseUUID != l2 || owner.count() != 2 {
		t.Fatalf("after forgetting %s: %+v, %d readies", l1, got, owner.count())
	}
}
